"""``dbsync online_data_migrations`` (real processes, one or two at once) while release-N code keeps
inserting rows that need migrating — at the end of the dense table and into the gaps of the sparse
one, so inside ranges already walked, being walked, and not walked yet.

Under that load no run may exit 2: a row inserted after its batch read its rows is *remaining*,
never *stuck*.  While the writer runs, the runs exit 0, 1 or 3 (caught up: its report says so);
once the writer stops, a final run exits 0 and every row equals the reference, migrated exactly once.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time

import pytest

from ..data.support import dbsync_argv, run_json
from .conftest import check_complete, create_schema, insert_seed, seed_rows

SIZES = {"postgresql": (6000, 1500), "mysql": (4000, 1000)}
MAX_RUNS = 8


def late_rows(seed: int, event_rows: list, accounts: int) -> tuple[list, list]:
    """What the old release inserts: accounts past the end, events into the gaps between seeded keys
    (each seeded key + 1 is free: seeded keys are 3 to 11 apart)."""
    rng = random.Random(seed)
    late_accounts, _ = seed_rows(seed + 1, accounts, 0, first_id=10**6)
    gaps = rng.sample(event_rows, len(event_rows) // 3)
    late_events = [{"id": row["id"] + 1, "payload": f"late{rng.randrange(10**6)}"} for row in gaps]
    rng.shuffle(late_events)  # anywhere in the key range, in any order
    return late_accounts, late_events


@pytest.mark.parametrize("runners", [1, 2])
def test_runs_under_a_live_inserting_writer_never_report_stuck(prove_project, db_url, db_engine, backend, runners):
    if backend == "sqlite":
        pytest.skip("SQLite serialises every writer behind the batch's write lock: nothing arrives mid-batch")
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    account_rows, event_rows = seed_rows(seed, *SIZES[backend])
    late_accounts, late_events = late_rows(seed, event_rows, len(account_rows) // 4)
    create_schema(db_engine)
    insert_seed(db_engine, account_rows, event_rows)
    stop = threading.Event()
    inserted = {"accounts": 0, "events": 0}

    def old_release_inserts() -> None:
        a = e = 0
        while not stop.is_set() and (a < len(late_accounts) or e < len(late_events)):
            insert_seed(db_engine, late_accounts[a:a + 5], late_events[e:e + 3])
            a, e = min(a + 5, len(late_accounts)), min(e + 3, len(late_events))
            inserted.update(accounts=a, events=e)
            time.sleep(0.02)

    env = {**os.environ, "PYTHONPATH": str(prove_project)}
    writer = threading.Thread(target=old_release_inserts)
    writer.start()
    codes, during = [], 0
    try:
        while writer.is_alive() and len(codes) < MAX_RUNS * runners:
            procs = [subprocess.Popen(
                dbsync_argv(prove_project, db_url, "--format", "json", "online_data_migrations",
                            "--batch-size", str(rng.choice((20, 50, 120))), "--workers", str(rng.choice((1, 2))),
                            "--batch-seconds", str(rng.choice((0, 0.01)))),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(runners)]
            for proc in procs:
                out, err = proc.communicate(timeout=300)
                assert "Traceback" not in err and "deadlock" not in err.lower(), err
                report = json.loads(out)
                assert proc.returncode in (0, 1, 3), (proc.returncode, err, report)
                assert all(m["stuck"] == 0 and m["errors"] == 0 for m in report["migrations"]), report
                assert report["caught_up"] == (proc.returncode == 3)
                codes.append(proc.returncode)
                during += writer.is_alive()  # this run ended while the writer still inserted
    finally:
        stop.set()
        writer.join()
    # Whether a run ends while the writer still inserts, and whether it then reports "caught up"
    # (3) rather than complete (0), depends on the machine's timing and on where the writer's rows
    # landed relative to its walk (rows past its cursor are walked on): every outcome is right and
    # none is asserted (an `assert 3 in codes` here failed on some seeds: 866222, 777, 156310).
    print(f"{during} of {len(codes)} run(s) ended while the writer inserted; exit codes {codes}")
    code, final = run_json(prove_project, db_url)
    assert code == 0, final
    late_accounts, late_events = late_accounts[:inserted["accounts"]], late_events[:inserted["events"]]
    check_complete(db_engine, account_rows + late_accounts, sorted(event_rows + late_events, key=lambda r: r["id"]))
