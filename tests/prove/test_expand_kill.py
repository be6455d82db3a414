"""MariaDB: SIGKILL ``dbsync upgrade --expand`` at random statement boundaries of a multi-statement
expand revision; ``status`` must then say truthfully how far it got, and a rerun reach the head with
every column and index present exactly once.

Each statement alters its own table, so a test transaction that read table *k* makes
statement *k* wait for its metadata lock: the kill then lands inside statement *k*
("blocked").  In the other mode the kill lands as soon as the journal shows *k*
statements done, wherever the run is by then ("racing").  Seeded: ``MP_PROVE_SEED``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from migrations_policy import cli

from ..gate.expand_project import ExpandProject
from ..helpers import hold_lock

TABLES = tuple(f"t{i}" for i in range(1, 9))
TRIALS = 8


def _statement(i: int) -> str:
    if i % 3 == 0:
        return f'op.create_index("ix_t{i}_v", "t{i}", ["v"])'
    return f'op.add_column("t{i}", sa.Column("c{i}", sa.Integer))'


BODY = "\n".join(_statement(i) for i in range(1, len(TABLES) + 1))


def applied_statements(proj: ExpandProject) -> list[int]:
    """Which statements' objects exist (read from the catalog, not from the journal)."""
    inspector = sa.inspect(proj.engine)
    found = []
    for i in range(1, len(TABLES) + 1):
        if i % 3 == 0:
            present = [x["name"] for x in inspector.get_indexes(f"t{i}")] == [f"ix_t{i}_v"]
        else:
            columns = [c["name"] for c in inspector.get_columns(f"t{i}")]
            assert columns in (["id", "v"], ["id", "v", f"c{i}"]), columns
            present = columns[-1] == f"c{i}"
        if present:
            found.append(i)
    return found


def _hold_table(engine: sa.Engine, table: str, release: threading.Event) -> threading.Thread:
    """A metadata lock on *table* (MariaDB) until *release*."""
    return hold_lock(engine, f"SELECT count(*) FROM {table}", release=release)  # noqa: S608 - test's own name


def _wait_for(proj: ExpandProject, proc, predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while proc.poll() is None and not predicate(proj.journal()) and time.monotonic() < deadline:
        time.sleep(0.003)


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_sigkill_at_random_statement_boundaries_then_status_truthful_and_rerun_reaches_head(
        tmp_path, backend, server_for, capsys):
    server = server_for("mysql")
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    outcomes = []
    for trial in range(TRIALS):
        url = server.create_database()
        proj = ExpandProject(tmp_path / f"trial{trial}", url, BODY, extra_tables=TABLES, lock_retries="3")
        try:
            alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
            k = rng.randint(1, len(TABLES))
            mode = rng.choice(("blocked", "racing"))
            release = threading.Event()
            holder = _hold_table(proj.engine, f"t{k}", release) if mode == "blocked" else None
            proc = proj.popen("upgrade", "--expand")
            if mode == "blocked":
                _wait_for(proj, proc, lambda rows: (k, "running") in rows)
                time.sleep(rng.uniform(0, 0.3))  # inside the statement's lock wait
            else:
                _wait_for(proj, proc, lambda rows: sum(s == "done" for _, s in rows) >= k)
            killed = proc.poll() is None
            if killed:
                proc.send_signal(signal.SIGKILL)
            _, stderr = proc.communicate()
            release.set()
            if holder is not None:
                holder.join()
            assert "Traceback" not in stderr, stderr

            capsys.readouterr()
            assert cli.dbsync_main(["-c", str(proj.ini), "--format", "json", "status"]) == 0
            partial = json.loads(capsys.readouterr().out)["partly_applied"]
            applied = applied_statements(proj)
            if not killed or not partial:  # finished before the kill, or killed before statement 1 began
                assert applied in ([], list(range(1, len(TABLES) + 1)))
            else:
                (entry,) = partial
                assert entry["total"] == len(TABLES) and entry["script_matches"]
                done = entry["done"]
                assert applied[:done] == list(range(1, done + 1))  # every statement said done is there
                if entry["in_flight"] is None:
                    assert applied == list(range(1, done + 1))
                else:  # the statement that was running may or may not have been applied, nothing after it
                    assert entry["in_flight"]["statement"] == done + 1
                    assert applied in (list(range(1, done + 1)), list(range(1, done + 2)))
                if mode == "blocked":
                    assert done == k - 1 and entry["in_flight"]["statement"] == k
            outcomes.append((mode, k, killed, partial[0]["done"] if partial else None))

            assert cli.dbsync_main(["-c", str(proj.ini), "upgrade", "--expand"]) == 0, capsys.readouterr().err
            assert applied_statements(proj) == list(range(1, len(TABLES) + 1))
            assert proj.heads() == ["r2_expand"]
            assert proj.journal() == []
        finally:
            proj.engine.dispose()
            server.drop_database(url)
    print("kill outcomes (mode, k, killed, done):", outcomes)
    assert sum(1 for _, _, killed, done in outcomes if killed and done is not None) >= TRIALS // 2
