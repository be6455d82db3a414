"""The contract gate on SQLite, PostgreSQL and MariaDB: refused while data is pending,
nothing half-applied, allowed once complete, --force recorded, plain alembic gated too."""

from __future__ import annotations

import re
import subprocess

import pytest
import sqlalchemy as sa
from alembic.util import CommandError

from migrations_policy.gate.verdict import GateRefused

from ..helpers import console_script
from .conftest import ORPHANS, ROWS

CONTRACT_HEAD = "r3_drop_extra_name"
EXPAND_HEAD = "r2_meta_display_name_version"


def _assert_nothing_contracted(app):
    assert {"extra", "name"} <= app.columns("nodes")
    assert CONTRACT_HEAD not in app.heads()


def test_contract_refused_with_pending_migrations(expanded, capsys, backend):
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    err = capsys.readouterr().err
    # the two object-version migrations too: no contract runs while any migration is unfinished
    assert err.startswith("dbsync: error: contract refused: 5 data migration(s) not complete")
    assert err.count("the global rule") == 2 and "object_version_nodes" in err and "object_version_ports" in err
    # A pending row refuses (LIMIT 1); the count is the planner's estimate, marked (SQLite: counted).
    for name, rows in (("nodes_extra_to_meta", ROWS), ("nodes_name_to_display_name", ROWS),
                       ("port_node_orphans", ORPHANS)):
        found = re.search(rf"{name}: (~?)([\d,]+) rows? remaining( \(estimate[^)]*\))?", err)
        assert found, err
        assert bool(found.group(1)) == bool(found.group(3)) == (backend != "sqlite")
        assert int(found.group(2).replace(",", "")) >= 1
        if backend == "sqlite":
            assert int(found.group(2).replace(",", "")) == rows
    assert f"dbsync -c {expanded.ini} online_data_migrations" in err
    assert "Traceback" not in err
    _assert_nothing_contracted(expanded)


def test_contract_allowed_once_migrations_complete(expanded, capsys):
    assert expanded.dbsync("online_data_migrations") == 0
    assert expanded.dbsync("upgrade", "--contract") == 0
    assert "extra" not in expanded.columns("nodes") and "name" not in expanded.columns("nodes")
    assert CONTRACT_HEAD in expanded.heads()


def test_partial_data_migration_still_refused(expanded, capsys):
    assert expanded.dbsync("online_data_migrations", "--migration", "nodes_extra_to_meta") == 0
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    err = capsys.readouterr().err
    assert "nodes_extra_to_meta" not in err  # complete now
    assert "nodes_name_to_display_name" in err and "port_node_orphans" in err
    _assert_nothing_contracted(expanded)


def test_rows_dirtied_again_by_old_code_close_the_gate(expanded, capsys):
    assert expanded.dbsync("online_data_migrations") == 0
    with expanded.engine.begin() as conn:  # release-1 code writes a node the old way: the expand's
        conn.execute(sa.text("INSERT INTO nodes (id, uuid, name, extra) VALUES (:i, :u, 'late', '{}')"),
                     {"i": ROWS + 1, "u": "late-node"})  # sync triggers copy it at once, so a row is
        conn.execute(sa.text("UPDATE nodes SET extra = 'x', meta = 'y' WHERE id = :i"),  # dirtied by a
                     {"i": ROWS + 1})  # statement that writes both columns differently
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    assert re.search(r"nodes_extra_to_meta: ~?[\d,]+ rows? remaining", capsys.readouterr().err)
    _assert_nothing_contracted(expanded)


def test_plain_alembic_upgrade_heads_is_gated(expanded):
    with pytest.raises(GateRefused) as exc:
        expanded.alembic_upgrade("heads")
    assert isinstance(exc.value, CommandError)  # alembic's CLI prints it as "FAILED: ..."
    assert "port_node_orphans" in str(exc.value)
    _assert_nothing_contracted(expanded)


def test_plain_alembic_from_release1_refuses_expand_and_contract_in_one_run(app):
    """alembic upgrade heads at release 1 would run expand and contract back to back: refused."""
    with pytest.raises(GateRefused, match="needs expand revision r2_meta_display_name_version"):
        app.alembic_upgrade("heads")
    assert app.heads() == ["r1_inventory"]
    assert "meta" not in app.columns("nodes")  # not even the expand part ran


def test_fresh_database_bootstraps_in_one_run(tmp_path, db_url):
    from ..helpers import copy_example, forget_example_modules
    from .conftest import App

    forget_example_modules()
    app = App(copy_example(tmp_path), db_url)
    app.alembic_upgrade("heads")
    assert app.heads() == [CONTRACT_HEAD]
    app.engine.dispose()


def test_no_flag_upgrade_stops_after_expand_with_exit_4(app, capsys):
    assert app.dbsync("upgrade") == 4
    out = capsys.readouterr().out
    assert "expand applied; contract refused" in out
    assert EXPAND_HEAD in app.heads()
    _assert_nothing_contracted(app)


def test_force_is_recorded_in_the_ledger(expanded, capsys):
    # Orphans cleaned (PostgreSQL validates the foreign key in this contract); the copies are not.
    assert expanded.dbsync("online_data_migrations", "--migration", "port_node_orphans") == 0
    code = expanded.dbsync("upgrade", "--contract", "--force", "--reason", "hotfix INC-42")
    assert code == 0
    assert "contract gate FORCED (upgrade) by" in capsys.readouterr().err
    assert CONTRACT_HEAD in expanded.heads()
    with expanded.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT name, forced_by, forced_reason, forced_remaining, forced_at "
            "FROM migrations_policy_data_migrations WHERE forced_at IS NOT NULL ORDER BY name")).all()
    # the declared copies, and the object-version migrations the global rule waits for
    assert [r.name for r in rows] == ["nodes_extra_to_meta", "nodes_name_to_display_name",
                                      "object_version_nodes", "object_version_ports"]
    assert {r.forced_reason for r in rows} == {"hotfix INC-42"}
    assert all("@" in r.forced_by for r in rows)
    assert [r.forced_remaining for r in rows] == [ROWS] * 4
    with expanded.engine.connect() as conn:
        history = conn.execute(sa.text(
            "SELECT command, migration, remaining, reason, revisions FROM migrations_policy_gate_overrides "
            "ORDER BY id")).all()
    assert [(h.command, h.migration, h.remaining, h.reason) for h in history] == [
        ("upgrade", "nodes_extra_to_meta", ROWS, "hotfix INC-42"),
        ("upgrade", "nodes_name_to_display_name", ROWS, "hotfix INC-42"),
        ("upgrade", "object_version_nodes", ROWS, "hotfix INC-42"),
        ("upgrade", "object_version_ports", ROWS, "hotfix INC-42")]
    assert all(CONTRACT_HEAD in h.revisions.split(",") for h in history)


def test_forced_contract_over_orphans_is_refused_before_any_ddl(expanded, backend, capsys):
    """PostgreSQL's contract VALIDATEs the NOT VALID ports -> nodes key from expand.  With orphans
    left, ``--force`` overrides the pending data migrations but not the data precondition: refused
    before any DDL (it used to fail half-way at VALIDATE), the orphans counted."""
    if backend != "postgresql":
        pytest.skip("only PostgreSQL's contract adds (validates) the key in the example")
    assert expanded.dbsync("upgrade", "--contract", "--force", "--reason", "x") == 4
    err = capsys.readouterr().err
    assert f"{ORPHANS} offending rows (orphans: no parent row)" in err, err
    assert "--force does not override this" in err
    _assert_nothing_contracted(expanded)


def test_reason_without_force_is_a_usage_error(expanded, capsys):
    assert expanded.dbsync("upgrade", "--contract", "--reason", "x") == 2
    assert "--reason goes with --force" in capsys.readouterr().err


def test_alembic_cli_prints_failed_and_exits_nonzero(expanded, backend):
    if backend != "sqlite":
        pytest.skip("the alembic CLI reads sqlalchemy.url from the ini: exercised on the SQLite copy")
    from ..helpers import set_ini_option

    set_ini_option(expanded.ini, "alembic", "sqlalchemy.url", expanded.url_text)
    proc = subprocess.run([console_script("alembic"), "-c", str(expanded.ini), "upgrade", "heads"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "FAILED: contract refused" in proc.stdout + proc.stderr
    _assert_nothing_contracted(expanded)


def test_offline_sql_checks_the_gate_when_it_is_run(expanded, capsys, backend):
    """``alembic upgrade --sql`` cannot see the database: its SQL starts with statements that
    fail, when run, while a required data migration has a pending row, and pass once none has."""
    from alembic import command as alembic_command

    project = expanded.project()
    try:
        if backend == "sqlite":  # the example's batch drop needs a live database to reflect: guards alone
            guards = _guards_for(expanded, project)
        else:
            alembic_command.upgrade(project.alembic_config, f"{EXPAND_HEAD}:{CONTRACT_HEAD}", sql=True)
            captured = capsys.readouterr()
            assert "cannot see the database in offline (--sql) mode" in captured.err
            assert "ON_ERROR_STOP" in captured.out
            assert captured.out.index("the next statement fails") < captured.out.index("DROP COLUMN")
            guards = _guard_statements(captured.out)
        assert len(guards) == 3
        for statement in guards:
            with pytest.raises(sa.exc.DBAPIError), expanded.engine.begin() as conn:
                conn.exec_driver_sql(statement)
        assert expanded.dbsync("online_data_migrations") == 0
        for statement in guards:
            with expanded.engine.begin() as conn:
                conn.exec_driver_sql(statement)
    finally:
        project.dispose()


def _guard_statements(sql: str) -> list[str]:
    from migrations_policy.gate.hook.offline_guard import MARKER

    chunks = sql.split("\n\n")
    return [chunks[i + 1].strip() for i, chunk in enumerate(chunks)
            if chunk.startswith(MARKER) and "the next statement fails" in chunk]


def _guards_for(app, project) -> list[str]:
    """The guard statements for the example contract's requirements, compiled for *app*'s dialect."""
    from migrations_policy.gate.hook import offline_guard
    from migrations_policy.data.discovery import load_registry

    registry = load_registry(project.settings, project.alembic_config.get_prepend_sys_paths_list())
    required = {name: [CONTRACT_HEAD] for name in
                ("nodes_extra_to_meta", "nodes_name_to_display_name", "port_node_orphans")}
    lines = offline_guard.guard_lines(app.engine.dialect, required, registry)
    return [lines[i + 1] for i, line in enumerate(lines) if "the next statement fails" in line]


#: How a contract may say (or not say) that it needs nodes_extra_to_meta: (module level, first lines).
_OFFLINE_DECLARATIONS = {
    "attribute": ('requires_data_migrations = ("nodes_extra_to_meta",)', ""),
    "undeclared": ("", ""),
    "aliased_call": ('NEEDED = ("nodes_extra_to_meta",)', "require = op.require_data_migrations\nrequire(*NEEDED)\n"),
    "getattr_call": ('NEEDED = ("nodes_extra_to_meta",)', 'getattr(op, "require_" + "data_migrations")(*NEEDED)\n'),
}
_OFFLINE_DROPS = ('op.drop_column("nodes", "extra")', 'op.execute("ALTER TABLE nodes DROP COLUMN extra")',
                  'op.alter_column("nodes", "extra", new_column_name="extra_gone", existing_type=sa.Text())')


@pytest.mark.parametrize("declared", sorted(_OFFLINE_DECLARATIONS))
def test_offline_sql_guards_what_the_online_gate_requires(expanded, capsys, backend, declared):
    """Offline SQL guards what the online gate would require: declarations however written (an
    aliased op, ``getattr``) and the unfinished migrations reading what the revision drops, declared
    or not; run while nodes_extra_to_meta is pending, its guard statement fails before the drop."""
    import random
    import textwrap

    from alembic import command as alembic_command

    module_level, first = _OFFLINE_DECLARATIONS[declared]
    drop = random.choice(_OFFLINE_DROPS)
    root = expanded.ini.parent / "migrations" / "versions" / "contract"
    (root / "0003_r3_drop_extra_name.py").unlink()
    body = ('op.drop_sync_trigger("nodes", old="extra", new="meta")\n'
            'op.drop_sync_trigger("nodes", old="name", new="display_name")\n' + first + drop)
    (root / "0003_r3_offline.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n\nimport migrations_policy.window.sync_triggers\n\n"
        f"revision = 'r3_offline'\ndown_revision = 'contract_root'\nbranch_labels = None\n"
        f"depends_on = {EXPAND_HEAD!r}\n{module_level}\n\n"
        f"def upgrade() -> None:\n{textwrap.indent(body, '    ')}\n\n\ndef downgrade() -> None:\n    pass\n")
    project = expanded.project()
    try:
        alembic_command.upgrade(project.alembic_config, f"{EXPAND_HEAD}:r3_offline", sql=True)
    finally:
        project.dispose()
    out = capsys.readouterr().out
    guards = _guard_statements(out)
    assert guards and "nodes_extra_to_meta" in out[:out.index(guards[-1])], (drop, out[-1500:])
    drop_at = min(i for i in (out.find("DROP COLUMN extra"), out.find("extra_gone")) if i >= 0)
    assert out.index(guards[-1]) < drop_at
    for statement in guards:
        with pytest.raises(sa.exc.DBAPIError), expanded.engine.begin() as conn:
            conn.exec_driver_sql(statement)


def _replace_contract(app, body: str, revision: str = "r3_undeclared", depends_on: str | None = None) -> None:
    """The example's contract replaced by *revision*, declaring nothing, whose upgrade() is *body*."""
    import textwrap

    root = app.ini.parent / "migrations" / "versions" / "contract"
    (root / "0003_r3_drop_extra_name.py").unlink()
    (root / "0003_r3_undeclared.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n\n"
        f"revision = {revision!r}\ndown_revision = 'contract_root'\nbranch_labels = None\n"
        f"depends_on = {depends_on!r}\n\n\n"
        f"def upgrade() -> None:\n{textwrap.indent(body, '    ')}\n\n\ndef downgrade() -> None:\n    pass\n")


@pytest.mark.parametrize("route", ["dbsync upgrade --contract", "alembic upgrade r3_undeclared"])
def test_an_undeclared_drop_before_the_expand_has_run_is_refused(app, backend, route, capsys):
    """At release 1 no data migration has moved anything: nodes_extra_to_meta cannot run yet (its
    target column does not exist), so extra is still the only copy of its data.  A contract that
    declares nothing and does not depend on the expand may not drop it (before: "retired")."""
    import random

    _replace_contract(app, random.choice(_OFFLINE_DROPS[:2]))
    if route.startswith("dbsync"):
        assert app.dbsync("upgrade", "--contract") == 4
        assert "nodes_extra_to_meta" in capsys.readouterr().err
    else:
        with pytest.raises(CommandError, match="nodes_extra_to_meta"):
            app.alembic_upgrade("r3_undeclared")
    assert "extra" in app.columns("nodes") and "r3_undeclared" not in app.heads()
    with app.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(extra) FROM nodes")).scalar_one() == ROWS


def test_a_migration_retired_before_the_ledger_existed_protects_nothing(expanded, capsys):
    """Its source column dropped by an earlier contract, no ledger row (a history adopted after
    the fact): a set-based migration missing only what it reads is retired, so a later revision
    may drop the column it wrote."""
    assert expanded.dbsync("online_data_migrations") == 0
    assert expanded.dbsync("upgrade", "--contract") == 0  # drops nodes.extra and nodes.name
    with expanded.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM migrations_policy_data_migrations")
    root = expanded.ini.parent / "migrations" / "versions" / "contract"
    (root / "0004_r4_drop_meta.py").write_text(
        "from alembic import op\n\nrevision = 'r4_drop_meta'\n"
        f"down_revision = {CONTRACT_HEAD!r}\nbranch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade() -> None:\n    op.drop_column('nodes', 'meta')\n\n\ndef downgrade() -> None:\n    pass\n")
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 0, capsys.readouterr().err
    assert "meta" not in expanded.columns("nodes")


_UNNAMED_READERS = {  # a migration copying nodes.extra to meta, reading extra where no expression names it
    "literal_column": ('nodes = sa.table("nodes", sa.column("id", sa.Integer), sa.column("meta", sa.Text))\n'
                       'm = DataMigration("meta_from_extra", table=nodes, key="id",\n'
                       '                  values={"meta": sa.literal_column("extra")})\n'),
    "function, declared in its table": (
        'nodes = sa.table("nodes", sa.column("id", sa.Integer), sa.column("extra", sa.Text),\n'
        '                 sa.column("meta", sa.Text))\n\n\n'
        '@data_migration("meta_from_extra", table=nodes, key="id", pending=nodes.c.meta.is_(None))\n'
        'def m(connection, batch):\n'
        '    connection.execute(sa.update(nodes).where(batch.where).values(meta=nodes.c.extra))\n'),
    "function, SQL text": (
        'nodes = sa.table("nodes", sa.column("id", sa.Integer), sa.column("meta", sa.Text))\n\n\n'
        '@data_migration("meta_from_extra", table=nodes, key="id", pending=nodes.c.meta.is_(None))\n'
        'def m(connection, batch):\n'
        '    for key in connection.execute(sa.select(nodes.c.id).where(batch.where)).scalars().all():\n'
        '        connection.execute(sa.text("UPDATE nodes SET meta = extra WHERE id = :k"), {"k": key})\n'),
}


@pytest.mark.parametrize("form", sorted(_UNNAMED_READERS))
def test_a_column_read_where_no_expression_names_it_is_protected(expanded, capsys, form):
    """A migration may read a column that none of its key, values or pending names: its sa.table
    declares it, or its function or SQL text reads it.  Until it is complete, a contract that
    declares nothing may not drop that column (before: applied, its 300 rows lost)."""
    import random

    from ..helpers import forget_example_modules

    (expanded.ini.parent / "inventory" / "data_migrations.py").write_text(
        "import sqlalchemy as sa\nfrom migrations_policy.data import DataMigration, data_migration\n\n"
        + _UNNAMED_READERS[form])
    forget_example_modules()
    drops = ('op.drop_column("nodes", "extra")', 'op.execute("ALTER TABLE nodes DROP COLUMN extra")',
             'with op.batch_alter_table("nodes") as batch:\n    batch.drop_column("extra")')
    _replace_contract(expanded, 'op.drop_sync_trigger("nodes", old="extra", new="meta")\n'
                                'op.drop_sync_trigger("nodes", old="name", new="display_name")\n'
                      + random.choice(drops), depends_on=EXPAND_HEAD)
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    assert "meta_from_extra" in capsys.readouterr().err
    assert "extra" in expanded.columns("nodes") and "r3_undeclared" not in expanded.heads()
    assert expanded.dbsync("online_data_migrations") == 0
    assert expanded.dbsync("upgrade", "--contract") == 0  # once it is complete
    assert "extra" not in expanded.columns("nodes")


@pytest.mark.parametrize("blank", ["", " ", "\t", "  \t "])
def test_plain_alembic_force_needs_a_reason(expanded, blank):
    """``alembic -x migrations_policy_force=`` with no reason is refused before anything runs,
    as ``dbsync --force`` without ``--reason`` is: every override needs a reason, recorded."""
    import argparse

    from alembic import command as alembic_command
    from alembic.util import CommandError

    project = expanded.project()
    try:
        project.alembic_config.cmd_opts = argparse.Namespace(x=[f"migrations_policy_force={blank}"])
        with pytest.raises(CommandError) as info:
            alembic_command.upgrade(project.alembic_config, "heads")
        assert "needs a reason" in str(info.value)
    finally:
        project.dispose()
    assert CONTRACT_HEAD not in expanded.heads()
    _assert_nothing_contracted(expanded)
