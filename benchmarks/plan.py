"""How close ``dbsync plan``'s lock-time estimates come to the real statements: the calibration.

    python benchmarks/plan.py [--backends postgresql,mysql,sqlite] [--rows 200000,1000000] [--repeat 2]

A table ``books`` (id, title VARCHAR(80), body VARCHAR(200), n INTEGER, author_id INTEGER) gets N
server-generated rows, and ``authors`` 10,000, on a throwaway server of 127.0.0.1 (SQLite: a file).
For each DDL kind the policy knows on the backend (add column with a constant or a volatile
default, SET NOT NULL, CHECK, CHECK NOT VALID + VALIDATE, index, unique index, index
CONCURRENTLY, UNIQUE constraint, foreign key, type changes; MariaDB INSTANT / INPLACE / COPY)
and each size, ``--repeat`` rounds, each on a freshly filled table:

A. the plan: the statement recorded offline and classified as ``dbsync plan`` does
   (``lint.offline.recorder`` -> ``policy.script.annotate`` -> ``plan._plan_statement``, with this
   round's own measured rates), giving the lock, the work and the estimated seconds;
B. the real statement, timed (autocommit: its lock is held exactly while it runs).

Printed per statement: the plan's work and estimate, the real seconds, the per-round ratios
estimate / real and their median (goal: within 2x either way).  A statement the plan says holds
no blocking lock (estimate 0) is printed with its real time and no ratio: the plan promises only
that it blocks nobody for long.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
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

from migrations_policy import plan as planner  # noqa: E402
from migrations_policy.lint.offline import recorder  # noqa: E402
from migrations_policy.plan import rate as rates  # noqa: E402
from migrations_policy.policy.script import annotate  # noqa: E402

AUTHORS = 10_000
meta = sa.MetaData()
books = sa.Table("books", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("title", sa.String(80)), sa.Column("body", sa.String(200)),
                 sa.Column("n", sa.Integer), sa.Column("author_id", sa.Integer))
authors = sa.Table("authors", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))


def fill(engine: sa.Engine, rows: int) -> None:
    books.drop(engine, checkfirst=True)  # first: its foreign key (added by a case) references authors
    authors.drop(engine, checkfirst=True)
    meta.create_all(engine)
    seq = numbers(engine, rows)
    text = sa.cast(seq.c.i, sa.String(20))
    with engine.begin() as conn:
        conn.execute(authors.insert().from_select(["id"], sa.select(numbers(engine, AUTHORS).c.i)))
        conn.execute(books.insert().from_select(
            ["id", "title", "body", "n", "author_id"],
            sa.select(seq.c.i, sa.literal("title ") + text,
                      sa.literal("a body of some length, row ") + text + sa.literal(" ........................."),
                      seq.c.i, seq.c.i % AUTHORS + 1)))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE books")  # fixed names of this script's tables
        elif engine.dialect.name == "mysql":
            conn.exec_driver_sql("ANALYZE TABLE books").all()


def _validate(op) -> None:
    op.execute("ALTER TABLE books ADD CONSTRAINT ck_books_nv CHECK (n >= 0) NOT VALID")
    op.execute("ALTER TABLE books VALIDATE CONSTRAINT ck_books_nv")


def _recreate(op) -> None:
    with op.batch_alter_table("books", recreate="always") as batch:
        batch.alter_column("title", nullable=False, existing_type=sa.String(80))


_COMMON = [
    ("add column, constant default", lambda op: op.add_column("books", sa.Column("flag", sa.Integer,
                                                                                server_default="0"))),
    ("SET NOT NULL", lambda op: op.alter_column("books", "title", nullable=False, existing_type=sa.String(80))),
    ("ADD CHECK", lambda op: op.create_check_constraint("ck_books_n", "books", "n >= 0")),
    ("CREATE INDEX", lambda op: op.create_index("ix_books_title", "books", ["title"])),
    ("CREATE UNIQUE INDEX", lambda op: op.create_index("ux_books_title", "books", ["title"], unique=True)),
    ("ADD UNIQUE", lambda op: op.create_unique_constraint("uq_books_title", "books", ["title"])),
    ("ADD FOREIGN KEY", lambda op: op.create_foreign_key("fk_books_author", "books", "authors",
                                                         ["author_id"], ["id"])),
    ("TYPE varchar shrink", lambda op: op.alter_column("books", "body", type_=sa.String(150),
                                                       existing_type=sa.String(200))),
    ("TYPE int -> bigint", lambda op: op.alter_column("books", "n", type_=sa.BigInteger, existing_type=sa.Integer)),
]
CASES = {
    "postgresql": _COMMON + [
        ("add column, volatile default", lambda op: op.add_column(
            "books", sa.Column("token", sa.Uuid, server_default=sa.text("gen_random_uuid()")))),
        ("CHECK NOT VALID + VALIDATE", _validate),
        ("CREATE INDEX CONCURRENTLY", lambda op: op.create_index("ix_books_body", "books", ["body"],
                                                                 postgresql_concurrently=True)),
    ],
    "mysql": _COMMON + [
        ("add column, volatile default", lambda op: op.add_column(
            "books", sa.Column("token", sa.String(36), server_default=sa.text("(uuid())")))),
    ],
    "sqlite": [("batch recreate", _recreate),
               ("add column, constant default", _COMMON[0][1]),
               ("CREATE INDEX", _COMMON[3][1])],
}


def planned(conn, dialect: str, fn) -> list:
    """The plan's statements for *fn* (recorded offline and judged as ``dbsync plan`` does)."""
    from alembic import op

    recording, error = recorder.run_offline(lambda: fn(op), dialect, "bench.py")
    if error is not None:
        raise error
    operations = annotate([o for o, _ in recording.ops])
    context = planner._context(conn)
    measured, sizes, created = rates.Rates(conn), {}, set()
    return [planner._plan_statement(conn, o, line, dialect, context, sizes, created, measured)
            for o, (_, line) in zip(operations, recording.ops)]


def timed(engine: sa.Engine, fn) -> float:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        op = Operations(MigrationContext.configure(conn))
        started = time.perf_counter()
        fn(op)
        return time.perf_counter() - started


def run(engine: sa.Engine, sizes: list[int], repeat: int, only: set[str] | None) -> list[tuple]:
    dialect = "mysql" if engine.dialect.name == "mariadb" else engine.dialect.name
    found = []
    for rows in sizes:
        for label, fn in CASES[dialect]:
            if only and label not in only:
                continue
            estimates, reals, works = [], [], set()
            for _ in range(repeat):
                fill(engine, rows)
                with engine.connect() as conn:
                    statements = planned(conn, dialect, fn)
                    conn.rollback()
                estimates.append(sum(s.seconds or 0.0 for s in statements))
                works |= {f"{s.work} ({s.lock})" if s.work else f"{s.lock}{', blocking' if s.blocking else ''}"
                          for s in statements}
                reals.append(timed(engine, fn))
            ratios = [e / r for e, r in zip(estimates, reals)] if all(estimates) else []
            median = statistics.median(ratios) if ratios else None
            found.append((dialect, rows, label, works, estimates, reals, ratios, median))
            print(f"{dialect} {rows:>9,} {label:30} plan {'; '.join(sorted(works))}: estimate "
                  + ", ".join(f"{e:.3f}" for e in estimates) + " s; real " + ", ".join(f"{r:.3f}" for r in reals)
                  + " s" + (("; ratios " + ", ".join(f"{x:.2f}" for x in ratios) + f"; median {median:.2f}x")
                            if ratios else "; no blocking estimate"), flush=True)
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="postgresql,mysql,sqlite")
    parser.add_argument("--rows", default="200000,1000000", help="table sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", default="", help="statement labels to measure, comma-separated (default: all)")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.rows.split(",")]
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    from migrations_policy.testing import servers

    results = []
    for backend in args.backends.split(","):
        if backend == "sqlite":
            directory = tempfile.mkdtemp()
            engine = sa.create_engine(f"sqlite:///{directory}/plan.db")
            try:
                results += run(engine, sizes, args.repeat, only)
            finally:
                engine.dispose()
                shutil.rmtree(directory, ignore_errors=True)
            continue
        server = servers.STARTERS[backend]()
        try:
            url = server.create_database()
            engine = sa.create_engine(url)
            try:
                results += run(engine, sizes, args.repeat, only)
            finally:
                engine.dispose()
                server.drop_database(url)
        finally:
            server.stop()
    print("\nbackend     rows       statement                      median estimate/real (per round)")
    for dialect, rows, label, _, _, reals, ratios, median in results:
        print(f"{dialect:10} {rows:>10,} {label:30} " + (f"{median:5.2f}x (" + ", ".join(f"{x:.2f}" for x in ratios)
                                                          + ")" if ratios else
                                                          f"no blocking estimate (real {statistics.median(reals):.3f} s)"))


if __name__ == "__main__":
    main()
