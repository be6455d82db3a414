"""Round trip on every backend: the example's alembic history up, down, and up again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy import commands



def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _columns(engine, table) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns(table)}


def test_upgrade_downgrade_roundtrip(example_project, db_engine, backend):
    result = commands.upgrade(example_project, phases=("expand",))
    assert result.after == ["r2_meta_display_name_version"]
    assert {"nodes", "ports", "alembic_version"} <= _tables(db_engine)
    assert {"meta", "display_name", "version", "extra", "name"} <= _columns(db_engine, "nodes")

    status = commands.status(example_project)
    assert status.state.branches["expand"].pending == []
    assert status.state.branches["contract"].pending == ["contract_root", "r3_drop_extra_name"]

    commands.upgrade(example_project, phases=("contract",))
    assert "extra" not in _columns(db_engine, "nodes")
    assert "name" not in _columns(db_engine, "nodes")
    assert commands.version(example_project).heads == ["r3_drop_extra_name"]
    status = commands.status(example_project)
    assert status.state.branches["expand"].current == ["r2_meta_display_name_version"]
    assert status.state.branches["contract"].pending == []

    # across a completed contract a downgrade is refused unless forced with a reason (recorded)
    with pytest.raises(Exception, match="downgrade refused: contract revision"):
        alembic_command.downgrade(example_project.alembic_config, "base")
    example_project.alembic_config.cmd_opts = type("Opts", (), {"x": ["migrations_policy_force=roundtrip"]})()
    alembic_command.downgrade(example_project.alembic_config, "base")
    example_project.alembic_config.cmd_opts = None
    # the statement journal (PostgreSQL, MariaDB) stays, empty, like the phase records; the revision
    # history keeps every step (dbsync rollback reads it), the downgrades included; the releases and
    # the override of the forced downgrade stay too (the ledger went with expand_root)
    framework = {"alembic_version", "migrations_policy_revisions", "migrations_policy_statements",
                 "migrations_policy_revision_history", "migrations_policy_releases",
                 "migrations_policy_gate_overrides",
                 # the completion marks and proofs status created (data/remaining/completion.py), like the journal
                 "migrations_policy_data_dirty", "migrations_policy_data_proofs"}
    assert _tables(db_engine) - framework == set()
    with db_engine.connect() as conn:
        actions = [r.action for r in conn.execute(sa.text(
            "SELECT action FROM migrations_policy_revision_history ORDER BY id"))]
    assert actions.count("downgrade") == actions.count("upgrade") > 0
    assert commands.version(example_project).heads == []
    with db_engine.connect() as conn:
        assert ("downgrade", "roundtrip") in [tuple(r) for r in conn.execute(sa.text(
            "SELECT command, reason FROM migrations_policy_gate_overrides"))]

    again = commands.upgrade(example_project)
    assert again.after == ["r3_drop_extra_name"]
    assert {"nodes", "ports"} <= _tables(db_engine)


def test_foreign_key_added_per_dialect(example_project, db_engine, backend):
    commands.upgrade(example_project, phases=("expand",))
    fks = sa.inspect(db_engine).get_foreign_keys("ports")
    if backend == "sqlite":
        assert fks == []  # SQLite cannot add a constraint without rebuilding the table
    else:
        assert [(fk["name"], fk["referred_table"]) for fk in fks] == [("fk_ports_node_id_nodes", "nodes")]
    if backend == "postgresql":
        with db_engine.connect() as conn:
            validated = conn.execute(
                sa.text("SELECT convalidated FROM pg_constraint WHERE conname = :name"),
                {"name": "fk_ports_node_id_nodes"},
            ).scalar_one()
        assert validated is False  # added NOT VALID: no scan, no long lock
