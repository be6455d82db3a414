"""How close ``dbsync plan``'s durations come to the real statements: the work factors' calibration.

    python benchmarks/plan.py [--backends postgresql,mysql,sqlite] [--rows 200000] [--repeat 2]

A table ``books`` (id, title VARCHAR(80), body VARCHAR(200)) gets N server-generated rows on a
throwaway server of 127.0.0.1 (SQLite: a file).  Per backend:

1. the plan's ingredients, as ``dbsync plan`` gets them: the table's size (``plan.sizes``) and
   the read rate measured on it (``plan.rate``: a timed sequential read of a sample);
2. the real statements of each kind of work the policy says blocks, each timed alone
   (PostgreSQL: SET NOT NULL = scan, CREATE INDEX = index build, ALTER TYPE = rewrite;
   MariaDB: MODIFY to a shorter type = ALGORITHM=COPY rewrite, SET NOT NULL = INPLACE rebuild;
   SQLite: batch recreate = rewrite);
3. the factor each measures: real seconds / (rows / read rate), next to the one
   ``plan.rate.WORK_FACTORS`` uses, and the plan's estimate / real ratio.

Best of ``--repeat`` for the real statements (each repeat on a fresh copy of the table).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _numbers import numbers  # noqa: E402

from migrations_policy.plan import rate as rates  # noqa: E402
from migrations_policy.plan.sizes import table_size  # noqa: E402


def fill(engine: sa.Engine, rows: int) -> None:
    meta = sa.MetaData()
    books = sa.Table("books", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                     sa.Column("title", sa.String(80)), sa.Column("body", sa.String(200)))
    meta.drop_all(engine)
    meta.create_all(engine)
    seq = numbers(engine, rows)
    text = sa.cast(seq.c.i, sa.String(20))
    with engine.begin() as conn:
        conn.execute(books.insert().from_select(
            ["id", "title", "body"],
            sa.select(seq.c.i, sa.literal("title ") + text,
                      sa.literal("a body of some length, row ") + text + sa.literal(" ........................."))))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("VACUUM ANALYZE books"))
        elif engine.dialect.name == "mysql":
            conn.execute(sa.text("ANALYZE TABLE books")).fetchall()


def statements(dialect: str) -> list[tuple[str, str, object]]:
    """(label, work, fn(op)) per blocking statement the policy names on *dialect*."""
    if dialect == "postgresql":
        return [("SET NOT NULL", rates.SCAN, lambda op: op.alter_column("books", "title", nullable=False,
                                                                          existing_type=sa.String(80))),
                ("CREATE INDEX", rates.INDEX, lambda op: op.create_index("ix_books_title", "books", ["title"])),
                ("ALTER TYPE", rates.REWRITE, lambda op: op.alter_column("books", "body", type_=sa.String(150),
                                                                         existing_type=sa.String(200)))]
    if dialect == "mysql":
        return [("MODIFY (COPY)", rates.REWRITE, lambda op: op.alter_column("books", "body", type_=sa.String(150),
                                                                           existing_type=sa.String(200))),
                ("SET NOT NULL (INPLACE)", rates.REWRITE,
                 lambda op: op.alter_column("books", "title", nullable=False, existing_type=sa.String(80)))]
    return [("batch recreate", rates.REWRITE, _recreate)]


def _recreate(op) -> None:
    with op.batch_alter_table("books", recreate="always") as batch:
        batch.alter_column("title", nullable=False, existing_type=sa.String(80))


def timed(engine: sa.Engine, fn) -> float:
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        started = time.perf_counter()
        fn(op)
        return time.perf_counter() - started


def run(engine: sa.Engine, rows: int, repeat: int) -> None:
    dialect = "mysql" if engine.dialect.name == "mariadb" else engine.dialect.name
    fill(engine, rows)
    with engine.connect() as conn:
        size = table_size(conn, "books")
        rate = rates.measure(conn, "books")
    per_second = rate.rows_per_second
    print(f"{dialect}: {rows:,} rows; size reports {size.rows:,} rows ({'estimate' if size.estimated else 'count'}),"
          f" {size.bytes or 0:,} bytes; read rate {per_second:,.0f} rows/s ({rate.rows:,} rows in {rate.seconds:.3f} s)")
    for label, work, fn in statements(dialect):
        best = None
        for _ in range(repeat):
            fill(engine, rows)
            seconds = timed(engine, fn)
            best = seconds if best is None else min(best, seconds)
        read_seconds = size.rows / per_second
        factor = rates.WORK_FACTORS[dialect][work]
        estimate = rates.seconds_for(size.rows, rate, work, dialect)
        print(f"  {label:24} {work:12} real {best:7.3f} s; measured factor {best / read_seconds:6.1f} "
              f"(plan uses {factor:g}); estimate {estimate:7.3f} s = {estimate / best:5.2f}x real")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="postgresql,mysql,sqlite")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    from migrations_policy.testing import servers

    for backend in args.backends.split(","):
        if backend == "sqlite":
            directory = tempfile.mkdtemp()
            engine = sa.create_engine(f"sqlite:///{directory}/plan.db")
            try:
                run(engine, args.rows, args.repeat)
            finally:
                engine.dispose()
                shutil.rmtree(directory, ignore_errors=True)
            continue
        server = servers.STARTERS[backend]()
        try:
            url = server.create_database()
            engine = sa.create_engine(url)
            try:
                run(engine, args.rows, args.repeat)
            finally:
                engine.dispose()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
