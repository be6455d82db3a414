"""sync_keeper on every backend: what a contract may do to sync triggers, what it may not lose,
and that the gate's offline pass and the live run say the same thing.

The inventory example is expanded to release 2 (sync triggers on ``nodes``:
``extra -> meta`` and ``name -> display_name``) and its data migrations run.
"""

from __future__ import annotations

import json
import random

import sqlalchemy as sa

from migrations_policy.window.sync_triggers import sync_triggers, trigger_definitions

from .attacks import EXPAND_HEAD
from .attacks import expanded_app as _expanded_app
from .test_sync_trigger_attacks import release_n_writes

HEADER = ('"""{doc}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nimport migrations_policy.window.sync_triggers\n\n'
          "revision = {rev!r}\ndown_revision = {down!r}\nbranch_labels = None\ndepends_on = {depends!r}\n\n\n"
          "def upgrade() -> None:\n{body}\n\n\ndef downgrade() -> None:\n    pass\n")


def _write(app, directory: str, rev: str, down: str, body: list[str], depends=None, replace_contract=True):
    versions = app.ini.parent / "migrations" / "versions"
    if replace_contract:
        (versions / "contract" / "0003_r3_drop_extra_name.py").unlink()
    path = versions / directory / f"0003_{rev}.py"
    path.write_text(HEADER.format(doc=rev, rev=rev, down=down, depends=depends,
                                  body="\n".join("    " + line for line in body)))
    return path


def _definitions(app) -> dict:
    with app.engine.connect() as conn:
        return trigger_definitions(conn, sync_triggers(conn))


def _pairs(app) -> set:
    with app.engine.connect() as conn:
        return {(t.table, t.old, t.new) for t in sync_triggers(conn)}


def test_a_contract_rebuilding_the_table_keeps_a_later_pair(tmp_path, db_url, capsys):
    """Release 3's contract retires extra/meta (drops its triggers, then extra, in a batch: on SQLite a
    table rebuild) while name/display_name's window is still open: that pair comes back exactly."""
    app = _expanded_app(tmp_path, db_url)
    try:
        _write(app, "contract", "r3_retire_extra", "contract_root", [
            'op.drop_sync_trigger("nodes", old="extra", new="meta")',
            'with op.batch_alter_table("nodes") as batch:',
            '    batch.alter_column("provision_state", type_=sa.String(32), existing_type=sa.String(15),'
            ' existing_nullable=False, existing_server_default="enroll")',
            '    batch.drop_column("extra")'], depends=EXPAND_HEAD)
        assert app.dbsync("online_data_migrations") == 0
        kept = {name: text for name, text in _definitions(app).items() if "name_display_name" in name}
        capsys.readouterr()
        assert app.dbsync("upgrade") == 0, capsys.readouterr().err
        assert "r3_retire_extra" in app.heads() and "extra" not in app.columns("nodes")
        assert _pairs(app) == {("nodes", "name", "display_name")}
        assert _definitions(app) == kept  # the catalog's own text, back exactly
        nodes = sa.table("nodes", sa.column("id"), sa.column("name"), sa.column("display_name"))
        rng = random.Random(7)
        with app.engine.begin() as conn:
            for key in rng.sample(range(1, 200), 5):
                conn.execute(sa.update(nodes).where(nodes.c.id == key).values(name=f"late{key}"))
        with app.engine.connect() as conn:
            late = conn.execute(sa.select(nodes.c.name, nodes.c.display_name)
                                .where(nodes.c.name.like("late%"))).all()
        assert len(late) == 5 and all(name == display for name, display in late)
    finally:
        app.engine.dispose()


def test_a_contract_may_rebuild_the_table_once_it_dropped_its_sync_triggers(tmp_path, db_url, capsys):
    """Both pairs' triggers dropped first, then the table re-created (``recreate="always"``): nothing
    is left to lose, so neither the gate (before any DDL) nor the run refuses it, on MariaDB either."""
    app = _expanded_app(tmp_path, db_url)
    try:
        _write(app, "contract", "r3_rebuild_after_release", "contract_root", [
            'op.drop_sync_trigger("nodes", old="extra", new="meta")',
            'op.drop_sync_trigger("nodes", old="name", new="display_name")',
            *(['op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")']
              if app.engine.dialect.name != "sqlite" else []),
            'with op.batch_alter_table("nodes", recreate="always") as batch:',
            '    batch.drop_column("extra")',
        ], depends=EXPAND_HEAD)
        assert app.dbsync("online_data_migrations") == 0
        capsys.readouterr()
        assert app.dbsync("upgrade") == 0, capsys.readouterr().err
        assert "r3_rebuild_after_release" in app.heads() and "extra" not in app.columns("nodes")
        assert _pairs(app) == set()
    finally:
        app.engine.dispose()


def test_a_contract_may_drop_a_pair_and_keep_the_old_column(tmp_path, db_url, capsys):
    """Release N is gone when a contract runs: op.drop_sync_trigger there is allowed even while
    both columns stay (the old one for a later contract), and the run does not put it back."""
    app = _expanded_app(tmp_path, db_url)
    try:
        _write(app, "contract", "r3_release_pair", "contract_root",
               ['op.drop_sync_trigger("nodes", old="name", new="display_name")'], depends=EXPAND_HEAD)
        assert app.dbsync("online_data_migrations") == 0
        capsys.readouterr()
        assert app.dbsync("upgrade") == 0, capsys.readouterr().err
        assert _pairs(app) == {("nodes", "extra", "meta")} and {"name", "display_name"} <= app.columns("nodes")
        capsys.readouterr()
        assert app.dbsync("--format", "json", "status") == 0
        left = json.loads(capsys.readouterr().out)["sync_triggers_left"]
        assert [line.split()[2] for line in left] == ["mp_sync_nodes_extra_meta_6047d7ef"]  # no later contract
    finally:
        app.engine.dispose()


def test_gate_and_run_refuse_the_same_explicit_drop(tmp_path, db_url, capsys):
    """An expand's op.drop_sync_trigger: status and check show the line the upgrade refuses with,
    before any DDL; the same drop sent through exec_driver_sql (invisible offline) is refused by the
    run with the same line, the triggers intact."""
    app = _expanded_app(tmp_path, db_url)
    try:
        path = _write(app, "expand", "r3_expand_drop", EXPAND_HEAD,
                      ['op.add_column("nodes", sa.Column("note", sa.Text()))',
                       'op.drop_sync_trigger("nodes", old="name", new="display_name")'])
        assert app.dbsync("online_data_migrations") == 0
        before, columns = _definitions(app), app.columns("nodes")
        capsys.readouterr()
        assert app.dbsync("--format", "json", "status") == 0
        defects = json.loads(capsys.readouterr().out)["gate"]["defects"]
        (line,) = [d for d in defects if "r3_expand_drop" in d]
        assert line.startswith(f"{path}: revision r3_expand_drop (expand) drops sync trigger mp_sync_nodes_name_")
        assert "op.drop_sync_trigger('nodes', old='name', new='display_name') there" in line
        assert app.dbsync("check") == 2  # a revision that cannot be applied as it stands
        capsys.readouterr()
        assert app.dbsync("upgrade", "--expand") == 4
        assert line in capsys.readouterr().err
        assert (_definitions(app), app.columns("nodes")) == (before, columns)  # nothing half-applied

        dialect = app.engine.dialect.name
        trigger = random.Random(5).choice([name for name in sorted(before) if "name_display_name" in name])
        drop = f"DROP TRIGGER {trigger}" + (" ON nodes" if dialect == "postgresql" else "")
        path.write_text(path.read_text().replace(
            'op.drop_sync_trigger("nodes", old="name", new="display_name")',
            f'op.get_bind().exec_driver_sql({drop!r})'))
        capsys.readouterr()
        assert app.dbsync("upgrade", "--expand") == 4
        err = capsys.readouterr().err
        assert line.replace("(op.drop_sync_trigger)", "(DROP TRIGGER/FUNCTION)").split(" drops sync trigger ")[0] \
            in err and f"drops sync trigger {trigger} on nodes (DROP TRIGGER/FUNCTION)" in err
        assert "r3_expand_drop" not in app.heads() and _definitions(app) == before
        assert not release_n_writes(app, random.Random(3))
    finally:
        app.engine.dispose()
