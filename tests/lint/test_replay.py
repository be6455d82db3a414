"""``lint --replay``: the history upgraded from base on a real scratch database (SQLite, PostgreSQL, MariaDB).

Histories are generated (``history.generate``, seeded): chains, branch points and merges of
scripts that create tables, add and drop columns, reflect the live schema and act on what
they find, or fail on the database.  The generator knows what each script must get.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from . import history as histories
from .conftest import script

SEEDS = (3, 6, 7)  # between them: branch points, merges, a second root, failures with and without descendants


def _replay_args(backend: str, server_for) -> list[str]:
    """Replay on a throwaway database the linter creates (SQLite: a temporary file)."""
    if backend == "sqlite":
        return ["--replay"]
    return ["--scratch-server", server_for(backend).url.render_as_string(hide_password=False)]


def _databases(server) -> set[str]:
    engine = server.engine()
    try:
        with engine.connect() as conn:
            if server.name == "postgresql":
                return set(conn.execute(sa.text("SELECT datname FROM pg_database")).scalars())
            return set(conn.execute(sa.text("SHOW DATABASES")).scalars())
    finally:
        engine.dispose()


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_history_every_file_a_verdict_judged_from_what_ran(backend, server_for, tmp_path, run_lint, seed):
    history = histories.generate(seed)
    paths = history.write(tmp_path / "versions")
    before = _databases(server_for(backend)) if backend != "sqlite" else set()
    run = run_lint("--format", "json", *_replay_args(backend, server_for), tmp_path / "versions")
    report = run.json
    assert report["files"] == len(history.scripts), run.err
    by_path: dict[str, list[dict]] = {}
    for finding in report["findings"]:
        by_path.setdefault(finding["path"], []).append(finding)
    failing, blocked = history.failing() - history.blocked(), history.blocked()
    dialect = "mysql" if backend == "mysql" else backend
    for item in history.scripts:
        found = by_path.get(str(paths[item.revision]), [])
        codes = {f["code"] for f in found}
        assert "MP001" not in codes, found  # nothing is read from source: everything ran
        assert all(f["dialect"] in ("", dialect) for f in found), found
        if item.revision in blocked:
            assert codes == {"MP000"}, (item, found)
            assert "not replayed" in found[0]["message"]
            ancestor = found[0]["message"].split("its ancestor ")[1].split(" ")[0]
            assert ancestor in failing and str(paths[ancestor]) in found[0]["message"]
        elif item.revision in failing:
            errors = [f for f in found if f["code"] == "MP004"]
            assert len(errors) == 1 and "MP000" not in codes, (item, found)
            assert item.missing_table in errors[0]["message"] and errors[0]["line"] == 11
        else:
            assert not codes & {"MP000", "MP004"}, (item, found)
            # The reflecting scripts: MP101 exactly when the column was there to drop (offline reads both ways).
            assert ("MP101" in codes) == item.drops, (item, found)
    assert run.code == (2 if blocked else 1 if failing or any(s.drops for s in history.scripts) else 0)
    if backend != "sqlite":
        assert _databases(server_for(backend)) == before  # the throwaway database is gone


def test_offline_lint_of_the_same_reflecting_script_differs(tmp_path, run_lint):
    """The replay's MP101 verdicts come from the database: offline, a reflecting script is read from source."""
    history = histories.generate(3)
    history.write(tmp_path / "versions")
    offline = run_lint("--format", "json", "--dialect", "sqlite", tmp_path / "versions")
    reflecting = [s for s in history.scripts if s.kind == "reflect"]
    assert reflecting and len(offline.findings("MP001")) >= len(reflecting)


def test_order_is_alembic_s_each_script_at_its_down_revision(backend, server_for, tmp_path, run_lint):
    """Every script records the heads it found in alembic_version: alembic's order, merges and all."""
    versions = tmp_path / "versions"
    versions.mkdir()
    log = tmp_path / "heads.log"
    body = f'''
    heads = sorted(op.get_bind().execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    with open({str(log)!r}, "a") as fh:
        fh.write(revision + ":" + ",".join(heads) + "\\n")
    op.create_table("t_" + revision, sa.Column("id", sa.Integer, primary_key=True))
    '''
    tree = {"a": None, "b": "a", "c": "a", "d": ("b", "c"), "e": "d", "z": None}
    for revision, down in sorted(tree.items(), reverse=True):  # file order is not the history's order
        (versions / f"{revision}.py").write_text(script(body, revision=revision, down=down))
    run = run_lint("--format", "json", *_replay_args(backend, server_for), versions)
    assert run.code == 0, run.out + run.err
    lines = [line.split(":") for line in log.read_text().splitlines()]
    order = [revision for revision, _ in lines]
    assert sorted(order) == sorted(tree)
    for position, (revision, heads) in enumerate(lines):
        heads = set(heads.split(",")) - {""}
        parents = {tree[revision]} if isinstance(tree[revision], str) else set(tree[revision] or ())
        applied = set(order[:position])
        assert parents <= applied, (revision, order)  # at its own down_revision (and nothing after it)
        # alembic_version holds the applied revisions nothing applied builds on
        built_on = {p for r in applied for p in ({tree[r]} if isinstance(tree[r], str) else set(tree[r] or ()))}
        assert heads == applied - built_on, (revision, heads)


def test_user_database_with_tables_is_refused_and_untouched(backend, db_url, tmp_path, run_lint):
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE keep_me (id INTEGER PRIMARY KEY)"))
        conn.execute(sa.text("INSERT INTO keep_me (id) VALUES (1)"))
    histories.generate(7).write(tmp_path / "versions")
    url = db_url.render_as_string(hide_password=False)
    run = run_lint("--replay", "--url", url, tmp_path / "versions")
    assert run.code == 2 and run.out == ""
    assert len(run.err.strip().splitlines()) == 1 and "not empty" in run.err and "keep_me" in run.err
    if db_url.password:
        assert db_url.password not in run.err and "***" in run.err
    with engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == ["keep_me"]
        assert conn.execute(sa.text("SELECT id FROM keep_me")).scalars().all() == [1]
    engine.dispose()


def test_empty_user_database_is_replayed_on(backend, db_url, tmp_path, run_lint):
    history = histories.generate(7)
    paths = history.write(tmp_path / "versions")
    run = run_lint("--format", "json", "--replay", "--url", db_url.render_as_string(hide_password=False),
                   tmp_path / "versions")
    assert run.json["files"] == len(history.scripts)
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        heads = set(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    engine.dispose()
    replayed = [s for s in history.scripts if s.revision not in history.failing() | history.blocked()]
    assert {f"t_{s.revision.split('x')[0][1:]}_{int(s.revision.split('x')[1])}" for s in replayed
            if s.kind == "create table"} <= tables
    # The heads alembic_version holds are the replayed scripts no replayed script builds on.
    built_on = {d for s in replayed for d in s.down}
    assert heads == {s.revision for s in replayed} - built_on
    assert all(str(paths[s.revision]) in run.out for s in history.scripts if s.revision in history.failing())


def test_sqlite_scratch_file_is_removed(tmp_path, run_lint, monkeypatch):
    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_parent))
    seen = tmp_path / "seen.txt"
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.py").write_text(script(
        f'open({str(seen)!r}, "w").write(op.get_bind().engine.url.database)\n'
        'op.create_table("t", sa.Column("id", sa.Integer, primary_key=True))', revision="a"))
    run = run_lint("--replay", tmp_path / "v")
    assert run.code == 0, run.out + run.err
    used = Path(seen.read_text())
    assert used.parent.parent == scratch_parent and not used.exists() and list(scratch_parent.iterdir()) == []


def test_a_script_that_is_not_in_the_history_gets_a_verdict(tmp_path, run_lint):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script('op.create_table("t", sa.Column("id", sa.Integer, primary_key=True))',
                                          revision="a"))
    (versions / "orphan.py").write_text(script('op.add_column("t", sa.Column("x", sa.Integer))', revision="o",
                                               down="gone"))
    (versions / "child.py").write_text(script("pass", revision="c", down="o"))
    (versions / "twice1.py").write_text(script("pass", revision="w", down="a"))
    (versions / "twice2.py").write_text(script("pass", revision="w", down="a"))
    run = run_lint("--format", "json", "--replay", versions)
    messages = {Path(f["path"]).name: f["message"] for f in run.json["findings"] if f["code"] == "MP000"}
    assert run.json["files"] == 5 and set(messages) == {"orphan.py", "child.py", "twice1.py", "twice2.py"}
    assert "gone is not among the linted files" in messages["orphan.py"]
    assert "ancestor o" in messages["child.py"] and "declared by several files" in messages["twice1.py"]


def test_timeout_and_own_error_block_descendants(tmp_path, run_lint):
    versions = tmp_path / "versions"
    versions.mkdir()
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlint_timeout = 2\n")
    (versions / "a.py").write_text(script("while True:\n    pass", revision="a"))
    (versions / "b.py").write_text(script("pass", revision="b", down="a"))
    (versions / "c.py").write_text(script("raise ValueError('boom')", revision="c"))
    (versions / "d.py").write_text(script("pass", revision="d", down="c"))
    run = run_lint("--format", "json", "--replay", versions)
    messages = {Path(f["path"]).name: f["message"] for f in run.json["findings"] if f["code"] == "MP000"}
    assert "did not finish within 2 s" in messages["a.py"] and "ancestor a" in messages["b.py"]
    assert "ValueError: boom" in messages["c.py"] and "ancestor c" in messages["d.py"]


@pytest.mark.parametrize("name,how", [("postgresql", signal.SIGINT), ("postgresql", signal.SIGTERM),
                                      ("mysql", signal.SIGINT)])
def test_interrupted_replay_drops_its_database(server_for, tmp_path, name, how):
    server = server_for(name)
    versions = tmp_path / "versions"
    versions.mkdir()
    started = tmp_path / "started"
    (versions / "a.py").write_text(script(f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(60)",
                                          revision="a"))
    before = _databases(server)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "migrations_policy.cli", "lint", "--scratch-server",
                             server.url.render_as_string(hide_password=False), str(versions)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists() and any(name.startswith("mp_replay_") for name in _databases(server) - before)
    proc.send_signal(how)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _databases(server) == before


def test_server_that_refuses_create_database_is_one_line(server_for, tmp_path, run_lint):
    server = server_for("postgresql")
    role = f"mp_weak_{uuid.uuid4().hex[:8]}"
    engine = server.engine(isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN PASSWORD 'weak-secret-pw' NOCREATEDB"))
    engine.dispose()
    histories.generate(3).write(tmp_path / "versions")
    url = server.url.set(username=role, password="weak-secret-pw").render_as_string(hide_password=False)
    run = run_lint("--scratch-server", url, tmp_path / "versions")
    assert run.code == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1, run.err
    assert "cannot create a scratch database" in run.err and "permission denied" in run.err
    assert "weak-secret-pw" not in run.err


def test_replay_dialect_must_be_linted(tmp_path, run_lint):
    histories.generate(3).write(tmp_path / "versions")
    run = run_lint("--replay", "--dialect", "postgresql", tmp_path / "versions")
    assert run.code == 2 and "sqlite" in run.err and len(run.err.strip().splitlines()) == 1
    run = run_lint("--scratch-server", "sqlite:///x.db", tmp_path / "versions")
    assert run.code == 2 and "--scratch-server is a PostgreSQL or MySQL/MariaDB server URL" in run.err


def test_a_script_that_kills_the_replay_worker(tmp_path, run_lint):
    """The worker is restarted for the rest: the killer gets MP000, its descendants are not replayed, the others are."""
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", revision="a"))
    (versions / "b.py").write_text(script("pass", revision="b", down="a"))
    (versions / "c.py").write_text(script('op.create_table("t", sa.Column("id", sa.Integer, primary_key=True))\n'
                                          'op.drop_column("t", "id")', revision="c"))
    run = run_lint("--format", "json", "--replay", versions)
    by_file = {Path(f["path"]).name: f for f in run.json["findings"]}
    assert "ended the linter's replay process" in by_file["a.py"]["message"]
    assert "its ancestor a" in by_file["b.py"]["message"]
    assert by_file["c.py"]["code"] == "MP004"  # it ran, on the database (SQLite cannot drop a primary key column)


def test_expand_and_contract_branches_replay_in_order_with_their_phases(backend, server_for, tmp_path, run_lint):
    versions = tmp_path / "versions"
    (versions / "expand").mkdir(parents=True)
    (versions / "contract").mkdir()
    (versions / "expand" / "e1.py").write_text(script(
        'op.create_table("acct", sa.Column("id", sa.Integer, primary_key=True), sa.Column("legacy", sa.Integer), '
        'sa.Column("old", sa.Integer))', revision="e1", labels=("expand",)))
    (versions / "contract" / "c1.py").write_text(script("pass", revision="c1", down="e1", labels=("contract",)))
    (versions / "expand" / "e2.py").write_text(script('op.add_column("acct", sa.Column("email", sa.String(50)))',
                                                       revision="e2", down="e1"))
    (versions / "contract" / "c2.py").write_text(script(
        'columns = [c["name"] for c in sa.inspect(op.get_bind()).get_columns("acct")]\n'
        'assert "email" in columns  # the expand revision it depends on has run\n'
        'op.drop_column("acct", "legacy")', revision="c2", down="c1", extra='depends_on = "e2"\n'))
    (versions / "expand" / "e3.py").write_text(script('op.drop_column("acct", "old")', revision="e3",
                                                       down="e2"))
    run = run_lint("--format", "json", *_replay_args(backend, server_for), versions)
    found = {(Path(f["path"]).name, f["code"]) for f in run.json["findings"]}
    assert run.json["files"] == 5 and not {code for _, code in found} & {"MP000", "MP004", "MP001"}, run.out
    assert ("e3.py", "MP101") in found and not any(name == "c2.py" and code == "MP101" for name, code in found)


def test_depends_on_a_branch_label_or_a_missing_revision(tmp_path, run_lint):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "e1.py").write_text(script('op.create_table("t", sa.Column("id", sa.Integer, primary_key=True))',
                                           revision="e1", labels=("expand",)))
    (versions / "c1.py").write_text(script('op.create_table("u", sa.Column("id", sa.Integer, primary_key=True))',
                                           revision="c1", extra='depends_on = ("expand",)\n'))
    (versions / "c2.py").write_text(script("pass", revision="c2", down="c1", extra='depends_on = "nowhere"\n'))
    run = run_lint("--format", "json", "--replay", versions)
    messages = {Path(f["path"]).name: f["message"] for f in run.json["findings"]}
    assert set(messages) == {"c2.py"} and "nowhere is not among the linted files" in messages["c2.py"], run.out


def test_database_error_text_never_shows_the_password(server_for, tmp_path, run_lint):
    """MariaDB quotes the missing table's name; named after the server password, it is masked in MP004."""
    server = server_for("mysql")
    password = server.url.password
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script(f'op.add_column("{password}", sa.Column("x", sa.Integer))', revision="a"))
    url = server.url.render_as_string(hide_password=False)
    run = run_lint("--format", "json", "--scratch-server", url, versions)
    (finding,) = run.findings("MP004")
    assert password not in run.out + run.err and "***" in finding["message"] and "doesn't exist" in finding["message"]
    # Masked at the source, not only by the command line's printing: the API's report too.
    from migrations_policy.lint import run as lint_run
    from migrations_policy.lint.scratch.database import Target

    (finding,) = [f for f in lint_run([versions], replay=Target(server=url)).findings if f.code == "MP004"]
    assert password not in finding.message and "***" in finding.message


def test_postgresql_database_with_a_table_in_another_schema_is_refused(server_for, tmp_path, run_lint):
    server = server_for("postgresql")
    url = server.create_database()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE SCHEMA other"))
            conn.execute(sa.text("CREATE TABLE other.kept (id INTEGER PRIMARY KEY)"))
        histories.generate(3).write(tmp_path / "versions")
        run = run_lint("--replay", "--url", url.render_as_string(hide_password=False), tmp_path / "versions")
        assert run.code == 2 and "other.kept" in run.err and len(run.err.strip().splitlines()) == 1
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []  # nothing was created in public either
    finally:
        engine.dispose()
        server.drop_database(url)


def test_after_a_worker_restart_the_blocked_still_name_the_script_that_failed(tmp_path, run_lint):
    """alembic's order here: a (fails on the database), b (not replayed), c, k (kills the worker), then, in a
    restarted worker, z and y: both name a, the script that failed, not b, which merely was not replayed."""
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script('op.add_column("absent", sa.Column("x", sa.Integer))', revision="a"))
    (versions / "b.py").write_text(script("pass", revision="b", down="a"))
    (versions / "c.py").write_text(script("pass", revision="c"))
    (versions / "k.py").write_text(script("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
                                          revision="k", down="c"))
    (versions / "y.py").write_text(script("pass", revision="y", down="b"))
    (versions / "z.py").write_text(script("pass", revision="z", down=("b", "k")))
    run = run_lint("--format", "json", "--replay", versions)
    messages = {Path(f["path"]).name: f["message"] for f in run.json["findings"]}
    assert "ended the linter's replay process" in messages["k.py"], messages
    for name in ("b.py", "y.py", "z.py"):
        assert f"its ancestor a ({versions / 'a.py'})" in messages[name], (name, messages[name])


def test_url_without_replay_names_the_refused_script_and_points_to_replay(backend, db_url, tmp_path, run_lint):
    """``--url`` alone runs a reflecting script on the database as it stands: refused there, it is that script's
    MP000 (it was an internal error, exit 3, before); ``--replay`` runs it at its down_revision."""
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text(script('op.create_table("t", sa.Column("id", sa.Integer, primary_key=True), '
                                          'sa.Column("c", sa.Integer))', revision="a"))
    (versions / "b.py").write_text(script('sa.Table("t", sa.MetaData(), autoload_with=op.get_bind())\n'
                                          'op.drop_column("t", "c")', revision="b", down="a"))
    url = db_url.render_as_string(hide_password=False)
    run = run_lint("--format", "json", "--url", url, versions)
    assert run.code == 2, run.out + run.err
    (finding,) = run.findings("MP000")
    assert finding["path"].endswith("b.py") and finding["line"] == 11 and "--replay" in finding["message"]
    replayed = run_lint("--format", "json", "--replay", "--url", url, versions)
    assert replayed.code == 1 and replayed.codes == {"MP101"}, replayed.out
