"""``alembic revision --autogenerate`` for real, on SQLite, PostgreSQL and MariaDB:
the files written (phase, ops, dependencies), applied with ``alembic upgrade``,
the data migrations run, the scripts linted, and ``alembic check`` converging."""

from __future__ import annotations

import re
import sys

import pytest
import sqlalchemy as sa
from alembic.util import CommandError

from migrations_policy.core.errors import ConfigError
from migrations_policy.window.sync_triggers import stale_sync_triggers, sync_triggers

from .conftest import confirm_guessed_renames, let_data_go, module_of

V1 = '''
nodes = sa.Table("nodes", metadata, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("name", sa.String(64)), sa.Column("extra", sa.Text),
                 sa.Column("state", sa.String(10)), sa.Column("size", sa.Integer))
ports = sa.Table("ports", metadata, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("node_id", sa.Integer), sa.Column("old", sa.String(5)),
                 sa.Column("legacy", sa.Integer, index=True))
scratch = sa.Table("scratch", metadata, sa.Column("id", sa.Integer, primary_key=True))
'''

# Every kind of change: new table with FK and index, nullable column, NOT NULL column without
# default, column with a server default, index on an existing table, FK on an existing table,
# NOT NULL on an existing column, dropped index / column / table.
V2 = '''
nodes = sa.Table("nodes", metadata, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("name", sa.String(64)), sa.Column("meta", sa.Text),
                 sa.Column("state", sa.String(10), nullable=False), sa.Column("size", sa.Integer, index=True),
                 sa.Column("must", sa.Integer, nullable=False), sa.Column("tag", sa.String(5), server_default="x"))
ports = sa.Table("ports", metadata, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", name="fk_ports_node_id_nodes")))
groups = sa.Table("groups", metadata, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id")), sa.Index("ix_groups_node", "node_id"))
'''


def lint(path, phase):
    from migrations_policy.lint.engine import Options, analyse

    return analyse(path, phase, Options(dialects=("postgresql", "mysql", "sqlite")))


def test_every_kind_of_change(workspace, backend):
    workspace.upgrade()
    workspace.models(V1)
    first = workspace.revision("initial")
    assert set(first) == {"expand"}, "an empty contract phase writes no file"
    workspace.upgrade()
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO nodes (id, name, extra) VALUES (1, 'n1', 'e1'), (2, 'n2', NULL)"))
        conn.execute(sa.text("INSERT INTO ports (id, node_id) VALUES (1, 1), (2, 99)"))

    workspace.models(V2)
    files = workspace.revision("every kind")
    assert set(files) == {"expand", "contract", "data"}
    expand, contract = files["expand"].read_text(), files["contract"].read_text()
    assert files["expand"].name.endswith("_every_kind.py") and files["contract"].name.endswith("_every_kind.py")

    e, c = module_of(files["expand"]), module_of(files["contract"])
    assert e["down_revision"] == module_of(first["expand"])["revision"]
    assert c["down_revision"] == "contract_root" and c["depends_on"] == e["revision"]
    assert set(c["requires_data_migrations"]) == {
        "nodes_must_not_null", "nodes_state_not_null", "nodes_meta_from_extra", "ports_fk_ports_node_id_nodes_orphans"}
    # (the move stubs of ports.old, ports.legacy and scratch are not required: the gate judges their data)

    upgrade_of = lambda text: text.split("def downgrade")[0]  # noqa: E731
    for needle in ("op.create_table('groups'", "op.create_index('ix_groups_node', 'groups'",
                   "op.add_column('nodes', sa.Column('meta'", "op.add_column('nodes', sa.Column('must', sa.Integer(), "
                   "nullable=True))", "server_default='x'", "postgresql_concurrently=True",
                   "with op.get_context().autocommit_block():", "postgresql_not_valid=True",
                   "SET foreign_key_checks = 0"):
        assert needle in upgrade_of(expand), needle
    for needle in ("drop_column", "drop_table", "drop_index", "alter_column"):
        assert needle not in upgrade_of(expand), needle
    for needle in ("VALIDATE CONSTRAINT", "sa.column('state').is_not(None), postgresql_not_valid=True",
                   "batch_op.drop_column('extra')", "batch_op.drop_column('old')", "nullable=False", "op.drop_table('scratch')", "op.drop_index(op.f('ix_ports_legacy')",
                   "batch_op.create_foreign_key('fk_ports_node_id_nodes'"):
        assert needle in upgrade_of(contract), needle
    for needle in ("create_table", "add_column", "op.create_index"):
        assert needle not in upgrade_of(contract), needle

    # the guess (extra -> meta) refuses to run until confirmed, and lint says so; confirmed, it is clean
    assert [h.code for h in lint(files["expand"], "expand")] == ["MP000"]
    assert confirm_guessed_renames(files["expand"]) == 1
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name

    workspace.upgrade("expand@head")
    workspace.use_data_migrations(files["data"])
    # a move stub fails closed: the dropped table is named, and nothing runs
    with pytest.raises(ConfigError, match="data migration 'scratch_moved': the rows of scratch"):
        workspace.run_data_migrations()
    # the developer lets the dropped columns and table go (they were never used)
    assert sorted(let_data_go(files, {"ports.old": "never used", "ports.legacy": "never used",
                                      "scratch": "a cache"})) == ["ports_legacy_moved", "ports_old_moved",
                                                                  "scratch_moved"]
    # an unfilled placeholder is named with its file and line, and nothing runs
    data = files["data"].read_text()
    placeholder = "FILL_IN_NODES_MUST_NOT_NULL = FILL_IN('the value for NULL rows of nodes.must')"
    line = data.splitlines().index(placeholder) + 1
    with pytest.raises(ConfigError, match=re.escape(f"{files['data']}:{line}: data migration "
                                                    "'nodes_must_not_null': the value for NULL rows")):
        workspace.run_data_migrations()
    # the developer fills in the backfill values, lists the module, runs the data migrations
    data = re.sub(r"FILL_IN_NODES_MUST_NOT_NULL = FILL_IN\(.*\)", "FILL_IN_NODES_MUST_NOT_NULL = 0", data)
    data = re.sub(r"FILL_IN_NODES_STATE_NOT_NULL = FILL_IN\(.*\)", "FILL_IN_NODES_STATE_NOT_NULL = 'enroll'", data)
    files["data"].write_text(data)
    sys.modules.pop(f"dm.{files['data'].stem}", None)
    assert workspace.run_data_migrations() == 0
    workspace.upgrade("heads")
    with sa.create_engine(workspace.url).connect() as conn:
        rows = conn.execute(sa.text("SELECT id, meta, state, must FROM nodes ORDER BY id")).all()
        assert rows == [(1, "e1", "enroll", 0), (2, None, "enroll", 0)]
        assert conn.execute(sa.text("SELECT node_id FROM ports ORDER BY id")).scalars().all() == [1, None]
        assert not sa.inspect(conn).has_table("scratch")
    result = workspace.alembic_cli("check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No new upgrade operations detected" in result.stdout


def test_type_change_and_rename(workspace, backend):
    workspace.models(V1)
    workspace.upgrade()
    workspace.revision("initial")
    workspace.upgrade()
    workspace.models(V1.replace('sa.Column("name", sa.String(64))', 'sa.Column("name", sa.String(255))')
                        .replace('sa.Column("extra", sa.Text)', 'sa.Column("meta", sa.Text)'))
    files = workspace.revision("resize name, extra to meta")
    expand, contract = files["expand"].read_text(), files["contract"].read_text()
    assert "op.add_column('nodes', sa.Column('name_new', sa.String(length=255), nullable=True))" in expand
    assert "FILL IN" in expand and "changes type" in expand
    assert "op.add_column('nodes', sa.Column('meta'" in expand
    assert "batch_op.drop_column('name')" in contract and "batch_op.drop_column('extra')" in contract
    # sync triggers for the type change and the guessed rename: installed in expand, dropped in
    # contract before the column, each script importing the module that registers the operations
    for old, new in (("name", "name_new"), ("extra", "meta")):
        # the INSERT rule recorded (the split's new columns have no server default): same online and offline
        assert f"op.create_sync_trigger('nodes', old={old!r}, new={new!r}, new_has_default=False)" in expand
        assert contract.index(f"op.drop_sync_trigger('nodes', old={old!r}, new={new!r})") < \
            contract.index(f"batch_op.drop_column({old!r})")
    assert "GUESSED: nodes.extra -> meta looks like a rename" in expand
    with pytest.raises(CommandError, match="GUESSED rename nodes.extra -> meta is not confirmed"):
        workspace.upgrade("expand@head")  # a guess runs only once someone confirms it
    assert confirm_guessed_renames(files["expand"]) == 1
    assert "import migrations_policy.window.sync_triggers" in expand and "import migrations_policy.window.sync_triggers" in contract
    assert set(module_of(files["contract"])["requires_data_migrations"]) == {
        "nodes_name_new_from_name", "nodes_meta_from_extra"}
    data = files["data"].read_text()
    assert "values={'name_new': nodes.c['name']}" in data and "GUESSED" in data
    for path, phase in ((files["expand"], "expand"), (files["contract"], "contract")):
        assert lint(path, phase) == [], path.name
    with sa.create_engine(workspace.url).begin() as conn:
        conn.execute(sa.text("INSERT INTO nodes (id, name) VALUES (1, 'before')"))
    workspace.upgrade("expand@head")
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:  # release N writes name/extra only; release N+1 name_new/meta only
        conn.execute(sa.text("INSERT INTO nodes (id, name, extra) VALUES (2, 'from N', 'eN')"))
        conn.execute(sa.text("INSERT INTO nodes (id, name_new, meta) VALUES (3, 'from N+1', 'eN+1')"))
        conn.execute(sa.text("UPDATE nodes SET name = 'Before' WHERE id = 1"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT id, name, name_new, extra, meta FROM nodes ORDER BY id")).all() == [
            (1, "Before", "Before", None, None), (2, "from N", "from N", "eN", "eN"),
            (3, "from N+1", "from N+1", "eN+1", "eN+1")]
        assert len(sync_triggers(conn)) > 0
    workspace.use_data_migrations(files["data"])
    assert workspace.run_data_migrations() == 0
    workspace.upgrade("heads")
    with engine.connect() as conn:
        assert sync_triggers(conn) == [] and stale_sync_triggers(conn) == []
        assert conn.execute(sa.text("SELECT id, name_new, meta FROM nodes ORDER BY id")).all() == [
            (1, "Before", None), (2, "from N", "eN"), (3, "from N+1", "eN+1")]
    engine.dispose()


def test_no_changes_writes_nothing(workspace, backend):
    workspace.upgrade()
    assert workspace.revision("nothing") == {}


def test_check_still_works(workspace, backend):
    """``alembic check`` runs process_revision_directives too: the split must leave it alone."""
    workspace.upgrade()
    workspace.models(V1)
    result = workspace.alembic_cli("check")
    assert result.returncode != 0 and "add_table" in result.stderr + result.stdout
    workspace.revision("initial")
    workspace.upgrade()
    workspace.models(V1.replace("sa.Column(\"old\", sa.String(5)),", ""))  # a contract-only change
    result = workspace.alembic_cli("check")
    assert result.returncode != 0 and "remove_column" in result.stderr + result.stdout


def test_contract_only_change_depends_on_expand_head(workspace, backend):
    workspace.models(V1)
    workspace.upgrade()
    expand_rev = module_of(workspace.revision("initial")["expand"])["revision"]
    workspace.upgrade()
    workspace.models(V1.replace('sa.Column("old", sa.String(5)),', ""))
    files = workspace.revision("drop old")
    assert set(files) == {"contract", "data"}  # the dropped column's fail-closed move stub
    assert module_of(files["contract"])["depends_on"] == expand_rev
    assert "requires_data_migrations" not in files["contract"].read_text()  # the gate judges the data itself
    assert "ports_old_moved" in files["data"].read_text()
