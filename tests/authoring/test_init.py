"""``migrations-policy init`` / ``init --adopt`` and stock alembic commands on the result."""

from __future__ import annotations

import subprocess
import sys
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from alembic.config import Config

from migrations_policy import cli


def run(args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def alembic(cwd, *args) -> subprocess.CompletedProcess:
    return run(["-m", "alembic", *args], cwd)


def test_init_then_stock_alembic_commands(tmp_path):
    result = run(["-m", "migrations_policy.cli", "init", "migrations"], tmp_path)
    assert result.returncode == 0, result.stderr
    for path in ("alembic.ini", "migrations/env.py", "migrations/script.py.mako", "migrations/README",
                 "migrations/versions/expand/0000_expand_root.py",
                 "migrations/versions/contract/0000_contract_root.py"):
        assert (tmp_path / path).is_file(), path
        assert f"created {path}" in result.stdout
    ini = tmp_path / "alembic.ini"
    ini.write_text(ini.read_text().replace("driver://user:pass@localhost/dbname", f"sqlite:///{tmp_path}/t.db"))

    script = ScriptDirectory.from_config(Config(str(ini)))
    expand, contract = script.get_revision("expand_root"), script.get_revision("contract_root")
    assert expand.branch_labels == {"expand"} and contract.branch_labels == {"contract"}
    assert contract.dependencies == "expand_root" and expand.down_revision is None

    heads = alembic(tmp_path, "heads")
    assert heads.returncode == 0
    assert "expand_root (expand)" in heads.stdout and "contract_root (contract)" in heads.stdout
    assert "contract branch root" in alembic(tmp_path, "history").stdout
    assert alembic(tmp_path, "upgrade", "expand@head").returncode == 0
    assert alembic(tmp_path, "current").stdout.split()[0] == "expand_root"
    assert alembic(tmp_path, "upgrade", "heads").returncode == 0
    engine = sa.create_engine(f"sqlite:///{tmp_path}/t.db")
    assert "migrations_policy_data_migrations" in sa.inspect(engine).get_table_names()  # the ledger
    engine.dispose()
    # with no models (target_metadata None in the template) there is nothing to autogenerate
    assert alembic(tmp_path, "check").returncode != 0  # "Can't proceed with --autogenerate" without models


def test_init_refuses_a_non_empty_directory_in_one_line(tmp_path, capsys):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "x").write_text("")
    assert cli.main(["init", str(tmp_path / "migrations"), "-c", str(tmp_path / "alembic.ini")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists and is not empty" in err
    assert cli.main(["init", str(tmp_path / "m2"), "--template", "nope"]) == 2
    assert "unknown template 'nope' (available: expand_contract)" in capsys.readouterr().err


SINGLE_BRANCH = '''
revision = {rev!r}
down_revision = {down!r}
branch_labels = None
depends_on = None

from alembic import op
import sqlalchemy as sa


def upgrade():
    op.create_table({table!r}, sa.Column("id", sa.Integer, primary_key=True))


def downgrade():
    op.drop_table({table!r})
'''


def test_adopt_starts_both_branches_at_the_current_head(tmp_path, capsys):
    assert alembic(tmp_path, "init", "migrations").returncode == 0  # a plain, single-branch project
    ini = tmp_path / "alembic.ini"
    ini.write_text(ini.read_text().replace("driver://user:pass@localhost/dbname", f"sqlite:///{tmp_path}/t.db"))
    versions = tmp_path / "migrations" / "versions"
    (versions / "a1_first.py").write_text(SINGLE_BRANCH.format(rev="a1", down=None, table="one"))
    (versions / "a2_second.py").write_text(SINGLE_BRANCH.format(rev="a2", down="a1", table="two"))
    assert alembic(tmp_path, "upgrade", "head").returncode == 0

    assert cli.main(["init", "--adopt", "-c", str(ini)]) == 0
    out = capsys.readouterr().out
    assert "both branches start at a2" in out and "configure_options" in out  # env.py still needs editing
    script = ScriptDirectory.from_config(Config(str(ini)))
    assert script.get_revision("expand_root").down_revision == "a2"
    assert script.get_revision("contract_root").down_revision == "a2"
    assert script.get_revision("contract_root").dependencies == "expand_root"
    assert sorted(script.get_heads()) == ["contract_root", "expand_root"]

    assert alembic(tmp_path, "upgrade", "expand@head").returncode == 0
    assert alembic(tmp_path, "upgrade", "heads").returncode == 0
    current = alembic(tmp_path, "current").stdout
    assert "contract_root" in current and "expand_root" in current
    assert cli.main(["init", "--adopt", "-c", str(ini)]) == 2
    assert "already has expand/contract branch labels" in capsys.readouterr().err


def test_adopt_refuses_several_heads(tmp_path, capsys):
    assert alembic(tmp_path, "init", "migrations").returncode == 0
    versions = tmp_path / "migrations" / "versions"
    (versions / "a1.py").write_text(SINGLE_BRANCH.format(rev="a1", down=None, table="one"))
    (versions / "b1.py").write_text(SINGLE_BRANCH.format(rev="b1", down=None, table="two"))
    assert cli.main(["init", "--adopt", "-c", str(tmp_path / "alembic.ini")]) == 2
    assert "has 2 heads" in capsys.readouterr().err


def test_plugin_is_registered_through_the_entry_point(tmp_path):
    code = ("import alembic.runtime.plugins as p; from importlib.metadata import entry_points; "
            "print([e.value for e in entry_points(group='alembic.plugins')]); "
            "print('migrations_policy.object_versions' in p._all_plugins)")
    result = run(["-c", code], tmp_path)
    assert "migrations_policy.authoring.plugin" in result.stdout and "True" in result.stdout
    # cheap: importing alembic imports the plugin module only, not the split, renderers or mixin
    code = "import sys, alembic; print(sorted(m for m in sys.modules if m.startswith('migrations_policy.auth')))"
    result = run(["-c", code], tmp_path)
    assert result.stdout.strip() == "['migrations_policy.authoring', 'migrations_policy.authoring.plugin']"


def test_adopt_and_dbsync_with_alembics_pyproject_template(tmp_path):
    """alembic's ``pyproject`` template: script_location etc. in pyproject.toml's [tool.alembic], the
    URL in a small alembic.ini.  init --adopt writes version_locations into [tool.alembic]; dbsync
    reads both files, from the project's directory (default -c) and from elsewhere."""
    assert alembic(tmp_path, "init", "-t", "pyproject", "migrations").returncode == 0
    ini = tmp_path / "alembic.ini"
    ini.write_text(ini.read_text().replace("driver://user:pass@localhost/dbname", f"sqlite:///{tmp_path}/t.db"))
    assert alembic(tmp_path, "revision", "-m", "first", "--rev-id", "first").returncode == 0
    adopted = run(["-m", "migrations_policy.cli", "init", "--adopt"], tmp_path)
    assert adopted.returncode == 0, adopted.stderr
    assert "version_locations = [" in (tmp_path / "pyproject.toml").read_text()
    env_py = tmp_path / "migrations" / "env.py"  # what adopt's note says to do: wire the gate in
    env_py.write_text(env_py.read_text()
                      .replace("from alembic import context\n",
                               "from alembic import context\nfrom migrations_policy import environment as policy\n")
                      .replace("context.configure(\n", "context.configure(\n        **policy.configure_options(context),\n"))
    upgraded = run(["-c", "from migrations_policy.cli import dbsync_main; raise SystemExit(dbsync_main())",
                    "upgrade"], tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    for config in (str(ini), str(tmp_path / "pyproject.toml")):
        status = run(["-c", "from migrations_policy.cli import dbsync_main; raise SystemExit(dbsync_main())",
                      "-c", config, "--url", f"sqlite:///{tmp_path}/t.db", "status"], tmp_path.parent)
        assert status.returncode == 0, status.stderr
        assert "expand: current expand_root, head expand_root, 0 pending" in status.stdout, status.stdout
    heads = alembic(tmp_path, "heads")
    assert "expand_root (expand)" in heads.stdout and "contract_root (contract)" in heads.stdout, heads.stdout
