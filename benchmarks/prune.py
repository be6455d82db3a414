"""Prune benchmark: delete the soft-deleted half of N rows, two ways, per backend.

* ``single DELETE``: one set-based statement (the limit; it holds its row locks for
  the whole run);
* ``prune bN``: ``dbsync prune``'s engine (``migrations_policy.data.prune.run_prunes``)
  at fixed batch sizes, and ``prune ≤50ms`` sizing batches to a time target; with
  ``--shadow`` each batch also copies its rows to a shadow table first.

Every method starts from a freshly filled table; the ratio column compares with the
single DELETE of the same run.  PostgreSQL and MariaDB come from
``migrations_policy.testing.servers`` (throwaway servers on 127.0.0.1).

    python benchmarks/prune.py                                   # 200k rows on SQLite, PostgreSQL, MariaDB
    python benchmarks/prune.py --rows 1000000 --backends postgresql --shadow
"""

from __future__ import annotations

import argparse
import tempfile
import time

import sqlalchemy as sa

from migrations_policy.data import ledger
from migrations_policy.data.prune import Prune, run_prunes
from migrations_policy.data.runner import RunOptions

metadata = sa.MetaData()
items = sa.Table("bench_prune", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("payload", sa.String(40)), sa.Column("deleted", sa.Integer))
shadow = sa.Table("bench_prune_shadow", metadata, sa.Column("id", sa.Integer, primary_key=True,
                                                            autoincrement=False),
                  sa.Column("payload", sa.String(40)), sa.Column("deleted", sa.Integer))
PRUNABLE = items.c.deleted.is_not(None)


def fill(engine: sa.Engine, rows: int) -> None:
    metadata.drop_all(engine)
    ledger.metadata.drop_all(engine)
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)
    with engine.begin() as conn:
        for start in range(0, rows, 20000):
            conn.execute(sa.insert(items), [{"id": i, "payload": f"row {i}", "deleted": 1 if i % 2 else None}
                                            for i in range(start + 1, min(rows, start + 20000) + 1)])


def single_delete(engine: sa.Engine, with_shadow: bool) -> float:
    started = time.perf_counter()
    with engine.begin() as conn:
        if with_shadow:
            conn.execute(sa.insert(shadow).from_select(["id", "payload", "deleted"],
                                                       sa.select(items).where(PRUNABLE)))
        conn.execute(sa.delete(items).where(PRUNABLE))
    return time.perf_counter() - started


def pruned(engine: sa.Engine, with_shadow: bool, size: int, seconds: float | None) -> tuple[float, int]:
    prune = Prune("bench", table=items, key="id", where=PRUNABLE,
                  shadow="bench_prune_shadow" if with_shadow else None)
    started = time.perf_counter()
    report, _ = run_prunes(engine, [prune], RunOptions(batch_size=size, batch_seconds=seconds))
    elapsed = time.perf_counter() - started
    assert report.exit_code == 0, report.text()
    return elapsed, report.migrated


def engines(backends: list[str], directory: str):
    from migrations_policy.testing import servers

    for name in backends:
        if name == "sqlite":
            yield name, sa.create_engine(f"sqlite:///{directory}/prune.db"), None
        else:
            server = servers.STARTERS[name]()
            url = server.create_database("prune")
            yield name, sa.create_engine(url), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--shadow", action="store_true", help="copy to a shadow table first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for name, engine, server in engines(args.backends.split(","), directory):
            try:
                fill(engine, args.rows)
                baseline = single_delete(engine, args.shadow)
                deleted = args.rows // 2
                print(f"\n{name}: {args.rows:,} rows, {deleted:,} prunable{' (shadow copy)' if args.shadow else ''}")
                print(f"  {'method':<16} {'seconds':>8} {'rows/s':>10} {'x DELETE':>9}")
                print(f"  {'single DELETE':<16} {baseline:>8.2f} {deleted / baseline:>10,.0f} {1:>9.2f}")
                for label, size, seconds in (("prune b1000", 1000, None), ("prune b5000", 5000, None),
                                             ("prune ≤50ms", 5000, 0.05)):
                    fill(engine, args.rows)
                    elapsed, rows = pruned(engine, args.shadow, size, seconds)
                    assert rows == deleted, (rows, deleted)
                    print(f"  {label:<16} {elapsed:>8.2f} {rows / elapsed:>10,.0f} {baseline / elapsed:>9.2f}")
            finally:
                engine.dispose()
                if server is not None:
                    server.stop()


if __name__ == "__main__":
    main()
