"""Backfill benchmark: copy one text column to another in N rows, four ways.

* ``single UPDATE``: one set-based statement over the whole table (the limit);
* ``runner bN``: ``migrations_policy.data.run`` at a few fixed batch sizes;
* ``runner ≤Tms``: the runner sizing its batches to take about T ms
  (``--batch-seconds``, starting at 5,000 rows);
* ``ORM loop 50``: nova-style: query 50 pending rows through the ORM, set them,
  commit, repeat until none is left.  It slows down as the table fills (each
  query re-scans the finished rows), so it is measured over ``--orm-rows`` rows
  at the start (its best case, the ``x ORM`` column) and again at 25%, 50% and
  75% done; ``x ORM run`` compares with the whole run those four samples
  estimate (each sample's rate held for a quarter of the table: that still
  flatters the loop, which only gets slower within each quarter).

Each method runs in a child process on a freshly filled table, so the peak RSS
reported is its own.  PostgreSQL and MariaDB come from ``migrations_policy.testing.servers``
(throwaway servers on 127.0.0.1), each with its own single-UPDATE baseline; SQLite
uses a file in a temporary directory.

    python benchmarks/backfill.py                       # PostgreSQL 1M rows, SQLite 1M rows
    python benchmarks/backfill.py --rows 200000 --backends sqlite
    python benchmarks/backfill.py --rows 100000,1000000 --backends postgresql   # RSS as N grows
    python benchmarks/backfill.py --backends postgresql,mysql --batch-sizes 5000 --orm-rows 0   # issue 15

Goal (issue 6): runner >= 0.8x the single UPDATE on dense integer keys, >= 30x
the ORM loop, every batch transaction <= 100 ms, RSS flat as N grows.  Issue 15:
with the defaults (5,000 rows first, batches sized to 50 ms) >= 0.9x one UPDATE on
PostgreSQL, >= 0.8x on MariaDB.

    python benchmarks/backfill.py --batch-seconds 0.05,0.03 --repeat 3
    python benchmarks/backfill.py --backends postgresql,mysql --batch-sizes '' --orm-rows 0 --bare

``--bare`` (the ceiling of batching): each round also runs a **bare batched loop** third, on a
fresh table: the very key ranges the runner's batches of that round updated (recorded in the
runner's child), one ``UPDATE ... WHERE id > lo AND id <= hi AND pending`` + ``COMMIT`` per
range on one connection, and nothing else (no ledger, claims, completion marks, lock-wait
settings, survey or final probe).  Each round prints runner / UPDATE, bare loop / UPDATE and
runner / bare loop: what the runner adds to batching (its bookkeeping, ours to remove) against
what batching itself costs (the price of being online).
    git worktree add /tmp/base main    # then: rounds A B C, C = main's runner
    python benchmarks/backfill.py --backends postgresql --batch-sizes '' --orm-rows 0 --versus /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Session

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _numbers import numbers  # noqa: E402

TABLE = "bench_items"
metadata = sa.MetaData()
bench = sa.Table(
    TABLE, metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("src", sa.String(40)),
    sa.Column("dst", sa.String(40)),
)
PENDING = sa.and_(bench.c.dst.is_(None), bench.c.src.is_not(None))


class Base(DeclarativeBase):
    pass


class Item(Base):
    __table__ = bench


# -- the methods (run in a child process) ------------------------------------------------
def single_update(engine: sa.Engine, args) -> dict:
    started = time.perf_counter()
    with engine.begin() as conn:
        rows = conn.execute(sa.update(bench).where(PENDING).values(dst=bench.c.src)).rowcount
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "longest_batch": seconds}


def runner(engine: sa.Engine, args) -> dict:
    from migrations_policy.data import DataMigration, Registry, RunOptions, run

    light = sa.table(TABLE, sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"))
    migration = DataMigration("bench_copy", table=light, key="id",
                              pending=sa.and_(light.c.dst.is_(None), light.c.src.is_not(None)),
                              values={"dst": light.c.src})
    ranges = []
    if args.ranges:  # observe the key ranges of the batches that committed (for the bare loop)
        from migrations_policy.data.walk import runner as runner_module

        def recording(walk, conn, batch, *more, _run_batch=runner_module._Walk._run_batch):
            done = _run_batch(walk, conn, batch, *more)
            conn.info.setdefault("bench_ranges", []).append((batch.lower, batch.upper))
            return done

        @sa.event.listens_for(engine, "commit")
        def committed(conn):
            ranges.extend(conn.info.pop("bench_ranges", ()))

        @sa.event.listens_for(engine, "rollback")
        def rolled_back(conn):
            conn.info.pop("bench_ranges", None)

        runner_module._Walk._run_batch = recording
    started = time.perf_counter()
    report = run(engine, Registry([migration]),
                 RunOptions(batch_size=args.batch_size, batch_seconds=args.batch_seconds_child or None))
    seconds = time.perf_counter() - started
    [m] = report.migrations
    assert m.state == "complete", report.text()
    if args.ranges:
        with open(args.ranges, "w") as fh:
            json.dump(ranges, fh)
    return {"rows": m.migrated, "seconds": seconds, "longest_batch": m.longest_batch_seconds,
            "strategy": m.strategy, "batches": m.batches, "batch_sizes": m.batch_sizes}


def bare_loop(engine: sa.Engine, args) -> dict:
    """The ceiling of batching: the runner's key ranges (``--ranges``), one UPDATE + COMMIT each,
    on one connection, nothing else."""
    with open(args.ranges) as fh:
        ranges = json.load(fh)
    rows, longest = 0, 0.0
    started = time.perf_counter()
    with engine.connect() as conn:
        for low, high in ranges:
            batch_started = time.perf_counter()
            where = [bench.c.id <= high, PENDING] + ([] if low is None else [bench.c.id > low])
            rows += conn.execute(sa.update(bench).where(*where).values(dst=bench.c.src)).rowcount
            conn.commit()
            longest = max(longest, time.perf_counter() - batch_started)
    seconds = time.perf_counter() - started
    with engine.connect() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(bench).where(PENDING)).scalar()
    assert left == 0, f"the bare loop left {left} rows pending"
    sizes = [high - low for low, high in ranges if low is not None]
    return {"rows": rows, "seconds": seconds, "longest_batch": longest, "batches": len(ranges),
            "batch_sizes": (min(sizes), max(sizes)) if sizes else None}


def orm_loop(engine: sa.Engine, args) -> dict:
    """nova's pattern: SELECT ... WHERE pending LIMIT 50 through the ORM, update, commit, repeat."""
    done, longest = 0, 0.0
    started = time.perf_counter()
    with Session(engine) as session:
        while done < args.orm_rows:
            batch_started = time.perf_counter()
            found = session.query(Item).filter(Item.dst.is_(None), Item.src.is_not(None)).limit(50).all()
            if not found:
                break
            for item in found:
                item.dst = item.src
            session.commit()
            done += len(found)
            longest = max(longest, time.perf_counter() - batch_started)
    return {"rows": done, "seconds": time.perf_counter() - started, "longest_batch": longest}


METHODS = {"single": single_update, "runner": runner, "orm": orm_loop, "bare": bare_loop}


def child(args) -> None:
    engine = sa.create_engine(args.url)
    result = METHODS[args.child](engine, args)
    engine.dispose()
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# -- the parent: fill, run each method in a child, report ---------------------------------
def fill(engine: sa.Engine, rows: int) -> None:
    from migrations_policy.data.ledger import metadata as ledger_metadata

    metadata.drop_all(engine)
    metadata.create_all(engine)
    ledger_metadata.create_all(engine)
    seq = numbers(engine, rows)
    label = sa.literal("value-", sa.String) + sa.cast(seq.c.i, sa.String(20))
    with engine.begin() as conn:
        conn.execute(sa.insert(bench).from_select(["id", "src"], sa.select(seq.c.i, label)))
    vacuum(engine)


def vacuum(engine: sa.Engine) -> None:
    statement = {"postgresql": "VACUUM ANALYZE bench_items", "mysql": "ANALYZE TABLE bench_items"}
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(statement.get(engine.dialect.name, "VACUUM")).close()


def measure(url: sa.URL, method: str, rows: int, batch_size: int, orm_rows: int, done_before: int = 0,
            batch_seconds: float = 0.0, tree: str | None = None, ranges: str | None = None) -> dict:
    """Run *method* in a child on a fresh table whose first *done_before* rows are already migrated;
    *tree*: a checkout whose ``migrations_policy`` the child imports (another version's runner)."""
    engine = sa.create_engine(url)
    fill(engine, rows)
    if done_before:
        with engine.begin() as conn:
            conn.execute(sa.update(bench).where(bench.c.id <= done_before).values(dst=bench.c.src))
        vacuum(engine)
    engine.dispose()
    cmd = [sys.executable, __file__, "--child", method, "--url", url.render_as_string(hide_password=False),
           "--batch-size", str(batch_size), "--batch-target", str(batch_seconds), "--orm-rows", str(orm_rows)]
    if ranges is not None:
        cmd += ["--ranges", ranges]
    env = None if tree is None else {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode:
        raise SystemExit(f"{method} failed: {out.stderr.strip()[-500:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["rows_per_s"] = result["rows"] / result["seconds"]
    return result


def interleaved(repeat: int, url: sa.URL, rows: int, method: str, batch_size: int, batch_seconds: float = 0.0,
                tree: str | None = None, bare: bool = False) -> tuple[dict, list[float], list[dict]]:
    """*repeat* rounds A B (A B C with *tree* or *bare*): the single UPDATE on a fresh table, then
    *method* on a fresh table (then *method* of the checkout *tree*, or the bare batched loop over
    the same key ranges); (*method*'s median round, the per-round ratios of its rows/s to the
    UPDATE's, the UPDATEs).  With *tree*, each round's ratio of this runner to *tree*'s is printed,
    and their median; with *bare*, runner / UPDATE, bare loop / UPDATE and runner / bare loop."""
    results, ratios, singles, versus = [], [], [], []
    bares = []
    ranges = os.path.join(tempfile.mkdtemp(prefix="mp-bench-ranges-"), "ranges.json") if bare else None
    for _ in range(repeat):
        single = measure(url, "single", rows, 0, 0)
        result = measure(url, method, rows, batch_size, 0, batch_seconds=batch_seconds, ranges=ranges)
        if bare:
            loop = measure(url, "bare", rows, 0, 0, ranges=ranges)
            u, r, b = single["rows_per_s"], result["rows_per_s"], loop["rows_per_s"]
            bares.append((r / u, b / u, r / b))
            print(f"  round: UPDATE {single['seconds']:.2f} s, runner {result['seconds']:.2f} s "
                  f"({result['batches']} batches {result.get('batch_sizes')}), bare loop {loop['seconds']:.2f} s "
                  f"({loop['batches']} batches); runner/UPDATE {r / u:.2f}, bare/UPDATE {b / u:.2f}, "
                  f"runner/bare {r / b:.2f}", flush=True)
        if tree is not None:
            other = measure(url, method, rows, batch_size, 0, batch_seconds=batch_seconds, tree=tree)
            versus.append(result["rows_per_s"] / other["rows_per_s"])
            print(f"  round: UPDATE {single['rows_per_s']:,.0f} rows/s, this runner {result['rows_per_s']:,.0f} "
                  f"({result['rows_per_s'] / single['rows_per_s']:.2f}x), {tree}'s {other['rows_per_s']:,.0f} "
                  f"({other['rows_per_s'] / single['rows_per_s']:.2f}x), batches {result.get('batch_sizes')} "
                  f"vs {other.get('batch_sizes')}", flush=True)
        singles.append(single)
        results.append(result)
        ratios.append(result["rows_per_s"] / single["rows_per_s"])
    middle = sorted(range(repeat), key=lambda i: ratios[i])[(repeat - 1) // 2]
    if bares:
        print("  per round runner/UPDATE " + ", ".join(f"{x[0]:.2f}" for x in bares)
              + f" (median {statistics.median(x[0] for x in bares):.2f}); bare/UPDATE "
              + ", ".join(f"{x[1]:.2f}" for x in bares) + f" (median {statistics.median(x[1] for x in bares):.2f}); "
              "runner/bare " + ", ".join(f"{x[2]:.2f}" for x in bares)
              + f" (median {statistics.median(x[2] for x in bares):.2f})", flush=True)
    if versus:
        print(f"  this runner x {tree}'s, per round: " + ", ".join(f"{v:.2f}" for v in versus)
              + f"; median {statistics.median(versus):.2f}x", flush=True)
    return results[middle], ratios, singles


ORM_SAMPLES = (0.25, 0.5, 0.75)  # besides the start: how far done the table is when the ORM loop is sampled


def bench_backend(name: str, url: sa.URL, rows: int, batch_sizes: list[int], batch_seconds: list[float],
                  orm_rows: int, repeat: int = 1, tree: str | None = None, bare: bool = False) -> list[dict]:
    """Each runner configuration in *repeat* interleaved rounds with the single UPDATE (A B A B):
    its figure is the median of the per-round ratios, since a shared machine's load varies more
    between minutes than between two neighbouring runs."""
    configs = [(f"runner b{size}", size, 0.0) for size in batch_sizes] + \
        [(f"runner ≤{target * 1000:g}ms", 5000, target) for target in batch_seconds]
    results, singles = [], []
    for label, size, target in configs:
        result, ratios, paired = interleaved(repeat, url, rows, "runner", size, target, tree, bare)
        singles.extend(paired)
        results.append({"method": label, **result, "ratios": ratios, "x_update": statistics.median(ratios)})
        print(f"{name} {rows:,} rows {label}: per-round x UPDATE " + ", ".join(f"{r:.2f}" for r in ratios)
              + f"; median {statistics.median(ratios):.2f}x", flush=True)
    single = sorted(singles, key=lambda r: r["rows_per_s"])[(len(singles) - 1) // 2] if singles else \
        measure(url, "single", rows, 0, 0)
    results.insert(0, {"method": "single UPDATE", **single, "x_update": 1.0})
    orm_rows = min(orm_rows, rows // 4)
    orm = [] if not orm_rows else [{"method": "ORM loop 50", **measure(url, "orm", rows, 0, orm_rows)}]
    for done in ORM_SAMPLES if orm_rows else ():
        orm.append({"method": f"ORM @{done:.0%}", **measure(url, "orm", rows, 0, orm_rows, done_before=int(rows * done))})
    results.extend(orm)
    orm_best = orm[0]["rows_per_s"] if orm else float("nan")
    orm_run = len(orm) / sum(1 / r["rows_per_s"] for r in orm) if orm else float("nan")  # the whole run, estimated
    print(f"\n{name}, {rows:,} rows; x UPDATE: median of {repeat} interleaved rounds' ratios (runners), "
          f"rows/s of the median round; the ORM loop over {orm_rows:,} rows from the start (x ORM: its best "
          f"case) and at {', '.join(f'{d:.0%}' for d in ORM_SAMPLES)} done (x ORM run: against the whole run "
          f"these estimate, {orm_run:,.0f} rows/s)")
    print(f"{'method':<16}{'rows':>10}{'seconds':>9}{'rows/s':>11}{'x UPDATE':>10}{'x ORM':>8}{'x ORM run':>11}"
          f"{'longest batch':>15}{'peak RSS':>10}  batch sizes")
    limit = results[0]["rows_per_s"]
    for r in results:
        sizes = r.get("batch_sizes")
        x_update = r.get("x_update", r["rows_per_s"] / limit)
        print(f"{r['method']:<16}{r['rows']:>10,}{r['seconds']:>9.2f}{r['rows_per_s']:>11,.0f}"
              f"{x_update:>10.2f}{r['rows_per_s'] / orm_best:>8.1f}{r['rows_per_s'] / orm_run:>11.1f}"
              f"{r['longest_batch'] * 1000:>12.1f} ms{r['peak_rss_mb']:>7.0f} MB"
              f"  {f'{sizes[0]:,}-{sizes[1]:,}' if sizes else ''}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1000000", help="rows per table; several comma-separated for RSS growth")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--batch-sizes", default="1000,5000,20000", help="fixed batch sizes to run")
    parser.add_argument("--batch-seconds", default="0.05",
                        help="batch time targets to run (each starting at 5000 rows); '' for none")
    parser.add_argument("--orm-rows", type=int, default=20000,
                        help="rows the ORM loop migrates before it is stopped (0: skip the ORM loop)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="interleaved rounds (single UPDATE, runner) per runner configuration; the median ratio")
    parser.add_argument("--json", metavar="FILE", help="also write every result to FILE")
    parser.add_argument("--versus", metavar="DIR",
                        help="a checkout of another version (git worktree): its runner runs third in every round")
    parser.add_argument("--bare", action="store_true",
                        help="each round also runs the bare batched loop over the runner's key ranges (the ceiling)")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--ranges", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=5000, help=argparse.SUPPRESS)
    parser.add_argument("--batch-target", type=float, default=0.0, dest="batch_seconds_child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    batch_seconds = [float(t) for t in args.batch_seconds.split(",") if t]
    everything = {}
    for backend in args.backends.split(","):
        server = None
        if backend == "postgresql":
            from migrations_policy.testing.servers import start_postgresql

            server = start_postgresql()
            url = server.create_database("bench")
        elif backend == "mysql":
            from migrations_policy.testing.servers import start_mariadb

            server = start_mariadb()
            url = server.create_database()
        elif backend == "sqlite":
            url = sa.URL.create("sqlite", database=os.path.join(tempfile.mkdtemp(prefix="mp-bench-"), "bench.db"))
        else:
            raise SystemExit(f"unknown backend {backend!r} (postgresql, mysql, sqlite)")
        try:
            for rows in (int(n) for n in args.rows.split(",")):
                everything[f"{backend}:{rows}"] = bench_backend(backend, url, rows, batch_sizes, batch_seconds,
                                                                  args.orm_rows, args.repeat, args.versus, args.bare)
        finally:
            if server is not None:
                server.stop()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(everything, fh, indent=2)


if __name__ == "__main__":
    main()
