"""An interrupt (Ctrl-C, or the SIGTERM ``dbsync`` turns into one) that lands while a batch's
statement runs leaves nothing holding the database: the runner's bookkeeping after it (the
``interrupted`` state, the final state of the migrations whose walk had ended) is written, and
another session can write at once.

Found by the fresh-clone CI (stop 32): on SQLite, SQLAlchemy treats an interrupt inside a statement
as a disconnect and closes the DBAPI connection; CPython's ``sqlite3`` closes a connection whose
cursor is still referenced (here: by the interrupt's traceback) into a zombie that keeps its write
lock until the cursor is freed, so the finished migrations' final states failed with "database is
locked" after the 5 s busy timeout.

Drawn (seed in every assertion message): the table sizes, the batch size, and the statement of the
run the interrupt lands in, once the big migration's first batch has run.  And an interrupt is
never swallowed: a cleanup step that failed on the connection it invalidated used to replace it
with an error the runner recorded as the migration's, and the run went on (PostgreSQL, MariaDB).  A signal that arrives while the driver runs a
statement is raised as soon as the driver returns: the interrupt is raised there (an
``after_cursor_execute`` listener), the moment the signal would have been handled.
"""

from __future__ import annotations

import os
import random
import re

import pytest
import sqlalchemy as sa

from migrations_policy.core.engines import open_engine
from migrations_policy.data import DataMigration, Registry, RunOptions, ledger, run

#: The big migration's batch (the table's name as each dialect quotes it, or not).
UPDATES_BIG = re.compile(r"\bUPDATE\s+[`\"]?big\b", re.IGNORECASE)
SEEDS = ([int(os.environ["MP_INTERRUPT_RELEASE_SEED"])] if os.environ.get("MP_INTERRUPT_RELEASE_SEED") else
         [random.randrange(1 << 30) for _ in range(int(os.environ.get("MP_INTERRUPT_RELEASE_CASES", "3")))])


def _tables(engine: sa.Engine, rng: random.Random, batch: int) -> dict[str, sa.Table]:
    meta = sa.MetaData()
    tables = {name: sa.Table(name, meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                             sa.Column("src", sa.String(40)), sa.Column("dst", sa.String(40)))
              for name in ("small", "big")}
    meta.create_all(engine)
    ledger.metadata.create_all(engine)
    sizes = {"small": rng.randrange(1, batch), "big": batch * rng.randrange(3, 8)}
    with engine.begin() as conn:
        for name, size in sizes.items():
            conn.execute(sa.insert(tables[name]), [{"id": i, "src": f"v{i}"} for i in range(1, size + 1)])
    return tables


def sizes_of(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()


@pytest.mark.parametrize("seed", SEEDS)
def test_an_interrupt_inside_a_statement_leaves_the_database_writable(backend, db_url, seed):
    rng = random.Random(seed)
    where = f"seed={seed} ({backend})"
    engine = open_engine(db_url)  # the engine dbsync uses
    try:
        batch = rng.randrange(50, 400)
        tables = _tables(engine, rng, batch)
        small, big = tables["small"], tables["big"]
        registry = Registry([
            DataMigration("copy_small", table=small, key="id", pending=small.c.dst.is_(None),
                          values={"dst": small.c.src}),
            DataMigration("copy_big", table=big, key="id", pending=big.c.dst.is_(None), values={"dst": big.c.src}),
        ])

        batches = -(-sizes_of(engine, big) // batch)
        # any statement of the run once the big walk's first batch has run (the ledger's, the claims',
        # the other walk's, the final counts'): a target past the run's last statement interrupts nothing
        target, seen, raised = rng.randrange(1, 6 * batches), [], []

        def interrupt(conn, cursor, statement, parameters, context, executemany):
            if seen or UPDATES_BIG.search(statement):
                seen.append(statement)
                if len(seen) == target + 1:
                    raised.append(statement)
                    raise KeyboardInterrupt(f"interrupted after statement #{len(seen)}")

        sa.event.listen(engine, "after_cursor_execute", interrupt)
        try:
            report = run(engine, registry, RunOptions(batch_size=batch, batch_seconds=None))
        finally:
            sa.event.remove(engine, "after_cursor_execute", interrupt)
        where += f", interrupted after statement {target + 1} of {len(seen)}: {raised[0][:80] if raised else None!r}"
        assert report.interrupted == bool(raised), (where, [(m.name, m.state, m.error) for m in report.migrations])
        with engine.connect() as conn:
            recorded = ledger.read(conn)
            left = {name: conn.execute(sa.select(sa.func.count()).select_from(t).where(t.c.dst.is_(None))).scalar()
                    for name, t in tables.items()}
        for m in report.migrations:  # stopped (its last batch may have committed), or complete once found so
            assert m.error is None, (where, m.name, m.error)
            assert m.state in ((ledger.INTERRUPTED, ledger.COMPLETE) if raised else (ledger.COMPLETE,)), (where, m)
            assert m.state == ledger.INTERRUPTED or left[m.name.removeprefix("copy_")] == 0, (where, m.name, left)
            assert recorded[m.name]["state"] == m.state, (where, m.name, recorded)
        # another session writes at once: no session of the interrupted run holds a lock
        other = sa.create_engine(db_url, **({"connect_args": {"timeout": 0}} if backend == "sqlite" else {}))
        try:
            with other.begin() as conn:
                conn.execute(sa.update(big).where(big.c.id == 1).values(src="written"))
        finally:
            other.dispose()
    finally:
        engine.dispose()
