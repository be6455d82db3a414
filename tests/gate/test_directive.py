"""``op.require_data_migrations(...)`` in a contract script: gated with the env.py hook,
and still refused (before the revision's DDL) under a stock env.py without it."""

from __future__ import annotations

import pytest

from migrations_policy.gate import NotWired

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


def test_a_stock_env_py_is_refused_before_any_ddl(expanded):
    """An env.py without the hook fails closed: plain alembic refuses the run (naming env.py),
    also once the data migrations are complete, and applies nothing."""
    from ..helpers import set_ini_option

    _use_directive_instead_of_attribute(expanded)
    env_py = expanded.ini.parent / "migrations" / "env.py"
    env_py.write_text(STOCK_ENV)
    set_ini_option(expanded.ini, "alembic", "sqlalchemy.url", expanded.url_text.replace("%", "%%"))
    heads = expanded.heads()
    with pytest.raises(NotWired, match="env.py does not pass migrations_policy's configure_options") as caught:
        expanded.alembic_upgrade("contract@head")
    assert str(env_py) in str(caught.value) and "\n" not in str(caught.value)
    assert {"extra", "name"} <= expanded.columns("nodes")
    assert expanded.heads() == heads

    assert expanded.dbsync("online_data_migrations") == 0
    with pytest.raises(NotWired):
        expanded.alembic_upgrade("contract@head")
    assert {"extra", "name"} <= expanded.columns("nodes")
    assert expanded.heads() == heads
