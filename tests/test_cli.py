"""The shells: real help, one-line errors with documented exit codes, masked passwords."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from migrations_policy import cli

from .helpers import console_script, copy_example, forget_example_modules


@pytest.mark.parametrize("script", ["migrations-policy", "dbsync"])
def test_console_scripts_print_help(script):
    proc = subprocess.run([console_script(script), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: {script}")


def test_dbsync_help_lists_operator_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.dbsync_main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("upgrade", "status", "version", "stamp"):
        assert name in out


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_missing_config_is_one_line_exit_2(tmp_path, capsys):
    code = cli.dbsync_main(["-c", str(tmp_path / "nope.ini"), "status"])
    assert code == 2
    line = _one_line_error(capsys)
    assert line.startswith("dbsync: error: ") and "nope.ini" in line


def test_unknown_command_is_one_line_exit_2(capsys):
    assert cli.dbsync_main(["frobnicate"]) == 2
    assert "frobnicate" in _one_line_error(capsys)


def test_missing_command_is_exit_2(capsys):
    assert cli.dbsync_main([]) == 2
    assert "command is required" in _one_line_error(capsys)


def test_unreachable_database_masks_password(tmp_path, capsys):
    ini = copy_example(tmp_path)
    url = "postgresql+psycopg://admin:s3cr3t-pw@127.0.0.1:1/inventory"
    code = cli.dbsync_main(["-c", str(ini), "--url", url, "status"])
    assert code == 2
    line = _one_line_error(capsys)
    assert "s3cr3t-pw" not in line
    assert "admin:***@127.0.0.1:1" in line


def test_bad_url_is_one_line(tmp_path, capsys):
    ini = copy_example(tmp_path)
    assert cli.dbsync_main(["-c", str(ini), "--url", "not a url://x:pw@", "version"]) == 2
    line = _one_line_error(capsys)
    assert "invalid database URL" in line and "pw@" not in line


def test_status_json_on_fresh_database(tmp_path, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "--format", "json", "status"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["expand"]["current"] == []
    assert data["expand"]["head"] == "r2_meta_display_name_version"
    assert data["expand"]["pending"] == ["expand_root", "r1_inventory", "r2_meta_display_name_version"]


def test_embedding_in_a_project_cli(tmp_path, capsys):
    """A project's own argparse tree mounts the dbsync commands."""
    import argparse

    ini = copy_example(tmp_path)
    forget_example_modules()
    parser = argparse.ArgumentParser(prog="inventory-manage")
    sub = parser.add_subparsers(dest="command")
    cli.add_dbsync_commands(sub, default_config=str(ini))
    args = parser.parse_args(["upgrade", "--expand", "--url", f"sqlite:///{tmp_path / 'e.db'}"])
    assert cli.run_parsed(args, prog="inventory-manage") == 0
    assert "r2_meta_display_name_version" in capsys.readouterr().out


def test_dbsync_main_with_custom_prog(tmp_path, capsys):
    assert cli.dbsync_main(["-c", str(tmp_path / "x.ini"), "version"], prog="inventory-dbsync") == 2
    assert _one_line_error(capsys).startswith("inventory-dbsync: error: ")


def test_python_dash_m_entry():
    proc = subprocess.run([sys.executable, "-m", "migrations_policy.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "migrations-policy" in proc.stdout


def test_import_alembic_loads_only_the_light_plugin_modules(tmp_path):
    """Our alembic plugins run on every ``import alembic``: no linter, policy or sqlparse then."""
    code = ("import sys, alembic; from alembic.script import write_hooks; from alembic.ddl.impl import DefaultImpl; "
            "print('migrations_policy.lint' in write_hooks._registry, "
            "hasattr(DefaultImpl.start_migrations, '_migrations_policy_failsafe')); "
            "print(sorted(m for m in sys.modules if m.startswith(('migrations_policy', 'sqlparse'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    registered, modules = proc.stdout.strip().splitlines()
    assert registered == "True True"  # the lint hook, and the gate's failsafe (failsafe.py)
    # the three plugin modules and their folders' __init__ (docstrings and lazy names, nothing else),
    # and core.lazy, the one __getattr__ those lazy names share (it imports only importlib and typing)
    assert modules == str(["migrations_policy", "migrations_policy.authoring", "migrations_policy.authoring.plugin",
                           "migrations_policy.core", "migrations_policy.core.lazy",
                           "migrations_policy.gate", "migrations_policy.gate.failsafe", "migrations_policy.lint",
                           "migrations_policy.lint.alembic_plugin"])


def test_warm_lint_through_the_cli_never_imports_alembic(tmp_path):
    """The CI gate's common case (nothing changed) stays cheap: no alembic, no SQLAlchemy."""
    from .helpers import EXAMPLE

    code = ("import sys; from migrations_policy.cli import main; code = main(['lint', sys.argv[1]]); "
            "print(code, 'alembic' in sys.modules, 'sqlalchemy' in sys.modules)")
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": str(tmp_path / "cache")}
    versions = str(EXAMPLE / "migrations" / "versions")
    runs = [subprocess.run([sys.executable, "-c", code, versions], capture_output=True, text=True, env=env,
                           cwd=tmp_path) for _ in range(2)]
    cold, warm = (run.stdout.strip().splitlines()[-1] for run in runs)
    assert cold == "0 False False"  # the scripts ran in lint's worker processes, not here
    assert warm == "0 False False"  # the content cache answered


@pytest.mark.parametrize("raised", [ValueError("cleanup failed"), "policy", "database"])
def test_an_error_raised_while_handling_an_interrupt_is_the_interrupt(capsys, raised):
    """Ctrl-C whose handling raised another error (a cleanup step on the connection the interrupt
    invalidated, a script converting it) exits 130 with one line, as the interrupt: never as a
    failed migration (8), a usage error (2) or a traceback."""
    import argparse

    import sqlalchemy as sa

    from migrations_policy.cli.base import CommandSpec
    from migrations_policy.cli.shell import run_parsed
    from migrations_policy.core.errors import MigrationFailed

    def run(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            if raised == "policy":  # what commands/alembic_run makes of it
                raise MigrationFailed("migration failed: revision r2: cleanup failed") from None
            if raised == "database":
                raise sa.exc.PendingRollbackError("Can't reconnect until invalid transaction is rolled back",
                                                  None, None)
            raise raised

    args = argparse.Namespace(_mp_command=CommandSpec("stop", "help", lambda parser: None, run))
    assert run_parsed(args) == 130
    assert capsys.readouterr().err == "dbsync: interrupted\n"
