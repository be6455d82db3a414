"""The example's own release-2 expand (``examples/inventory``: version columns, CONCURRENTLY indexes, a
foreign key, sync triggers), interrupted at every one of its statements, on PostgreSQL and MariaDB, then
resumed with the documented command (issue 27, section 4).

Release 1 holds rows (their ``version`` will be NULL: release 1 had no version column).  A child
``dbsync upgrade --expand`` pauses before statement *k* of the revision (a test hook on the journal's
statement counter, nothing about the database is faked) while the test takes a real lock the
statement needs; then either

* ``timeout``: the statement waits for that lock until the configured ``lock_timeout`` (and its
  retries) give up, and the run fails as it would in production; or
* ``kill``: the child is SIGKILLed a random moment later (inside the lock wait, or wherever it got).

Afterwards ``dbsync check`` must exit 3 (expand pending; 4, data migrations pending, when a kill landed
after the revision had committed, as the process was exiting) and ``dbsync upgrade --expand`` must reach the
head with every column, index, constraint and trigger present once, and no release-1 row lost.
Seeded: ``MP_PROVE_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from migrations_policy import cli
from migrations_policy.core.project import Project
from migrations_policy.expand import journal
from migrations_policy.policy.sql import from_sql

from ..helpers import REPO, copy_example, forget_example_modules, set_ini_option

R2 = "r2_meta_display_name_version"
#: Random kill points per backend (the lock timeouts cover every statement).
KILLS = 3

#: The child: dbsync, with a pause before statement MP_PAUSE_AT of revision R2 until the test says go.
CHILD = """
import os, sys, time
from pathlib import Path
from migrations_policy.expand import journal
from migrations_policy.cli import dbsync_main

at, gate, revision = int(os.environ["MP_PAUSE_AT"]), Path(os.environ["MP_PAUSE_DIR"]), os.environ["MP_PAUSE_REV"]
original = journal._Run.statement

def statement(self, construct, execute):
    if self.revision == revision and self.ordinal + 1 == at:
        (gate / "at").write_text(str(at))
        deadline = time.monotonic() + 120
        while not (gate / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.005)
    return original(self, construct, execute)

journal._Run.statement = statement
sys.exit(dbsync_main())
"""


def _example(tmp_path: Path, url: sa.URL) -> Path:
    ini = copy_example(tmp_path)
    set_ini_option(ini, "alembic", "sqlalchemy.url", url.render_as_string(hide_password=False).replace("%", "%%"))
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    set_ini_option(ini, "migrations_policy", "lock_retries", "1")
    forget_example_modules()
    return ini


def _release1(ini: Path, engine: sa.Engine, rng: random.Random) -> int:
    alembic_command.upgrade(Config(str(ini)), "r1_inventory")
    forget_example_modules()
    nodes = rng.randint(5, 40)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO nodes (id, uuid, name, extra) VALUES (:id, :uuid, :name, :extra)"),
                     [{"id": i, "uuid": f"u{i}", "name": f"n{i}", "extra": f"e{i}"} for i in range(1, nodes + 1)])
        conn.execute(sa.text("INSERT INTO ports (id, node_id, address) VALUES (:id, :node, :address)"),
                     [{"id": i, "node": i, "address": f"a{i}"} for i in range(1, nodes + 1)])
    return nodes


def _planned(ini: Path, engine: sa.Engine, revision: str = R2) -> list[str]:
    project = Project(ini)
    with engine.connect() as conn:
        texts = journal.planned_statements(project.script, revision, conn)
    forget_example_modules()
    assert texts, f"the example's {revision} renders offline"
    return texts


def _table_of(text: str) -> str:
    tables = [o.table for o in from_sql(text) if o.table in ("nodes", "ports")]
    return tables[0] if tables else "nodes"


def _holder(engine: sa.Engine, table: str, rng: random.Random, release: threading.Event) -> threading.Thread | None:
    """An application transaction holding a lock statement *at* needs, until *release*; None when the
    paused run itself already holds a conflicting lock (a later statement of its PostgreSQL transaction
    on a table it altered): no application could then make that statement wait either."""
    if engine.dialect.name == "postgresql":
        # ACCESS EXCLUSIVE blocks every statement outright; ROW EXCLUSIVE (what an application's INSERT
        # takes) lets CREATE INDEX CONCURRENTLY build its index and then wait, leaving it INVALID.
        # (the paused run's own open transaction may hold ACCESS SHARE: then ROW EXCLUSIVE, which a
        # constraint or trigger statement still waits for)
        modes = rng.choice([["ACCESS EXCLUSIVE", "ROW EXCLUSIVE"], ["ROW EXCLUSIVE"]])
        attempts = [["SET LOCAL lock_timeout = '3s'", f"LOCK TABLE {table} IN {mode} MODE"] for mode in modes]
    else:
        attempts = [["SET SESSION lock_wait_timeout = 3", f"SELECT count(*) FROM {table}"]]  # a metadata lock
    ready, failed = threading.Event(), threading.Event()

    def hold():
        with engine.connect() as conn:
            for statements in attempts:
                try:
                    for statement in statements:
                        conn.execute(sa.text(statement))
                except sa.exc.DBAPIError:
                    conn.rollback()
                    continue
                ready.set()
                release.wait(120)
                conn.rollback()
                return
        failed.set()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    while not ready.is_set() and not failed.is_set():
        time.sleep(0.005)
    return thread if ready.is_set() else None


def _dbsync(ini: Path, capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    forget_example_modules()
    code = cli.dbsync_main(["-c", str(ini), *args])
    out, err = capsys.readouterr()
    forget_example_modules()
    return code, out + err


def _assert_release2_complete(engine: sa.Engine, nodes: int) -> None:
    inspector = sa.inspect(engine)
    node_columns = [c["name"] for c in inspector.get_columns("nodes")]
    port_columns = [c["name"] for c in inspector.get_columns("ports")]
    for column in ("meta", "display_name", "version"):
        assert node_columns.count(column) == 1, node_columns
    assert port_columns.count("version") == 1, port_columns
    indexes = {i["name"] for t in ("nodes", "ports") for i in inspector.get_indexes(t)}
    assert {"ix_ports_node_id", "ix_nodes_version", "ix_ports_version"} <= indexes, indexes
    assert [fk["name"] for fk in inspector.get_foreign_keys("ports")] == ["fk_ports_node_id_nodes"]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar() == nodes
        assert conn.execute(sa.text("SELECT count(*) FROM ports")).scalar() == nodes
        if engine.dialect.name == "postgresql":
            invalid = conn.execute(sa.text("SELECT count(*) FROM pg_index WHERE NOT indisvalid")).scalar()
            assert invalid == 0
            triggers = conn.execute(sa.text("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'nodes'::regclass "
                                            "AND NOT tgisinternal")).scalar()
        else:
            triggers = conn.execute(sa.text("SELECT count(*) FROM information_schema.triggers "
                                            "WHERE event_object_schema = DATABASE() "
                                            "AND event_object_table = 'nodes'")).scalar()
        assert triggers >= 2, triggers
        # the sync triggers work: a release-1 write reaches release 2's columns
        conn.execute(sa.text("UPDATE nodes SET extra = 'written', name = 'w' WHERE id = 1"))
        row = conn.execute(sa.text("SELECT meta, display_name FROM nodes WHERE id = 1")).one()
        assert tuple(row) == ("written", "w"), row
        conn.rollback()


def _interrupt(ini: Path, engine: sa.Engine, at: int, table: str, mode: str, rng: random.Random,
               gate: Path, revision: str = R2, phase: str = "--expand") -> tuple[int | None, str]:
    """Run ``dbsync upgrade PHASE`` in a child paused before statement *at* of *revision*, then let
    it go with a lock holder on *table* (mode "timeout", or sometimes) or SIGKILL it (mode "kill")."""
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "MP_PAUSE_AT": str(at), "MP_PAUSE_DIR": str(gate), "MP_PAUSE_REV": revision}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, "-c", str(ini), "upgrade", phase],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    release, holder = threading.Event(), None
    try:
        deadline = time.monotonic() + 300
        while not (gate / "at").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            if mode == "timeout" or rng.random() < 0.7:  # a kill lands inside the lock wait, or anywhere
                holder = _holder(engine, table, rng, release)
            (gate / "go").write_text("go")
            if mode == "kill":
                time.sleep(rng.uniform(0, 0.4))
                proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        release.set()
        if holder is not None:
            holder.join()
    return proc.returncode, err


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_example_release2_expand_interrupted_at_every_statement_resumes(tmp_path, backend, server_for, capsys):
    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    probe_url = server.create_database()
    try:
        probe_engine = sa.create_engine(probe_url)
        texts = _planned(_example(tmp_path / "probe", probe_url), probe_engine)
        probe_engine.dispose()
    finally:
        server.drop_database(probe_url)
    trials = [("timeout", k) for k in range(1, len(texts) + 1)]
    trials += [("kill", rng.randint(1, len(texts))) for _ in range(KILLS)]
    outcomes = []
    for n, (mode, at) in enumerate(trials):
        url = server.create_database()
        engine = sa.create_engine(url)
        try:
            ini = _example(tmp_path / f"trial{n}", url)
            nodes = _release1(ini, engine, rng)
            code, err = _interrupt(ini, engine, at, _table_of(texts[at - 1]), mode, rng, tmp_path / f"gate{n}")
            assert "Traceback" not in err, (seed, mode, at, err)
            outcomes.append((mode, at, code))
            if code == 0:  # the statement needed no lock the holder took (SET ...): nothing interrupted
                continue
            with engine.connect() as conn:  # a kill may land after the revision committed (process exit)
                finished = R2 in conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
            check, check_err = _dbsync(ini, capsys, "check")
            assert check == (4 if finished else 3), (seed, mode, at, texts[at - 1], finished, check, check_err)
            resumed, resume_err = _dbsync(ini, capsys, "upgrade", "--expand")
            assert resumed == 0, (seed, mode, at, texts[at - 1], resume_err)
            _assert_release2_complete(engine, nodes)
            if mode == "kill" or rng.random() < 0.25:  # and the release goes on (not every trial: time)
                done, done_err = _dbsync(ini, capsys, "online_data_migrations")
                assert done in (0, 3), (seed, mode, at, done_err)
                assert _dbsync(ini, capsys, "check")[0] == 5, (seed, mode, at)
        finally:
            engine.dispose()
            server.drop_database(url)
    print("outcomes (mode, statement, exit code of the interrupted run):", outcomes)
    assert sum(code not in (0, None) or mode == "kill" for mode, _, code in outcomes) >= len(texts) // 2
