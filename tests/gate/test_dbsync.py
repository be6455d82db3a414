"""dbsync check / status, lock timeouts against a real lock holder, and schema compatibility."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest
import sqlalchemy as sa

from migrations_policy import SchemaIncompatible, assert_schema_compatible
from migrations_policy import cli, commands

from ..helpers import hold_lock, wait_until
from .conftest import ORPHANS, ROWS


def test_check_exit_code_for_each_state(app, capsys):
    assert app.dbsync("check") == 3            # release 1: expand pending
    assert app.dbsync("upgrade", "--expand") == 0
    assert app.dbsync("check") == 4            # data migrations pending
    assert app.dbsync("online_data_migrations") == 0
    assert app.dbsync("check") == 5            # contract pending and allowed
    assert app.dbsync("upgrade", "--contract") == 0
    assert app.dbsync("check") == 0            # nothing to do
    out = capsys.readouterr().out
    assert "nothing to do" in out.splitlines()[-1]


def test_check_unreachable_database_is_exit_2(app, capsys):
    from migrations_policy import cli

    url = "postgresql+psycopg://ops:pa55word@127.0.0.1:1/inventory"
    assert cli.dbsync_main(["-c", str(app.ini), "--url", url, "check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pa55word" not in err[0] and err[0].startswith("dbsync: error: cannot connect")


@pytest.fixture
def status_json(expanded, capsys):
    from migrations_policy import cli

    def read(*options: str) -> dict:
        capsys.readouterr()
        assert cli.dbsync_main(["-c", str(expanded.ini), "--url", expanded.url_text, "--format", "json",
                                "status", *options]) == 0
        return json.loads(capsys.readouterr().out)

    return read


def test_status_json_shape_and_values(expanded, status_json, backend):
    data = status_json("--exact")
    assert data["expand"] == {"current": ["r2_meta_display_name_version"],
                              "head": "r2_meta_display_name_version", "pending": []}
    assert data["contract"]["pending"] == ["contract_root", "r3_drop_extra_name"]
    assert data["contract"]["head"] == "r3_drop_extra_name"
    remaining = {m["name"]: m["remaining"] for m in data["data_migrations"]}
    assert remaining["nodes_extra_to_meta"] == ROWS
    assert remaining["port_node_orphans"] == ORPHANS
    assert not any(m["estimated"] for m in data["data_migrations"])
    assert {m["state"] for m in data["data_migrations"]} <= {"never run"}
    assert data["contract_allowed"] is False
    # By default: a pending row is found, the count is the planner's estimate (SQLite has none: it counts).
    fast = status_json()
    assert all(m["remaining"] >= 1 for m in fast["data_migrations"])
    assert all(m["estimated"] == (backend != "sqlite") for m in fast["data_migrations"])
    assert all(p["estimated"] == (backend != "sqlite") for p in fast["gate"]["pending"])

    assert expanded.dbsync("online_data_migrations") == 0
    for options in ((), ("--exact",)):
        data = status_json(*options)
        assert all(m["remaining"] == 0 and not m["estimated"] for m in data["data_migrations"])  # 0 is verified
        assert data["contract_allowed"] is True


def test_status_counts_the_runners_at_work_on_each_migration(expanded, status_json, backend, capsys):
    """Runners holding claims (alive: their session holds their token's lock) show in ``status``;
    a dead runner's claim does not count.  SQLite: runners take turns, never shown."""
    from migrations_policy.data.walk import claim_table

    assert {m["runners"] for m in status_json()["data_migrations"]} == {0}
    if backend == "sqlite":
        assert claim_table.unavailable(expanded.engine) is not None
        return
    assert claim_table.unavailable(expanded.engine) is None
    sessions = [expanded.engine.connect() for _ in range(3)]
    for i, session in enumerate(sessions):
        token = claim_table.hold_new(session)
        with expanded.engine.begin() as conn:
            claim_table.record(conn, "nodes_extra_to_meta" if i < 2 else "port_node_orphans", i * 10, i * 10 + 5, token)
    sessions[2].invalidate()  # the orphans runner died
    sessions[2].close()
    runners = {m["name"]: m["runners"] for m in status_json()["data_migrations"] if m["runners"]}
    assert runners == {"nodes_extra_to_meta": 2}
    capsys.readouterr()
    assert cli.dbsync_main(["-c", str(expanded.ini), "--url", expanded.url_text, "status"]) == 0
    assert "nodes_extra_to_meta: ~" in capsys.readouterr().out.split("2 runners at work")[0]
    for session in sessions[:2]:
        session.invalidate()
        session.close()
    assert {m["runners"] for m in status_json()["data_migrations"]} == {0}


# -- lock timeouts -----------------------------------------------------------------
#: A session of this database waiting for a table lock (the expand's ALTER behind the holder).
_WAITING = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND wait_event_type = 'Lock' AND query ILIKE '%ALTER TABLE%'",
    "mysql": "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() "
             "AND state LIKE 'Waiting for table metadata lock%'",
}


def _hold_lock_on_nodes(engine, release: threading.Event) -> threading.Thread:
    """A long transaction that read ``nodes`` and keeps its lock until *release* is set (60 s at most)."""
    return hold_lock(engine, "SELECT count(*) FROM nodes", release=release)


def _release_once_an_alter_gave_up(engine, release: threading.Event, then=None) -> threading.Thread:
    """Set *release* once an ALTER has waited for the holder and stopped waiting (the holder still
    holds, so it gave up: one lock wait lost), whenever the command gets there: a timer started with
    the holder raced the command's own start on a loaded machine (CI, load 15: the command reached
    its ALTER after a 2.5 s holder had gone, and no wait was lost).  *then*: a further condition
    (polled) that must hold before the release, e.g. the command has described the holder, which it
    does after the wait was lost (released before that, the description found no holder: CI)."""
    query = _WAITING[engine.dialect.name]

    def watch():
        try:
            if wait_until(engine, query, seconds=300):
                wait_until(engine, query, done=lambda rows: not rows[0][0], seconds=300)
                deadline = time.monotonic() + 300
                while then is not None and not then() and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            release.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_expand_waits_at_most_lock_timeout_then_retries(app):
    """lock_timeout = 1 s (set by the fixture): the ALTER gives up, backs off, retries, succeeds."""
    release = threading.Event()
    holder = _hold_lock_on_nodes(app.engine, release)
    watcher = _release_once_an_alter_gave_up(app.engine, release)
    project = app.project()
    try:
        result = commands.upgrade(project, phases=("expand",))
    finally:
        release.set()
        project.dispose()
        holder.join()
        watcher.join(60)
    assert result.after == ["r2_meta_display_name_version"]
    assert result.lock_timeouts >= 1
    assert "meta" in app.columns("nodes")


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_expand_gives_up_after_the_retries(app, capsys):
    from ..helpers import set_ini_option

    set_ini_option(app.ini, "migrations_policy", "lock_retries", "1")
    release = threading.Event()  # held until the command has returned, however long it takes to get there
    holder = _hold_lock_on_nodes(app.engine, release)
    try:
        code = app.dbsync("upgrade", "--expand")
    finally:
        release.set()
        holder.join()
    assert code == 8
    err = capsys.readouterr().err
    assert "gave up waiting for a lock after every retry" in err
    assert app.heads() == ["r1_inventory"]


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_readers_are_not_queued_behind_a_waiting_alter(app):
    """While our ALTER waits for the holder, a plain reader still gets through: the ALTER gives up
    after lock_timeout, so the reader queued behind it is served while the holder still holds (without
    lock_timeout it would wait for the holder, which here waits for the reader: the 60 s cap)."""
    release = threading.Event()
    holder = _hold_lock_on_nodes(app.engine, release)
    project = app.project()
    upgrade = threading.Thread(target=lambda: commands.upgrade(project, phases=("expand",)), daemon=True)
    upgrade.start()
    try:
        assert wait_until(app.engine, _WAITING[app.engine.dialect.name], seconds=300), "the ALTER never waited"
        reader = sa.create_engine(app.url)
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar() == ROWS
        reader.dispose()
        served_while_held = not release.is_set() and holder.is_alive()
    finally:
        release.set()
        holder.join()
        upgrade.join(120)
        project.dispose()
    assert served_while_held, "the reader was served only once the holder let go: queued behind the ALTER"


# -- schema compatibility ----------------------------------------------------------
def _code_of_release(app, tmp_path, keep_contract: bool, keep_r2: bool = True):
    """The example's scripts as an older release shipped them."""
    script_dir = tmp_path / "older_code"
    shutil.copytree(app.ini.parent / "migrations", script_dir)
    if not keep_contract:
        (script_dir / "versions" / "contract" / "0003_r3_drop_extra_name.py").unlink()
    if not keep_r2:
        (script_dir / "versions" / "expand" / "0002_r2_meta_display_name_version.py").unlink()
        (script_dir / "versions" / "contract" / "0003_r3_drop_extra_name.py").unlink(missing_ok=True)
    ini = tmp_path / "older.ini"
    ini.write_text(f"[alembic]\nscript_location = {script_dir}\n"
                   f"version_locations = {script_dir}/versions/expand {script_dir}/versions/contract\n"
                   "path_separator = space\n")
    return ini


def test_new_code_refuses_a_schema_without_its_expand(app):
    with pytest.raises(SchemaIncompatible, match="lacks expand revision.*r2_meta_display_name_version"):
        assert_schema_compatible(app.engine, app.ini)
    assert app.dbsync("upgrade", "--expand") == 0
    assert_schema_compatible(app.engine, app.ini)  # release-2 code may start now


def test_old_code_runs_on_an_expanded_schema(expanded, tmp_path):
    release1_code = _code_of_release(expanded, tmp_path, keep_contract=False, keep_r2=False)
    assert_schema_compatible(expanded.engine, release1_code)  # unknown revision recorded as expand


def test_old_code_refuses_a_contracted_schema(expanded, tmp_path):
    release2_code = _code_of_release(expanded, tmp_path, keep_contract=False)
    assert_schema_compatible(expanded.engine, release2_code)
    assert expanded.dbsync("online_data_migrations") == 0
    assert expanded.dbsync("upgrade", "--contract") == 0
    with pytest.raises(SchemaIncompatible, match="r3_drop_extra_name this code does not know"):
        assert_schema_compatible(expanded.engine, release2_code)


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_lock_retry_message_names_table_revision_and_holder(app, caplog):
    """The retry warning says which table, which revision, and who holds the lock (PostgreSQL: the
    holder's pid; MariaDB: its thread id), with when its transaction started."""
    import logging

    results: list = []
    release = threading.Event()
    thread = hold_lock(app.engine, "SELECT pg_backend_pid()" if app.engine.dialect.name == "postgresql"
                       else "SELECT CONNECTION_ID()", "SELECT count(*) FROM nodes", release=release, results=results)
    watcher = _release_once_an_alter_gave_up(
        app.engine, release,
        then=lambda: any("gave up waiting for a lock" in r.getMessage() for r in list(caplog.records)))
    holder_id = {"id": results[0]}
    project = app.project()
    try:
        with caplog.at_level(logging.WARNING, logger="migrations_policy.expand.lock_timeout"):
            result = commands.upgrade(project, phases=("expand",))
    finally:
        release.set()
        project.dispose()
        thread.join()
        watcher.join(60)
    assert result.lock_timeouts >= 1
    [first, *_] = [r.getMessage() for r in caplog.records if "gave up waiting for a lock" in r.getMessage()]
    assert "revision r1_inventory -> r2_meta_display_name_version" in first, first
    who = f"pid {holder_id['id']} " if app.engine.dialect.name == "postgresql" else f"thread {holder_id['id']} "
    assert who in first and "transaction since 20" in first, first
    if app.engine.dialect.name == "postgresql":
        assert "on nodes" in first, first


def test_upgrade_messages_say_which_branch_moved(tmp_path, capsys):
    """"expand: A -> B; contract: at C": each branch's own move, not the version table's heads."""
    from ..helpers import copy_example, forget_example_modules

    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'm.db'}"
    steps = [(["upgrade", "--expand"], "expand: base -> r2_meta_display_name_version; contract: at base"),
             (["upgrade", "--contract"], "expand: at r2_meta_display_name_version; contract: base -> r3_drop_extra_name"),
             (["stamp", "r1_inventory", "--purge"],
              "expand: r2_meta_display_name_version -> r1_inventory; contract: r3_drop_extra_name -> base")]
    for argv, expected in steps:
        assert cli.dbsync_main(["-c", str(ini), "--url", url, "--progress", "none", *argv]) == 0
        assert capsys.readouterr().out.strip() == expected
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "--format", "json", "stamp", "expand_root", "--purge"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["branches"]["expand"] == {"before": ["r1_inventory"], "after": ["expand_root"]}
