"""A set-based batch's bookkeeping (issue 24): bounded, exact, and it never makes the batch wait.

* A batch's statements do not grow with its size (PostgreSQL: the UPDATE, which sets its own
  lock wait, and the claim's advance with the ledger's counts; MariaDB: the UPDATE carrying its lock wait, the
  claim, the ledger), the ledger counts exactly the rows the batches migrated, each row is
  migrated once, and no claim is left.
* The batch gives way to the application: a row an application transaction holds locked makes
  the batch roll back and retry (``yielded``), it never waits for the application.

Generated cases; the seed is printed (``MP_TEST_SEED`` replays one)."""

from __future__ import annotations

import os
import random
import threading

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from migrations_policy.data import DataMigration, Registry, RunOptions, ledger, run

from migrations_policy.data.walk import claim_table

CASES = 3
metadata = sa.MetaData()
items = sa.Table("bs_items", metadata,
                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("src", sa.String(40)), sa.Column("dst", sa.String(40)),
                 sa.Column("n", sa.Integer, nullable=False, server_default="0"))
t = sa.table("bs_items", sa.column("id", sa.Integer), sa.column("src", sa.String), sa.column("dst", sa.String),
             sa.column("n", sa.Integer))
COPY = DataMigration("bs_copy", table=t, key="id", pending=sa.and_(t.c.dst.is_(None), t.c.src.is_not(None)),
                     values={"dst": t.c.src, "n": t.c.n + 1})


def _seed() -> int:
    seed = int(os.environ.get("MP_TEST_SEED") or random.randrange(2**32))
    print(f"MP_TEST_SEED={seed}")
    return seed


def _fill(engine: sa.Engine, rng: random.Random) -> tuple[int, int]:
    """A fresh table: (rows, rows pending); the others already migrated (n stays 0)."""
    metadata.drop_all(engine)
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)
    count = rng.randint(800, 4000)
    done = set(rng.sample(range(1, count + 1), rng.randint(0, count // 3)))
    with engine.begin() as conn:
        conn.execute(sa.delete(ledger.ledger))
        if sa.inspect(conn).has_table(claim_table.CLAIMS_TABLE):
            conn.execute(sa.delete(claim_table.claims_table))
        conn.execute(sa.insert(items), [{"id": i, "src": f"v{i}", "dst": f"v{i}" if i in done else None}
                                        for i in range(1, count + 1)])
    return count, count - len(done)


class _Transactions:
    """The statements of every transaction that updated ``bs_items``, as the driver saw them."""

    def __init__(self, engine: sa.Engine):
        self.engine, self.open, self.batches = engine, {}, []
        event.listen(engine, "before_cursor_execute", self.statement)
        event.listen(engine, "commit", self.commit)
        event.listen(engine, "rollback", self.rollback)

    def statement(self, conn, cursor, text, *args):
        text = " ".join(text.split())
        if text == "COMMIT":  # SQLite: the batch's own BEGIN IMMEDIATE ... COMMIT
            return self.commit(conn)
        if text.startswith("BEGIN") or text == "ROLLBACK":
            return self.rollback(conn)
        self.open.setdefault(id(conn.connection.dbapi_connection), []).append(text)

    def commit(self, conn):
        done = self.open.pop(id(conn.connection.dbapi_connection), [])
        if any("UPDATE bs_items" in s or "UPDATE `bs_items`" in s for s in done):
            self.batches.append(done)

    def rollback(self, conn):
        self.open.pop(id(conn.connection.dbapi_connection), None)

    def remove(self):
        event.remove(self.engine, "before_cursor_execute", self.statement)
        event.remove(self.engine, "commit", self.commit)
        event.remove(self.engine, "rollback", self.rollback)


def test_a_set_based_batch_sends_a_bounded_number_of_statements_and_counts_exactly(db_engine, backend):
    seed = _seed()
    rng = random.Random(seed)
    for case in range(CASES):
        count, pending = _fill(db_engine, rng)
        size = rng.choice([37, 150, 600, 2500])
        seen = _Transactions(db_engine)
        try:
            report = run(db_engine, Registry([COPY]), RunOptions(batch_size=size))
        finally:
            seen.remove()
        [m] = report.migrations
        note = f"seed {seed} case {case}: {count} rows, {pending} pending, batches of {size}"
        assert m.state == ledger.COMPLETE and m.migrated == pending, (note, m.state, m.migrated, m.error)
        with db_engine.connect() as conn:
            counts = dict(conn.execute(sa.select(items.c.n, sa.func.count()).group_by(items.c.n)).all())
            assert counts == {k: v for k, v in {0: count - pending, 1: pending}.items() if v}, (note, counts)
            assert conn.execute(sa.select(sa.func.count()).select_from(items)
                                .where(items.c.dst.is_(None))).scalar() == 0, note
            migrated = conn.execute(sa.select(ledger.ledger.c.rows_migrated)
                                    .where(ledger.ledger.c.name == COPY.name)).scalar()
            assert migrated == pending, (note, migrated)
            if sa.inspect(conn).has_table(claim_table.CLAIMS_TABLE):  # none left behind (SQLite: never claims)
                assert conn.execute(sa.select(sa.func.count()).select_from(claim_table.claims_table)).scalar() == 0, note
        assert seen.batches, note
        most = max(len(b) for b in seen.batches)
        # PostgreSQL: the UPDATE (setting its own lock wait), the claim's advance with the ledger's
        # counts; MariaDB: + the quiet SET, once
        bound = {"postgresql": 2, "mysql": 4, "sqlite": 4}[backend]
        assert most <= bound, (note, f"{most} statements in a batch", max(seen.batches, key=len))


def test_a_set_based_batch_gives_way_to_a_row_the_application_holds(db_engine, backend):
    """An application transaction holds one pending row locked until the runner has given way
    at least once (or, if it never does, until the run would otherwise wait on it for good)."""
    if backend == "sqlite":
        pytest.skip("one writer at a time: SQLite has no row locks to yield")
    seed = _seed()
    rng = random.Random(seed)
    count, pending = _fill(db_engine, rng)
    with db_engine.connect() as conn:
        keys = conn.execute(sa.select(items.c.id).where(items.c.dst.is_(None))).scalars().all()
    held_key = rng.choice(keys)
    gave_way, holding, released = threading.Event(), threading.Event(), threading.Event()
    app = sa.create_engine(db_engine.url)

    def hold() -> None:
        with app.connect() as conn:
            conn.execute(sa.select(items.c.id).where(items.c.id == held_key).with_for_update()).all()
            holding.set()
            gave_way.wait(60)  # the runner gives way within its lock wait (100 ms), retrying behind it
            conn.commit()
        released.set()

    class Watch:
        def update(self, migrations, current=None):
            if migrations[0].yielded:
                gave_way.set()

        def close(self):
            pass

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30)
        report = run(db_engine, Registry([COPY]), RunOptions(batch_size=rng.choice([50, 400, 3000])), progress=Watch())
    finally:
        gave_way.set()
        thread.join()
        app.dispose()
    [m] = report.migrations
    note = f"seed {seed}: {count} rows, row {held_key} held"
    assert m.yielded >= 1, (note, "the batch waited for the application's lock instead of giving way")
    assert m.state == ledger.COMPLETE and m.migrated == pending, (note, m.state, m.migrated, m.error)
    with db_engine.connect() as conn:
        assert conn.execute(sa.select(items.c.n).where(items.c.id == held_key)).scalar() == 1, note
