"""The runner is invisible to live traffic (issue 27 §5): application transactions that lock many
rows in random orders while batches run never fail (no deadlock, no lock timeout of theirs);
the runner is the one that yields (a short lock wait on its own session, its batch retried
smaller), reports how often it did, and still migrates every row exactly once."""

from __future__ import annotations

import random
import threading
import time

import pytest
import sqlalchemy as sa

from migrations_policy.data import DataMigration, Registry, RunOptions, run

metadata = sa.MetaData()
rows_table = sa.Table(
    "busy_rows", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("src", sa.String(40)),
    sa.Column("dst", sa.String(40)),
    sa.Column("n", sa.Integer, nullable=False, server_default="0"),
    sa.Column("hits", sa.Integer, nullable=False, server_default="0"),
)
t = sa.table("busy_rows", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
PENDING = sa.and_(t.c.dst.is_(None), t.c.src.is_not(None))
COPY = DataMigration("copy_busy", table=t, key="id", pending=PENDING, values={"dst": t.c.src, "n": t.c.n + 1})


def function_form(seed: int) -> DataMigration:
    """The function form: the project's own statements, which the runner does not write.  Each
    batch updates its rows in one statement, or one by one in a random order (drawn from *seed*),
    so its lock order is the project's, not the runner's key order."""
    local = random.Random(seed)

    def copy(conn, batch):
        if local.random() < 0.5:
            return conn.execute(sa.update(t).where(batch.where).values(dst=t.c.src, n=t.c.n + 1)).rowcount
        keys = list(conn.execute(sa.select(t.c.id).where(batch.where)).scalars())
        local.shuffle(keys)
        for key in keys:
            conn.execute(sa.update(t).where(t.c.id == key, PENDING).values(dst=t.c.src, n=t.c.n + 1))
        return len(keys)

    return DataMigration("copy_busy_fn", table=t, key="id", pending=PENDING, migrate=copy)


@pytest.fixture
def server_backend(backend):
    if backend == "sqlite":
        pytest.skip("one writer at a time: SQLite has no row locks to yield")
    return backend


@pytest.mark.parametrize("form", ["set-based", "function"])
def test_application_transactions_locking_rows_in_random_orders_never_fail(db_engine, server_backend, form, request):
    seed = random.randrange(2**32)
    print(f"\n{request.node.name}: seed {seed}")
    rng = random.Random(seed)
    total = rng.randint(3000, 8000) if form == "set-based" else rng.randint(1500, 4000)
    migration = COPY if form == "set-based" else function_form(rng.randrange(2**32))
    metadata.create_all(db_engine)
    from migrations_policy.data import ledger
    ledger.metadata.create_all(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(rows_table), [{"id": i, "src": f"v{i}"} for i in range(1, total + 1)])

    stop = threading.Event()
    errors: list[str] = []
    committed = [0]
    app_engine = sa.create_engine(db_engine.url, pool_size=8)

    writers = 3

    def application(worker_seed: int, part: int) -> None:
        """Rows of its own part only (key % writers): the writers cannot deadlock one another,
        so any failure is the runner's doing."""
        local = random.Random(worker_seed)
        while not stop.is_set():
            width = local.choice([5, 20, 60])
            first = local.randint(1, max(1, total - 4 * writers * width))
            keys = local.sample([k for k in range(first, min(total, first + 4 * writers * width) + 1)
                                 if k % writers == part], width)
            order = local.choice(["descending", "random", "ascending"])
            keys.sort(reverse=order == "descending") if order != "random" else None
            try:
                with app_engine.begin() as conn:
                    for key in keys:
                        conn.execute(sa.update(rows_table).where(rows_table.c.id == key)
                                     .values(hits=rows_table.c.hits + 1))
                        if local.random() < 0.1:
                            time.sleep(local.uniform(0, 0.003))
                committed[0] += 1
            except sa.exc.DBAPIError as exc:  # any failure the runner caused to live traffic
                errors.append(f"{order} {len(keys)} keys: {str(exc.orig).splitlines()[0]}")

    threads = [threading.Thread(target=application, args=(rng.randrange(2**32), part)) for part in range(writers)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.2)
        report = run(db_engine, Registry([migration]), RunOptions(batch_size=rng.choice([200, 1000, 5000]),
                                                            workers=rng.choice([1, 2])))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        app_engine.dispose()
    [migration] = report.migrations
    print(f"application transactions committed: {committed[0]}, failed: {len(errors)}; "
          f"runner yielded {getattr(migration, 'yielded', '?')} time(s); exit {report.exit_code} {migration.error or ''}")
    assert errors == [], errors[:5]
    assert report.exit_code == 0, migration.error
    with db_engine.connect() as conn:
        counts = dict(conn.execute(sa.select(rows_table.c.n, sa.func.count()).group_by(rows_table.c.n)).all())
        assert counts == {1: total}, counts  # every row migrated exactly once
        assert conn.execute(sa.select(sa.func.count()).select_from(rows_table)
                            .where(rows_table.c.dst != rows_table.c.src)).scalar() == 0
