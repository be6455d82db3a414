"""SIGKILL ``dbsync online_data_migrations`` (a real process) at many random points of a backfill,
check after every kill that each row is either untouched or exactly the reference, rerun to the
end, and compare every row with the reference computed in Python from the seed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import sqlalchemy as sa

from migrations_policy.data import ledger

from ..data.support import dbsync_argv, run_json
from .conftest import check_complete, check_partial, create_schema, insert_seed, seed_rows

SIZES = {"sqlite": (6000, 1500), "postgresql": (20000, 4000), "mysql": (12000, 3000)}
KILLS = 12
# Pauses between batches.  SQLite readers wait while a writer holds the database, so without a pause
# the poll below may not see progress before the runner is done.
SLEEPS = {"sqlite": (0.005, 0.02), "postgresql": (0, 0.002, 0.01), "mysql": (0, 0.002, 0.01)}


def test_sigkill_at_many_random_points_then_rerun(prove_project, db_url, db_engine, backend):
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")  # shown on failure: rerun with the same kill points
    rng = random.Random(seed)
    account_rows, event_rows = seed_rows(seed, *SIZES[backend])
    total = len(account_rows) + len(event_rows)
    create_schema(db_engine)
    insert_seed(db_engine, account_rows, event_rows)
    env = {**os.environ, "PYTHONPATH": str(prove_project)}

    done, kills_mid_work, points = 0, 0, []
    for _ in range(KILLS):
        size = rng.choice((17, 50, 120, 300))
        # A time target grows batches up to 10x: only from small sizes, or the run ends before the kill.
        target = rng.choice((0, 0.005, 0.05)) if size <= 50 else 0  # 0: fixed sizes
        argv = dbsync_argv(prove_project, db_url, "online_data_migrations", "--batch-size", str(size),
                           "--workers", str(rng.choice((1, 2))), "--sleep", str(rng.choice(SLEEPS[backend])),
                           "--batch-seconds", str(target))
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        # Kill once a random share of the remaining rows is done, a random moment later:
        # inside a batch, between batches, while writing the ledger.  Both stay small, so that the
        # run's overshoot past the target (grown batches, two workers, a fast SQLite) leaves work for
        # the next kills: up to 2,000 rows per run with an eighth of the rest and 50 ms (1 CI run in 10).
        target = done + rng.randint(1, max(1, (total - done) // 8))
        deadline = time.monotonic() + 120
        while proc.poll() is None and migrated_count(db_engine) < target and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.01))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills_mid_work += 1
        proc.wait()
        stderr = proc.stderr.read().decode()
        assert "Traceback" not in stderr, stderr
        done = check_partial(db_engine, account_rows, event_rows)
        points.append(done)
        if done == total:
            break
    assert kills_mid_work >= KILLS // 2, \
        f"only {kills_mid_work} kills landed while work remained (rows done after each: {points})"

    code, out = run_json(prove_project, db_url, "--batch-size", "500")
    assert code == 0, [(m["name"], m["state"], m["error"]) for m in out["migrations"]]
    assert sum(m["migrated"] for m in out["migrations"]) == total - done
    check_complete(db_engine, account_rows, event_rows)
    with db_engine.connect() as conn:
        states = ledger.read(conn)
    assert {states[name]["state"] for name in ("account_labels", "event_digests")} == {"complete"}
    # The ledger's counts commit with each batch: exact despite every kill.
    assert states["account_labels"]["rows_migrated"] == len(account_rows)
    assert states["event_digests"]["rows_migrated"] == len(event_rows)


def migrated_count(engine: sa.Engine) -> int:
    from .conftest import accounts, events

    with engine.connect() as conn:
        return conn.execute(sa.select(
            sa.select(sa.func.count()).where(accounts.c.n > 0).scalar_subquery()
            + sa.select(sa.func.count()).where(events.c.n > 0).scalar_subquery())).scalar()
