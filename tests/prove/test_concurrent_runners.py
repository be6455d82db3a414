"""Several ``dbsync online_data_migrations`` processes at once, while the application keeps inserting
rows that need migrating: every row is migrated exactly once (the migrations bump a counter), the
result equals the reference, and no runner reports an error (deadlocks included)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading

from ..data.support import dbsync_argv, run_json
from .conftest import check_complete, create_schema, insert_seed, seed_rows

SIZES = {"sqlite": (3000, 800), "postgresql": (12000, 3000), "mysql": (8000, 2000)}
RUNNERS = 4
LATE_BATCHES = 20  # the application inserts this many batches of rows while the runners work


def test_concurrent_runners_migrate_each_row_exactly_once(prove_project, db_url, db_engine, backend):
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    accounts_count, events_count = SIZES[backend]
    account_rows, event_rows = seed_rows(seed, accounts_count, events_count)
    late_accounts, late_events = seed_rows(seed + 1, 25 * LATE_BATCHES, 10 * LATE_BATCHES, first_id=10**6)
    create_schema(db_engine)
    insert_seed(db_engine, account_rows, event_rows)

    env = {**os.environ, "PYTHONPATH": str(prove_project)}
    runners = [subprocess.Popen(
        dbsync_argv(prove_project, db_url, "--format", "json", "online_data_migrations",
                    "--batch-size", str(rng.choice((20, 75, 200))), "--workers", "2",
                    "--batch-seconds", str(rng.choice((0, 0.005, 0.05)))),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(RUNNERS)]

    def application_inserts() -> None:
        for i in range(LATE_BATCHES):
            insert_seed(db_engine, late_accounts[i * 25:(i + 1) * 25], late_events[i * 10:(i + 1) * 10])

    writer = threading.Thread(target=application_inserts)
    writer.start()
    outputs = [r.communicate(timeout=600) for r in runners]
    writer.join()

    reports = []
    for runner, (out, err) in zip(runners, outputs):
        assert runner.returncode in (0, 3), (err, out)  # 3: caught up, rows were added behind the walk meanwhile
        assert "deadlock" not in err.lower() and "Traceback" not in err, err
        report = json.loads(out)
        assert all(m["errors"] == 0 and m["stuck"] == 0 for m in report["migrations"]), report
        reports.append(report)
    if backend != "sqlite":
        # SQLite's busy handler is not fair: one runner may legitimately take every batch there.
        assert sum(r["migrated"] > 0 for r in reports) >= 2, "the runners did not really run concurrently"

    code, final = run_json(prove_project, db_url)
    assert code == 0, final
    everything = len(account_rows) + len(event_rows) + len(late_accounts) + len(late_events)
    assert sum(r["migrated"] for r in reports) + final["migrated"] == everything
    check_complete(db_engine, account_rows + late_accounts, event_rows + late_events)
