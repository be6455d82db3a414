"""``op.require_data_migrations(...)`` in a contract script: gated with the env.py hook,
and still refused (before the revision's DDL) under a stock env.py without it."""

from __future__ import annotations

import pytest

from migrations_policy.gate import GateRefused

CONTRACT_SCRIPT = "migrations/versions/contract/0003_r3_drop_extra_name.py"

STOCK_ENV = '''
from alembic import context
from sqlalchemy import engine_from_config, pool

config = context.config
engine = engine_from_config(config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.",
                            poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
'''


def _use_directive_instead_of_attribute(app) -> None:
    path = app.ini.parent / CONTRACT_SCRIPT
    text = path.read_text()
    text = text.replace(
        'requires_data_migrations = ("nodes_extra_to_meta", "nodes_name_to_display_name", "port_node_orphans")\n', "")
    text = text.replace("import sqlalchemy as sa\n", "import sqlalchemy as sa\n\nimport migrations_policy.operations  # noqa: F401\n")
    text = text.replace("def upgrade() -> None:\n", "def upgrade() -> None:\n"
                        '    op.require_data_migrations("nodes_extra_to_meta", "port_node_orphans")\n')
    assert "op.require_data_migrations" in text and "requires_data_migrations =" not in text
    path.write_text(text)


def test_directive_is_read_by_the_gate_before_any_ddl(expanded, capsys):
    _use_directive_instead_of_attribute(expanded)
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    err = capsys.readouterr().err
    assert "nodes_extra_to_meta" in err and "port_node_orphans" in err
    assert "nodes_name_to_display_name" not in err  # no longer required
    assert {"extra", "name"} <= expanded.columns("nodes")


def test_directive_refuses_under_a_stock_env_py(expanded):
    from ..helpers import set_ini_option

    _use_directive_instead_of_attribute(expanded)
    (expanded.ini.parent / "migrations" / "env.py").write_text(STOCK_ENV)
    set_ini_option(expanded.ini, "alembic", "sqlalchemy.url", expanded.url_text.replace("%", "%%"))
    with pytest.raises(GateRefused, match="port_node_orphans"):
        expanded.alembic_upgrade("contract@head")
    assert {"extra", "name"} <= expanded.columns("nodes")
    assert "r3_drop_extra_name" not in expanded.heads()

    assert expanded.dbsync("online_data_migrations") == 0
    expanded.alembic_upgrade("contract@head")
    assert "extra" not in expanded.columns("nodes")
