"""Many runners, many hosts: 1, 2, 4 ``dbsync online_data_migrations`` processes on one big migration.

    python benchmarks/scaling.py [--backends postgresql,mysql] [--rows 300000] [--runners 1,2,4] [--repeat 1]

A table ``bench_items`` (id, src, dst) gets N server-generated rows on a throwaway server of
127.0.0.1; one set-based data migration copies ``src`` to ``dst``.  For each runner count,
on a freshly filled table, that many separate ``dbsync online_data_migrations`` processes
start at once (as separate hosts would run them: they coordinate only through the
database), with the default batch settings, and each reports what it migrated.

rows/s is N over the window from the first runner's start to the last runner's end (each
runner's start is its end minus the run time it reports, so interpreter start-up is not
counted); ``x 1`` is the ratio to one runner; ``shares`` the rows each runner migrated.
One set-based ``UPDATE`` of the whole table on the same server is the baseline; the
database's own limit for N writers is N connections of this script running range
``UPDATE``s of 20,000 keys on disjoint ranges, with no runner in between (``limit``:
its rows/s; ``x limit``: the runners' share of it).  The run checks that nothing is left
pending and that every runner exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _numbers import numbers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
metadata = sa.MetaData()
bench = sa.Table("bench_items", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("src", sa.String(40)), sa.Column("dst", sa.String(40)))
PENDING = sa.and_(bench.c.dst.is_(None), bench.c.src.is_not(None))

MODULE = '''
import sqlalchemy as sa
from migrations_policy.data import DataMigration

items = sa.table("bench_items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"))
copy = DataMigration("bench_copy", table=items, key="id",
                     pending=sa.and_(items.c.dst.is_(None), items.c.src.is_not(None)), values={"dst": items.c.src})
'''


def project(directory: Path) -> Path:
    (directory / "scaling_migrations.py").write_text(textwrap.dedent(MODULE))
    (directory / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/migrations\n"
                                           "prepend_sys_path = %(here)s\npath_separator = os\n\n"
                                           "[migrations_policy]\ndata_migrations = scaling_migrations\n")
    return directory / "alembic.ini"


def fill(engine: sa.Engine, rows: int) -> None:
    from migrations_policy.data.ledger import metadata as ledger_metadata

    metadata.drop_all(engine)
    ledger_metadata.drop_all(engine)
    metadata.create_all(engine)
    ledger_metadata.create_all(engine)
    seq = numbers(engine, rows)
    with engine.begin() as conn:
        conn.execute(sa.insert(bench).from_select(
            ["id", "src"], sa.select(seq.c.i, sa.literal("value-", sa.String) + sa.cast(seq.c.i, sa.String(20)))))
    statement = {"postgresql": "VACUUM ANALYZE bench_items", "mysql": "ANALYZE TABLE bench_items"}
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(statement[engine.dialect.name]).close()


def pending(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(bench).where(PENDING)).scalar()


def single_update(engine: sa.Engine, rows: int) -> float:
    fill(engine, rows)
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(sa.update(bench).where(PENDING).values(dst=bench.c.src))
    return rows / (time.perf_counter() - started)


def parallel_updates(engine: sa.Engine, rows: int, count: int, step: int = 20_000) -> float:
    """The database's limit for *count* writers: *count* connections, each taking the next
    *step* keys and updating them in one transaction, until the table is done."""
    fill(engine, rows)
    claimed = iter(range(0, rows, step))
    lock = threading.Lock()
    isolation = {"mysql": "READ COMMITTED"}.get(engine.dialect.name)

    def writer() -> None:
        with engine.connect() as conn:
            if isolation:
                conn = conn.execution_options(isolation_level=isolation)
            while True:
                with lock:
                    low = next(claimed, None)
                if low is None:
                    return
                with conn.begin():
                    conn.execute(sa.update(bench).where(bench.c.id > low, bench.c.id <= low + step, PENDING)
                                 .values(dst=bench.c.src))

    started = time.perf_counter()
    threads = [threading.Thread(target=writer) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows / (time.perf_counter() - started)


def runners(engine: sa.Engine, url: str, ini: Path, rows: int, count: int) -> dict:
    fill(engine, rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ini.parent), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"
    argv = [sys.executable, "-c", code, "-c", str(ini), "--url", url, "--format", "json", "--progress", "none",
            "online_data_migrations"]
    processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(count)]
    ended: dict[int, float] = {}
    outputs: dict[int, tuple[str, str]] = {}

    def wait(i: int, process: subprocess.Popen) -> None:
        outputs[i] = process.communicate(timeout=900)
        ended[i] = time.perf_counter()

    threads = [threading.Thread(target=wait, args=(i, p)) for i, p in enumerate(processes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reports = []
    for i, process in enumerate(processes):
        out, err = outputs[i]
        if process.returncode != 0:
            raise SystemExit(f"runner {i} exited {process.returncode}: {err.strip()[-400:]}")
        reports.append(json.loads(out))
    starts = [ended[i] - reports[i]["seconds"] for i in range(count)]
    window = max(ended.values()) - min(starts)
    left = pending(engine)
    assert left == 0, f"{left} rows still pending"
    shares = [r["migrated"] for r in reports]
    assert sum(shares) == rows, (shares, rows)
    return {"runners": count, "seconds": window, "rows_per_s": rows / window, "shares": shares,
            "batches": sum(r["migrations"][0]["batches"] for r in reports)}


def bench_backend(name: str, url: sa.URL, rows: int, counts: list[int], repeat: int) -> None:
    engine = sa.create_engine(url, pool_size=max(counts) + 1)
    text = url.render_as_string(hide_password=False)
    with tempfile.TemporaryDirectory() as directory:
        ini = project(Path(directory))
        ceiling = max(single_update(engine, rows) for _ in range(repeat))
        limits = {n: max(parallel_updates(engine, rows, n) for _ in range(repeat)) for n in counts}
        results = [max((runners(engine, text, ini, rows, n) for _ in range(repeat)), key=lambda r: r["rows_per_s"])
                   for n in counts]
    engine.dispose()
    base = results[0]["rows_per_s"]
    print(f"\n{name}, {rows:,} rows, one migration; one UPDATE: {ceiling:,.0f} rows/s")
    print(f"{'runners':>8}{'seconds':>9}{'rows/s':>11}{'x 1':>7}{'x UPDATE':>10}{'limit':>11}{'x limit':>9}"
          f"{'batches':>9}  shares")
    for r in results:
        limit = limits[r["runners"]]
        print(f"{r['runners']:>8}{r['seconds']:>9.2f}{r['rows_per_s']:>11,.0f}{r['rows_per_s'] / base:>7.2f}"
              f"{r['rows_per_s'] / ceiling:>10.2f}{limit:>11,.0f}{r['rows_per_s'] / limit:>9.2f}"
              f"{r['batches']:>9}  {', '.join(f'{s:,}' for s in r['shares'])}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="postgresql,mysql")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--runners", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from migrations_policy.testing import servers

    counts = [int(n) for n in args.runners.split(",")]
    for backend in args.backends.split(","):
        server = servers.STARTERS[backend]()
        try:
            bench_backend(backend, server.create_database(), args.rows, counts, args.repeat)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
