"""Release boundaries are state, and every downgrade statement is judged under its lock.

The inventory example is expanded to release 2 and its data migrations run to the end; release
2's ``downgrade()`` is regenerated so that it drops ``nodes.display_name`` (and ``nodes.meta``)
in a random form: alembic operations, ``op.execute`` of raw SQL, ``bind.execute(text(...))``,
``exec_driver_sql`` with quoting or comments, several statements in one call (PostgreSQL),
batch mode (SQLite), in a random order among the example's other statements.

* forms: release 2 wrote display names ``name`` cannot hold: ``rollback --dry-run`` lists them
  at risk whatever the form, ``rollback`` and plain ``alembic downgrade`` are refused and keep them;
* race: nothing is at risk when the rollback starts; a release-2 writer holding a row of
  ``nodes`` commits a long display name at a random moment while the rollback waits for its lock
  (PostgreSQL, MariaDB): the rollback is refused, the value kept;
* the release state: the quickstart's install is never rolled back "to the root"; a plain
  ``alembic downgrade`` across the contract is refused (one line) unless forced with a reason,
  which is recorded, and the runner afterwards never copies the re-created, empty column over
  the values it had copied.

Seeds are printed (``MP_RELEASE_SEED`` replays one).
"""

from __future__ import annotations

import os
import random
import textwrap
import threading
import time

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from ..gate.conftest import ROWS, App
from ..helpers import copy_example, forget_example_modules, set_ini_option

EXPAND_FILE = ("migrations", "versions", "expand", "0002_r2_meta_display_name_version.py")


def _seed() -> int:
    return int(os.environ.get("MP_RELEASE_SEED") or random.SystemRandom().randrange(1 << 30))


def _drop_forms(column: str, dialect: str) -> list[str]:
    q = (lambda n: f"`{n}`") if dialect == "mysql" else (lambda n: f'\\"{n}\\"')
    forms = [f'op.drop_column("nodes", "{column}")',
             f'op.execute("ALTER TABLE nodes DROP COLUMN {column}")',
             f'op.get_bind().execute(sa.text("ALTER TABLE nodes DROP COLUMN {column}"))',
             f'op.get_bind().exec_driver_sql("alter table nodes drop {column}")',
             f'op.execute("/* release 2 */ ALTER TABLE {q("nodes")} -- gone\\n DROP COLUMN {q(column)}")']
    if dialect == "postgresql":
        forms.append(f'op.execute("SELECT 1; ALTER TABLE nodes DROP COLUMN {column}")')
    if dialect == "sqlite":
        forms.append(f'with op.batch_alter_table("nodes") as batch:\n    batch.drop_column("{column}")')
    return forms


def regenerate_downgrade(app: App, rng: random.Random) -> str:
    """Rewrite release 2's downgrade(): display_name and meta dropped in random forms, among the
    example's other statements (after the sync triggers go); returns the new body."""
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    text = path.read_text()
    head, _, _ = text.partition("def downgrade() -> None:\n")
    dialect = app.engine.dialect.name
    rest = ['dialect = op.get_context().dialect.name',
            'if dialect in ("postgresql", "mysql"):\n    op.drop_constraint("fk_ports_node_id_nodes", "ports", '
            'type_="foreignkey")',
            'op.drop_index("ix_nodes_version", "nodes")', 'op.drop_index("ix_ports_node_id", "ports")',
            'op.drop_index("ix_ports_version", "ports")\nop.drop_column("ports", "version")']
    drops = [rng.choice(_drop_forms("display_name", dialect)), rng.choice(_drop_forms("meta", dialect)),
             'op.drop_index("ix_nodes_version", "nodes")\nop.drop_column("nodes", "version")']
    rest.remove('op.drop_index("ix_nodes_version", "nodes")')
    tail = rest[2:]  # the foreign key goes before the index it uses (MariaDB)
    rng.shuffle(tail)
    rng.shuffle(drops)
    body = "\n".join(['op.drop_sync_trigger("nodes", old="name", new="display_name")',
                      'op.drop_sync_trigger("nodes", old="extra", new="meta")', *rest[:2], *tail, *drops])
    path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(body, "    ") + "\n")
    return body


def _app(tmp_path, db_url) -> App:
    forget_example_modules()
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, db_url)
    if db_url.get_backend_name() == "sqlite":
        app.engine.dispose()
        app.engine = sa.create_engine(db_url, connect_args={"timeout": 60})
    app.alembic_upgrade("r1_inventory")
    app.seed_release1()
    assert app.dbsync("upgrade", "--expand") == 0
    assert app.dbsync("online_data_migrations") == 0
    return app


def _display_names(app: App) -> dict[int, str]:
    with app.engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT id, display_name FROM nodes")).all())


def _alembic(app: App, verb: str, target: str, force: str | None = None) -> str:
    project = app.project()
    try:
        if force is not None:
            project.alembic_config.cmd_opts = type("Opts", (), {"x": [f"migrations_policy_force={force}"]})()
        getattr(alembic_command, verb)(project.alembic_config, target)
        return ""
    except Exception as exc:  # alembic's CLI prints any of them as FAILED: ...
        return f"{type(exc).__name__}: {exc}"
    finally:
        project.dispose()


def _roll_back(app: App, route: str, capsys, otherwise: int | None = None) -> tuple[int | None, str]:
    """Run *route* (``dbsync rollback [--to REV]`` or ``alembic downgrade``, to ``r1_inventory``): its exit code and
    what it said.  alembic's refusal counts as exit code 4, its success as *otherwise*."""
    if route.startswith("dbsync"):
        code = app.dbsync(*route.split()[1:])
        return code, capsys.readouterr().err
    output = _alembic(app, "downgrade", "r1_inventory")
    return (4 if "downgrade refused" in output else otherwise), output


def test_every_downgrade_form_is_judged(tmp_path, db_url, backend, capsys):
    seed = _seed()
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        body = regenerate_downgrade(app, rng)
        print(f"seed {seed}:\n{body}")
        forget_example_modules()
        long_rows = rng.sample(range(1, ROWS + 1), rng.randint(1, 9))
        with app.engine.begin() as conn:  # release 2 writes names release 1 cannot hold whole
            for i in long_rows:
                display = f"node {i} " + "y" * rng.randint(65, 120)
                conn.execute(sa.text("UPDATE nodes SET display_name = :d, name = :n WHERE id = :i"),
                             {"d": display, "n": display[:64], "i": i})
        names = _display_names(app)
        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 0
        out = capsys.readouterr().out
        # exec_driver_sql cannot run offline: the plan says it cannot see it (and refuses
        # without --force); every other form is listed with its rows at risk
        assert f"nodes.display_name: {len(long_rows)} row(s)" in out or "cannot see what it drops" in out, (seed, out)
        if "exec_driver_sql" not in body:
            assert f"nodes.display_name: {len(long_rows)} row(s)" in out, (seed, out)
        assert app.dbsync("rollback") == 4
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "display_name" in err, (seed, err)
        route = rng.choice(["alembic downgrade r1_inventory", "alembic downgrade expand@-1"])
        output = _alembic(app, "downgrade", route.split()[-1])
        assert "downgrade refused" in output and "display_name" in output, (seed, route, output)
        assert "display_name" in app.columns("nodes") and _display_names(app) == names, seed
        assert "r2_meta_display_name_version" in app.heads()
    finally:
        app.engine.dispose()
        forget_example_modules()


def _hold_and_commit(engine: sa.Engine, key: int, display: str, held: threading.Event, release: threading.Event,
                     errors: list) -> None:
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE nodes SET display_name = :d WHERE id = :i"), {"d": display, "i": key})
            held.set()
            release.wait(30)
    except Exception as exc:  # noqa: BLE001 - the writer's error is a finding
        errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        held.set()


@pytest.mark.parametrize("route", ["dbsync rollback", "alembic downgrade"])
def test_a_writer_committing_while_the_rollback_waits_is_not_dropped(tmp_path, db_url, backend, route, capsys):
    if backend == "sqlite":
        pytest.skip("SQLite: a writer holds the whole database; nothing commits while a downgrade waits")
    seed = _seed()
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        body = regenerate_downgrade(app, rng)
        forget_example_modules()
        key = rng.randint(1, ROWS)
        display = f"written by release 2 while the rollback waits {rng.random()}" + "z" * 40
        hold = rng.uniform(0.2, 2.5)
        print(f"seed {seed}: key {key}, commit after {hold:.2f} s, route {route}\n{body}")
        held, release, errors = threading.Event(), threading.Event(), []
        writer = threading.Thread(target=_hold_and_commit, args=(app.engine, key, display, held, release, errors))
        writer.start()
        held.wait(30)
        timer = threading.Timer(hold, release.set)
        timer.start()
        try:
            code, output = _roll_back(app, route, capsys)
        finally:
            release.set()
            writer.join()
            timer.cancel()
        assert errors == [], errors
        assert "display_name" in app.columns("nodes"), (seed, code, output)
        assert _display_names(app)[key] == display, (seed, code, output)
        assert code == 4 and "Traceback" not in output, (seed, code, output)
    finally:
        app.engine.dispose()
        forget_example_modules()


def test_the_install_is_never_rolled_back_to_the_root(tmp_path, db_url, backend, capsys):
    """The quickstart's flow: release 1 installed by an expand on an empty database, no contract yet."""
    forget_example_modules()
    ini = copy_example(tmp_path)
    app = App(ini, db_url)
    try:
        versions = ini.parent / "migrations" / "versions"
        (versions / "expand" / "0002_r2_meta_display_name_version.py").unlink()
        (versions / "contract" / "0003_r3_drop_extra_name.py").unlink()
        assert app.dbsync("upgrade", "--expand") == 0
        app.seed_release1(rows=random.choice([0, random.randint(1, 5)]))
        tables = set(sa.inspect(app.engine).get_table_names())
        capsys.readouterr()
        for args in (("rollback", "--dry-run"), ("rollback", "--force", "--reason", "x"),
                     ("rollback", "--to", "expand_root"), ("rollback", "--dry-run", "--to", "expand_root")):
            assert app.dbsync(*args) == 4, args
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "root" in err, (args, err)
        assert set(sa.inspect(app.engine).get_table_names()) == tables
    finally:
        app.engine.dispose()
        forget_example_modules()


def test_rollback_reverts_the_last_release_only(tmp_path, db_url, backend, capsys):
    """State, not inference: after release 2's expand the rollback plans exactly r2 down to r1 and
    records nothing more; after the rollback the release is reverted, and nothing is left to roll back."""
    app = _app(tmp_path, db_url)
    try:
        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 0
        out = capsys.readouterr().out
        assert "would revert r2_meta_display_name_version (newest first), down to r1_inventory" in out, out
        assert app.dbsync("rollback") == 0
        assert app.heads() == ["r1_inventory"]
        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 4
        assert "root" in capsys.readouterr().err
        with app.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT expand_applied, contract_applied, install FROM "
                                        "migrations_policy_releases ORDER BY id")).all()
        assert [tuple(r)[:2] for r in rows if r[0] or r[1]] == [
            ("expand_root,r1_inventory", ""), ("r2_meta_display_name_version", "")]
        assert [bool(r[2]) for r in rows if r[0] or r[1]] == [True, False]
    finally:
        app.engine.dispose()
        forget_example_modules()


def test_plain_downgrade_across_the_contract_then_the_runner(tmp_path, db_url, backend, capsys):
    seed = _seed()
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        assert app.dbsync("upgrade", "--contract") == 0
        with app.engine.begin() as conn:  # release 2 keeps writing meta
            for i in rng.sample(range(1, ROWS + 1), 20):
                conn.execute(sa.text("UPDATE nodes SET meta = :m WHERE id = :i"), {"m": f"email{i}@x", "i": i})
        with app.engine.connect() as conn:
            meta = dict(conn.execute(sa.text("SELECT id, meta FROM nodes")).all())
        target = rng.choice(["contract_root", "contract@-1"])
        print(f"seed {seed}: alembic downgrade {target}")
        output = _alembic(app, "downgrade", target)
        assert output.startswith("ContractDowngradeRefused: downgrade refused") and output.count("\n") == 0, output
        assert "r3_drop_extra_name" in app.heads() and "extra" not in app.columns("nodes")
        reason = f"restore old code {rng.randrange(1000)}"
        assert _alembic(app, "downgrade", target, force=reason) == ""
        assert "extra" in app.columns("nodes")
        with app.engine.connect() as conn:
            forced = conn.execute(sa.text("SELECT command, reason FROM migrations_policy_gate_overrides")).all()
        assert ("downgrade", reason) in [tuple(f) for f in forced]
        code = app.dbsync("online_data_migrations")
        assert code in (0, 3), code
        with app.engine.connect() as conn:
            assert dict(conn.execute(sa.text("SELECT id, meta FROM nodes")).all()) == meta
    finally:
        app.engine.dispose()
        forget_example_modules()
