"""``op.require_data_migrations(...)`` in a contract script: gated with the env.py hook,
and still refused (before the revision's DDL) under a stock env.py without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from migrations_policy.gate.verdict import NotWired

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
    text = text.replace("import sqlalchemy as sa\n", "import sqlalchemy as sa\n\nimport migrations_policy.gate.operations  # noqa: F401\n")
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
    # No longer declared, but the revision drops nodes.name, which it reads (drop_guard):
    assert "nodes_name_to_display_name" in err and "which drops nodes.name that it reads" in err
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


def _unwire(app) -> Path:
    env_py = app.ini.parent / "migrations" / "env.py"
    text = env_py.read_text()
    env_py.write_text(text.replace(",\n                      **policy.configure_options(context))", ")"))
    assert "**policy.configure_options" not in env_py.read_text()
    return env_py


def test_dbsync_refuses_an_unwired_env_py_with_exit_4(expanded, capsys):
    env_py = _unwire(expanded)
    heads = expanded.heads()
    for args in (("upgrade", "--contract"), ("upgrade",), ("upgrade", "--expand"), ("stamp", "heads")):
        capsys.readouterr()
        assert expanded.dbsync(*args) == 4, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(env_py) in err and "configure_options" in err, err
        assert expanded.heads() == heads
        assert {"extra", "name"} <= expanded.columns("nodes")


def test_dbsync_refuses_an_env_py_that_runs_no_migrations(app, capsys):
    env_py = app.ini.parent / "migrations" / "env.py"
    env_py.write_text("from alembic import context  # configures nothing, runs nothing\n")
    capsys.readouterr()
    assert app.dbsync("upgrade") == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(env_py) in err and "run_migrations" in err
    assert app.heads() == ["r1_inventory"]


def test_check_and_status_name_a_mis_parented_contract_revision(expanded, capsys):
    """A contract file parented on the expand head sits on the expand branch: refused, and said."""
    path = expanded.ini.parent / CONTRACT_SCRIPT
    text = path.read_text().replace('down_revision = "contract_root"', 'down_revision = "r2_meta_display_name_version"')
    path.write_text(text.replace('depends_on = "r2_meta_display_name_version"', "depends_on = None"))
    assert expanded.dbsync("online_data_migrations") == 0  # data complete: the phase conflict alone refuses
    capsys.readouterr()
    assert expanded.dbsync("check") == 2
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "cannot be applied as it stands" in out and str(path) in out and "expand branch" in out, out
    assert expanded.dbsync("upgrade", "--expand") == 4
    assert {"extra", "name"} <= expanded.columns("nodes")
    assert expanded.dbsync("status") == 0
    assert "cannot be applied as they stand" in capsys.readouterr().out


@pytest.mark.parametrize("forgotten", ["extra", "name", "both"])
def test_a_contract_that_drops_a_column_under_a_live_sync_trigger_is_refused(expanded, capsys, forgotten):
    """Without op.drop_sync_trigger first, the drop would leave a trigger that fails every later write
    (MariaDB, SQLite): refused before any DDL, naming the file, the column and the trigger."""
    path = expanded.ini.parent / CONTRACT_SCRIPT
    text = path.read_text()
    lines = {"extra": '    op.drop_sync_trigger("nodes", old="extra", new="meta")  # before the columns they use go\n',
             "name": '    op.drop_sync_trigger("nodes", old="name", new="display_name")\n'}
    for column in (("extra", "name") if forgotten == "both" else (forgotten,)):
        assert lines[column] in text
        text = text.replace(lines[column], "")
    path.write_text(text)
    assert expanded.dbsync("online_data_migrations") == 0
    capsys.readouterr()
    assert expanded.dbsync("upgrade", "--contract") == 4
    err = capsys.readouterr().err
    assert str(path) in err and "op.drop_sync_trigger" in err
    for column in (("extra", "name") if forgotten == "both" else (forgotten,)):
        assert f"drops nodes.{column} while sync trigger" in err
    assert {"extra", "name"} <= expanded.columns("nodes")
    assert expanded.dbsync("upgrade", "--contract", "--force", "--reason", "x") == 4  # a defect, not forceable
    with expanded.engine.begin() as conn:  # writes still work
        conn.execute(sa.text("UPDATE nodes SET extra = 'x' WHERE id = 1"))
