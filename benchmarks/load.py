"""Writers' latency while a backfill runs: without, with our batched runner, with one big UPDATE.

    python benchmarks/load.py [--backends postgresql,mysql] [--rows 300000] [--seconds 8] [--writers 4]

Each scenario gets a fresh ``orders`` table with the same rows on a throwaway
server of 127.0.0.1 (``migrations_policy.testing.servers``).  Writer threads
insert a row or update a random one (each its own transaction, through
SQLAlchemy) for ``--seconds`` while

* ``baseline``: nothing else runs;
* ``runner ≤T``: ``migrations_policy.data.run`` (the runner behind ``dbsync
  online_data_migrations``) backfills ``orders.label`` in a separate process, with
  ``--batch-size`` (default: the runner's, 5000) and each batch time target T of
  ``--batch-seconds`` (default: the runner's default; 0: fixed-size batches);
* ``big UPDATE``: one ``UPDATE orders SET label = ...`` (the naive backfill) runs;
* ``CPU hog`` (``--floor``): a process that only burns CPU runs, touching no table: on a
  machine with few cores, what any concurrent work costs the writers.

The backfill fills ``label``, NULL until then, so every row grows; ``--same-size``
seeds a 15-character placeholder and rewrites it with 15 characters, so that no
row grows.  On MariaDB the difference is the point: rows that grow make InnoDB reorganize
and split pages under the index latch (1,000,000 labels filled: 46,009 reorganizations and
3,119 splits; rewritten at the same size: none), which stalls the writers' inserts and updates alike
(1,000,000 rows: writers' p99 4.5x the baseline while the runner fills labels,
1.7x while it rewrites them at the same size; a CPU-bound process that touches
no table gives 1.6x on the same 2-core machine).

Printed per scenario: writer operations (only those started while the backfill
was running), p50 / p99 / max latency, and the ratio of p50 and p99 to the
baseline measured in the same run, and each round's p99 against that round's baseline
(the scenarios of a round run one after another: A B C A B C) with their median; plus how
long the backfill took.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import threading
import time

import sqlalchemy as sa

from migrations_policy.data import RunOptions, ledger
from migrations_policy.testing import servers

metadata = sa.MetaData()
orders = sa.Table(
    "orders", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("customer", sa.String(40), nullable=False),
    sa.Column("amount", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("label", sa.String(60)),
)

#: ``--same-size``: what every seeded row's label holds before the backfill, as long as what it writes.
PLACEHOLDER = "~" * 15

RUNNER = '''
import sys
import sqlalchemy as sa
from migrations_policy.data import DataMigration, Registry, RunOptions, run

orders = sa.table("orders", sa.column("id", sa.Integer), sa.column("customer", sa.String), sa.column("label"))
PLACEHOLDER = "~" * 15  # the parent's PLACEHOLDER
same = sys.argv[4] == "same"
migration = DataMigration("orders_label", table=orders, key="id",
                          pending=orders.c.label == PLACEHOLDER if same else orders.c.label.is_(None),
                          values={"label": sa.func.lpad(sa.func.upper(orders.c.customer), 15, "-") if same
                                  else sa.func.upper(orders.c.customer)})
engine = sa.create_engine(sys.argv[1])
engine.connect().close()
print("started", flush=True)  # the writers start now: measure while batches run, not while we import
report = run(engine, Registry([migration]),
             RunOptions(batch_size=int(sys.argv[2]), batch_seconds=float(sys.argv[3]) or None))
print(report.migrated, round(report.seconds, 2))
'''


def seed(engine: sa.Engine, rows: int, label: str | None = None) -> None:
    metadata.drop_all(engine)
    ledger.metadata.drop_all(engine)
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)
    rng = random.Random(1)
    with engine.begin() as conn:
        for start in range(0, rows, 10_000):
            conn.execute(sa.insert(orders), [
                {"customer": f"customer-{rng.randrange(10**6)}", "amount": rng.randrange(10**5), "status": "new",
                 "label": label}
                for _ in range(min(10_000, rows - start))])
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(sa.text("VACUUM ANALYZE orders"))
        else:
            conn.execute(sa.text("ANALYZE TABLE orders")).all()


def writers(engine: sa.Engine, rows: int, seconds: float, count: int) -> list[tuple[float, float]]:
    """(start time, latency in seconds) of every writer operation for *seconds*."""
    latencies: list[tuple[float, float]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def work(index: int) -> None:
        rng = random.Random(index)
        mine = []
        while time.monotonic() < deadline:
            started = time.perf_counter()
            with engine.begin() as conn:
                if rng.random() < 0.5:
                    conn.execute(sa.insert(orders).values(customer=f"w{index}-{rng.randrange(10**6)}",
                                                          amount=rng.randrange(10**5), status="new"))
                else:
                    conn.execute(sa.update(orders).where(orders.c.id == rng.randrange(1, rows))
                                 .values(amount=rng.randrange(10**5), status="paid"))
            mine.append((started, time.perf_counter() - started))
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def labelled(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(orders.c.label.is_not(None),
                                                             orders.c.label != PLACEHOLDER)).scalar()


def scenario(name: str, engine: sa.Engine, url: str, args: argparse.Namespace) -> dict:
    seed(engine, args.rows, PLACEHOLDER if args.same_size else None)
    background: subprocess.Popen | threading.Thread | None = None
    took: list[float] = []
    finished: list[float] = []  # perf_counter when the backfill ended
    if name.startswith("runner"):
        target = name.split("≤")[1].removesuffix("s")
        background = subprocess.Popen([sys.executable, "-c", RUNNER, url, str(args.batch_size), target,
                                       "same" if args.same_size else "grow"],
                                      stdout=subprocess.PIPE, text=True)
        process = background
        threading.Thread(target=lambda: (process.wait(), finished.append(time.perf_counter())), daemon=True).start()
        background.stdout.readline()  # "started": imports done (seconds on a loaded machine), batches begin
    elif name == "CPU hog":  # a process that only burns CPU: what any concurrent work costs the writers here
        background = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    elif name == "big UPDATE":
        def naive() -> None:
            began = time.monotonic()
            with engine.begin() as conn:
                conn.execute(sa.update(orders).where(orders.c.label == PLACEHOLDER).values(
                    label=sa.func.lpad(sa.func.upper(orders.c.customer), 15, "-")) if args.same_size else
                    sa.update(orders).where(orders.c.label.is_(None)).values(label=sa.func.upper(orders.c.customer)))
            took.append(time.monotonic() - began)
            finished.append(time.perf_counter())
        background = threading.Thread(target=naive)
        background.start()
        time.sleep(0.2)
    timed = writers(engine, args.rows, args.seconds, args.writers)
    # Only the operations that started while the backfill was still running count.
    latencies = [latency for started, latency in timed if not finished or started < finished[0]]
    busy = (background.poll() is None) if isinstance(background, subprocess.Popen) else \
        background.is_alive() if background is not None else False
    if isinstance(background, subprocess.Popen):
        background.terminate()
        out, _ = background.communicate()
        if not busy and background.returncode and name != "CPU hog":  # it ended by itself, and badly: no figure to report
            raise SystemExit(f"{name}: the runner exited with {background.returncode} (its error is above)")
        took.extend(float(x) for x in (out or "").split()[2:3])  # after "started": rows, seconds
    elif background is not None:
        background.join()
    latencies.sort()
    return {"name": name, "ops": len(latencies), "p50": statistics.median(latencies),
            "p99": latencies[int(len(latencies) * 0.99) - 1], "max": latencies[-1],
            "backfill": "" if name in ("baseline", "CPU hog") else
            f"{labelled(engine)} rows labelled" + (", still running at the end" if busy else
                                                    f" in {took[0]:.1f} s" if took else "")}


def median_of(results: list[dict]) -> dict:
    """One scenario's figures over the rounds: the median of each (the machine may be shared)."""
    merged = dict(results[0])
    for key in ("ops", "p50", "p99", "max"):
        merged[key] = statistics.median(r[key] for r in results)
    merged["backfill"] = "; ".join(r["backfill"] for r in results if r["backfill"])
    return merged


def report(backend: str, results: list[dict], args: argparse.Namespace) -> None:
    base = results[0]
    print(f"\n{backend}: {args.rows:,} rows, {args.writers} writer threads, {args.seconds:g} s per scenario, "
          f"median of {args.repeat} interleaved round(s), "
          f"{'labels rewritten at the same length' if args.same_size else 'labels filled (rows grow)'}, "
          f"runner batch size {args.batch_size} (first batch, with a time target)")
    print(f"{'scenario':<15} {'ops':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>9} {'p50 x':>6} {'p99 x':>6} "
          f"{'p99 x per round (median)':>26}  backfill")
    for r in results:
        ratios = r.get("p99_ratios", [])
        per_round = ", ".join(f"{x:.2f}" for x in ratios) + (f" ({statistics.median(ratios):.2f})" if ratios else "")
        print(f"{r['name']:<15} {r['ops']:>7} {r['p50'] * 1000:>8.2f} {r['p99'] * 1000:>8.2f} {r['max'] * 1000:>9.1f} "
              f"{r['p50'] / base['p50']:>6.2f} {r['p99'] / base['p99']:>6.2f} {per_round:>26}  {r['backfill']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="postgresql,mysql")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=RunOptions.batch_size)
    parser.add_argument("--batch-seconds", default=str(RunOptions.batch_seconds or 0),
                        help="runner batch time targets, comma-separated (0: fixed --batch-size)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every scenario this many times, interleaved; report the median of each figure")
    parser.add_argument("--no-big-update", action="store_true", help="skip the big UPDATE scenario")
    parser.add_argument("--floor", action="store_true",
                        help="also measure the writers beside a process that only burns CPU (the machine's floor)")
    parser.add_argument("--same-size", action="store_true",
                        help="the backfill rewrites a label of the same length instead of filling a NULL one "
                             "(rows do not grow: on InnoDB, no page splits under the index latch)")
    args = parser.parse_args()
    runners = [f"runner ≤{float(t):g}s" for t in args.batch_seconds.split(",") if t]
    for backend in args.backends.split(","):
        server = servers.STARTERS[backend]()
        try:
            url = server.create_database()
            engine = sa.create_engine(url, pool_size=args.writers + 2)
            text = url.render_as_string(hide_password=False)
            names = ("baseline", *(("CPU hog",) if args.floor else ()), *runners,
                     *(() if args.no_big_update else ("big UPDATE",)))
            rounds = [[scenario(name, engine, text, args) for name in names] for _ in range(args.repeat)]
            results = [median_of([round_[i] for round_ in rounds]) for i in range(len(names))]
            for i, result in enumerate(results):  # each round's p99 against that round's baseline
                result["p99_ratios"] = [round_[i]["p99"] / round_[0]["p99"] for round_ in rounds]
            engine.dispose()
            report(backend, results, args)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
