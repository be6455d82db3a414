"""``dbsync online_data_migrations`` as a real process: JSON, exit codes, SIGKILL and rerun, two runners."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrations_policy.data import ledger

from .support import create_schema, dbsync_argv, item_log, items, run_dbsync, run_json, scalar

ROWS = 3000


def migrated_rows(engine) -> int:
    return scalar(engine, sa.select(sa.func.count()).where(items.c.dst.is_not(None)))


def ledger_rows(engine, name: str) -> int:
    with engine.connect() as conn:
        return (ledger.read(conn).get(name) or {}).get("rows_migrated", 0)


def test_json_output_and_exit_codes(project_dir, db_url, db_engine):
    create_schema(db_engine, rows=500)
    code, out = run_json(project_dir, db_url, "--migration", "copy_items", "--batch-size", "100", "--max-count", "150")
    assert code == 1 and out["exit_code"] == 1 and out["max_count_reached"]
    [m] = out["migrations"]
    assert (m["name"], m["remaining_before"], m["migrated"], m["remaining_after"], m["state"]) == \
        ("copy_items", 500, 150, 350, "incomplete")
    assert m["strategy"] == "range" and m["longest_batch_seconds"] > 0
    code, out = run_json(project_dir, db_url, "--migration", "copy_items")
    assert code == 0 and out["migrations"][0]["migrated"] == 350 and out["migrations"][0]["state"] == "complete"
    proc = run_dbsync(project_dir, db_url, "online_data_migrations", "--migration", "copy_items")
    assert proc.returncode == 0 and "copy_items" in proc.stdout and "all data migrations are complete" in proc.stdout
    for bad in (["--batch-size", "0"], ["--batch-seconds", "-1"], ["--max-count", "x"], ["--migration", "nope"], ["--option", "copy_items"],
                ["--option", "copy_items_logged.nope=1"]):
        proc = run_dbsync(project_dir, db_url, "online_data_migrations", *bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_batch_seconds_from_the_setting_or_the_command_line(project_dir, db_url, db_engine):
    create_schema(db_engine, rows=1000)
    ini = project_dir / "alembic.ini"
    ini.write_text(ini.read_text() + "batch_size = 10\nbatch_seconds = 100\n")
    code, out = run_json(project_dir, db_url, "--migration", "copy_items", "--max-count", "300")
    [m] = out["migrations"]
    assert (code, m["migrated"], m["batch_sizes"]) == (1, 300, [10, 100])  # 10, 20, 40, 80, 100, 50 (max count)
    code, out = run_json(project_dir, db_url, "--migration", "copy_items", "--batch-seconds", "0",
                         "--max-count", "100")
    assert (code, out["migrations"][0]["batch_sizes"], out["migrations"][0]["batches"]) == (1, [10, 10], 10)


def test_database_errors_are_one_line_with_a_masked_password(project_dir, db_url):
    url = sa.URL.create("postgresql+psycopg", username="u", password="s3cret", host="127.0.0.1", port=1, database="x")
    proc = run_dbsync(project_dir, url, "online_data_migrations")
    assert proc.returncode == 2
    assert "s3cret" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_sigkill_mid_run_then_rerun(project_dir, db_url, db_engine):
    create_schema(db_engine, rows=ROWS)
    argv = dbsync_argv(project_dir, db_url, "online_data_migrations", "--migration", "copy_items",
                       "--batch-size", "50", "--sleep", "0.02")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(project_dir)})
    deadline = time.monotonic() + 60
    while ledger_rows(db_engine, "copy_items") < 500 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = migrated_rows(db_engine)
    assert 500 <= done < ROWS
    assert ledger_rows(db_engine, "copy_items") == done  # the ledger commits with each batch
    code, out = run_json(project_dir, db_url, "--migration", "copy_items", "--batch-size", "500")
    assert code == 0
    assert out["migrations"][0]["remaining_before"] == ROWS - done
    assert out["migrations"][0]["migrated"] == ROWS - done
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n == 1)) == ROWS  # no row lost or doubled
    assert ledger_rows(db_engine, "copy_items") == ROWS


def test_two_concurrent_runners_never_migrate_a_row_twice(project_dir, db_url, db_engine):
    """copy_items_logged reads, pauses, then writes: without the per-migration lock both runners would
    read the same pending rows and log them twice."""
    create_schema(db_engine, rows=600)
    argv = dbsync_argv(project_dir, db_url, "--format", "json", "online_data_migrations", "--migration",
                       "copy_items_logged", "--batch-size", "50", "--batch-seconds", "0",
                       "--option", "copy_items_logged.pause=0.2",
                       "--sleep", "0.05")
    env = {**os.environ, "PYTHONPATH": str(project_dir)}
    runners = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for _ in range(2)]
    outputs = [r.communicate(timeout=300) for r in runners]
    assert [r.returncode for r in runners] == [0, 0], [err for _, err in outputs]
    reports = [json.loads(out)["migrations"][0] for out, _ in outputs]
    assert sum(r["migrated"] for r in reports) == 600
    assert all(r["migrated"] > 0 for r in reports), reports  # both really worked, taking turns
    assert scalar(db_engine, sa.select(sa.func.count()).select_from(item_log)) == 600
    assert scalar(db_engine, sa.select(sa.func.count(sa.distinct(item_log.c.item_id)))) == 600
    assert scalar(db_engine, sa.select(sa.func.max(items.c.n))) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_rolls_the_batch_back_and_says_interrupted(project_dir, db_url, db_engine, signum):
    """The signal lands while a batch is in progress (each batch pauses inside its transaction):
    that batch rolls back, the ledger says ``interrupted``, the exit code is 130, one line of output
    and no traceback, and a rerun completes every row exactly once."""
    rows = 400
    create_schema(db_engine, rows=rows)
    argv = dbsync_argv(project_dir, db_url, "--format", "json", "online_data_migrations", "--migration",
                       "copy_items_logged", "--batch-size", "20", "--batch-seconds", "0",
                       "--option", "copy_items_logged.pause=0.1")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(project_dir)})
    deadline = time.monotonic() + 60
    while ledger_rows(db_engine, "copy_items_logged") < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.uniform(0, 0.1))  # somewhere in the next batch
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "reconnect" not in err.lower() and "invalid transaction" not in err, err
    report = json.loads(out)
    [m] = report["migrations"]
    assert (report["exit_code"], report["interrupted"], m["state"], m["errors"]) == (130, True, "interrupted", 0)
    done = migrated_rows(db_engine)
    assert 40 <= done < rows and done % 20 == 0  # whole batches only: the interrupted one rolled back
    with db_engine.connect() as conn:
        row = ledger.read(conn)["copy_items_logged"]
    assert (row["state"], row["rows_migrated"], row["last_error"]) == ("interrupted", done, None)
    assert scalar(db_engine, sa.select(sa.func.count()).select_from(item_log)) == done
    code, again = run_json(project_dir, db_url, "--migration", "copy_items_logged", "--batch-size", "200")
    assert (code, again["migrations"][0]["migrated"]) == (0, rows - done)
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n == 1)) == rows


BAD_NUMBERS = ["nan", "inf", "-inf", "NaN", "-1", "1e400", "0x10", "", " ", "1e5000", "-0.0001"]


def _not_a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return True
    return False


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--sleep", "--batch-seconds", "--batch-size", "--max-count", "--workers"]),
       value=st.one_of(st.sampled_from(BAD_NUMBERS),
                       st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: f != f or abs(f) == float("inf")
                                                                              or f < 0).map(repr),
                       st.text(alphabet="abcxyz-+.e", min_size=1, max_size=6).filter(_not_a_number)))
def test_bad_numbers_are_usage_errors_before_any_work(project_dir, db_url, db_engine, option, value):
    if not sa.inspect(db_engine).has_table("items"):  # hypothesis reuses the database between examples
        create_schema(db_engine, rows=50)
    proc = run_dbsync(project_dir, db_url, "online_data_migrations", f"{option}={value}")
    assert proc.returncode == 2, (option, value, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert migrated_rows(db_engine) == 0
    with db_engine.connect() as conn:
        assert ledger.read(conn) == {}  # the ledger untouched



@pytest.mark.parametrize("argv", [["online_data_migrations", "--bogus"], ["online_data_migrations", "extra"],
                                  ["online_data_migrations", "--max-count=3", "--no-such-option=1"],
                                  ["--no-such-global", "online_data_migrations"]])
def test_unknown_options_exit_2_as_documented(project_dir, db_url, db_engine, argv):
    create_schema(db_engine, rows=10)
    proc = run_dbsync(project_dir, db_url, *argv)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "unrecognized arguments" in proc.stderr
    assert migrated_rows(db_engine) == 0
    from migrations_policy.cli import DBSYNC_COMMANDS
    [spec] = [s for s in DBSYNC_COMMANDS if s.name == "online_data_migrations"]
    assert spec.usage_exit_code == 2 and 127 not in spec.exit_codes and "invalid arguments" in spec.exit_codes[2]
