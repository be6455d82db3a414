"""Custom operations registered by a project (``Operations.register_operation``), and the memory limit per script.

A registered operation's implementation runs offline and what it does is checked at
the script's line; an operation the linter does not know is ``MP005`` naming it,
and the rest of the script is still linted.  Registrations are found through
``env.py``'s imports (never running ``env.py``) or named in ``lint_plugins``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from migrations_policy.core.config import Settings
from migrations_policy.core.errors import ConfigError
from migrations_policy.lint import run

from .conftest import script

OPS_MODULE = '''
from alembic.operations import MigrateOperation, Operations
from alembic.operations import ops as alembic_ops


@Operations.register_operation("{name}")
class CustomOp(MigrateOperation):
    def __init__(self, table):
        self.table = table

    @classmethod
    def {name}(cls, operations, table):
        return operations.invoke(cls(table))


@Operations.implementation_for(CustomOp)
def _implementation(operations, operation):
    operations.{inner}


@Operations.register_operation("{name}_unimplemented")
class Unimplemented(MigrateOperation):
    @classmethod
    def {name}_unimplemented(cls, operations):
        return operations.invoke(cls())


@Operations.register_operation("{name}_index")
class IndexOp(alembic_ops.CreateIndexOp):
    @classmethod
    def {name}_index(cls, operations, name, table, columns):
        return operations.invoke(cls(name, table, columns))
'''
ENV_PY = '''
from alembic import context
{imports}
raise SystemExit("env.py must never run while linting")
'''


def _project(tmp_path: Path, name: str, inner: str, env_imports: str | None, via: str = "") -> Path:
    """myproj/ops.py registers *name* (implementation: ``operations.<inner>``); env.py imports it
    (directly, or through myproj/<via>.py)."""
    package = tmp_path / "myproj"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(OPS_MODULE.format(name=name, inner=inner))
    if via:
        (package / f"{via}.py").write_text("from myproj import ops  # noqa: F401\n")
    migrations = tmp_path / "migrations"
    (migrations / "versions").mkdir(parents=True, exist_ok=True)
    if env_imports is not None:
        (migrations / "env.py").write_text(ENV_PY.format(imports=env_imports))
    return migrations / "versions"


def _lint(paths, settings=None):
    return run(paths, settings=settings or Settings(), dialects=["postgresql"])


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_registered_operation_is_checked_through_its_implementation(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.chdir(tmp_path)
    name = f"custom_{rng.choice(['seq', 'audit', 'grant'])}_{rng.randrange(1000)}"
    table, column = f"t{rng.randrange(100)}", f"c{rng.randrange(100)}"
    via = rng.choice(["", "migration_helpers"])
    imports = f"import myproj.{via or 'ops'}" if rng.random() < 0.5 else f"from myproj import {via or 'ops'}"
    versions = _project(tmp_path, name, f'drop_column(operation.table, "{column}")', imports, via)
    before = rng.randrange(0, 4)
    body = "\n".join(['op.create_table("x%d", sa.Column("id", sa.Integer))' % i for i in range(before)]
                     + [f'op.{name}("{table}")'])
    path = versions / "r1.py"
    path.write_text(script(body))
    line = path.read_text().splitlines().index(f'    op.{name}("{table}")') + 1
    found = [(f.code, f.line) for f in _lint([versions]).findings]
    assert found == [("MP101", line)], (seed, found)  # the drop inside the implementation, at the call's line
    message = _lint([versions]).findings[0].message
    assert f"{table}.{column}" in message


def test_unknown_operation_is_mp004_naming_it_and_the_rest_is_linted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r1.py"
    path.write_text(script('result = op.make_coffee("t", strength=3)\nresult.stir()\nop.drop_column("t", "c")'))
    lines = path.read_text().splitlines()
    call, drop = (lines.index(text) + 1 for text in ('    result = op.make_coffee("t", strength=3)',
                                                       '    op.drop_column("t", "c")'))
    findings = _lint([path]).findings
    assert [(f.code, f.line) for f in findings] == [("MP005", call), ("MP101", drop)]
    assert "op.make_coffee()" in findings[0].message and "lint_plugins" in findings[0].message
    assert "object at 0x" not in findings[0].message


def test_operation_registered_without_implementation_is_mp004(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    versions = _project(tmp_path, "custom", 'drop_column(operation.table, "c")', "import myproj.ops")
    (versions / "r1.py").write_text(script("op.custom_unimplemented()"))
    findings = _lint([versions]).findings
    assert [f.code for f in findings] == ["MP005"] and "Unimplemented" in findings[0].message


def test_subclass_of_an_alembic_operation_is_judged_as_that_operation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    versions = _project(tmp_path, "custom", 'drop_column(operation.table, "c")', "import myproj.ops")
    (versions / "r1.py").write_text(script('op.custom_index("ix", "users", ["a"])'))
    assert [f.code for f in _lint([versions]).findings] == ["MP113"]  # create index without CONCURRENTLY


def test_lint_plugins_setting_without_env_py(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    versions = _project(tmp_path, "custom", 'drop_column(operation.table, "c")', None)
    (versions / "r1.py").write_text(script('op.custom("t")'))
    assert [f.code for f in _lint([versions]).findings] == ["MP005"]
    settings = Settings()
    settings.update({"lint_plugins": "myproj.ops"}, "setup.cfg")
    assert [f.code for f in _lint([versions], settings).findings] == ["MP101"]


def test_a_configured_plugin_that_fails_is_one_line_exit_2(tmp_path):
    (tmp_path / "r1.py").write_text(script("pass"))
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('no config in CI')\n")
    for plugin, says in (("no_such_module", "No module named"), ("broken_plugin", "no config in CI")):
        (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nlint_plugins = {plugin}\n")
        proc = _cli(tmp_path, "lint", "r1.py")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"migrations-policy: error: setup.cfg: lint_plugins: cannot import {plugin}")
        assert says in proc.stderr and "Traceback" not in proc.stderr


def test_an_env_py_import_that_fails_leaves_mp004(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    versions = _project(tmp_path, "custom", 'drop_column(operation.table, "c")', "import myproj.ops")
    ops = tmp_path / "myproj" / "ops.py"
    ops.write_text("import os\nif os.environ.get('APP_CONFIG') is None:\n    raise RuntimeError('no config')\n"
                   "# register_operation is below, behind the configuration\n" + ops.read_text())
    (versions / "r1.py").write_text(script('op.custom("t")'))
    assert [f.code for f in _lint([versions]).findings] == ["MP005"]


def test_cache_follows_the_plugin_module(tmp_path, monkeypatch):
    """A warm run after the registering module changed answers as a cold run (the cache staleness note)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", str(tmp_path / "cache"))
    versions = _project(tmp_path, "custom", 'execute("SELECT 1")', "import myproj.ops")
    (versions / "r1.py").write_text(script('op.custom("t")'))
    assert _lint([versions]).findings == []
    assert _lint([versions]).findings == []  # warm
    ops = tmp_path / "myproj" / "ops.py"
    ops.write_text(ops.read_text().replace('operations.execute("SELECT 1")', 'operations.drop_column("t", "c")'))
    assert [f.code for f in _lint([versions]).findings] == ["MP101"]
    (tmp_path / "migrations" / "env.py").write_text(ENV_PY.format(imports=""))  # env.py no longer imports it
    assert [f.code for f in _lint([versions]).findings] == ["MP005"]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root, "MIGRATIONS_POLICY_CACHE_DIR": "off"}
    return subprocess.run([sys.executable, "-m", "migrations_policy.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=env)


# -- memory limit -------------------------------------------------------------------------------------------
HOGS = {
    "upgrade": "hog = []\nwhile True:\n    hog.append(bytearray(32 * 1024 * 1024))",
    "one_block": "block = bytearray(64 * 1024 ** 3)",
    "string": "text = 'x' * (1 << 40)",
}
IMPORT_HOG = "HOG = [bytearray(32 * 1024 * 1024) for _ in range(10 ** 6)]\n"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_script_over_the_memory_limit_is_mp000_and_the_others_keep_their_verdicts(tmp_path, monkeypatch, jobs):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIGRATIONS_POLICY_LINT_JOBS", jobs)
    rng = random.Random(int(jobs))
    scripts = {}
    for index in range(6):
        kind = rng.choice(["drop", "clean"])
        scripts[f"ok_{index}.py"] = (script('op.drop_column("t", "c")' if kind == "drop" else "pass",
                                            revision=f"ok{index}"), ["MP101"] if kind == "drop" else [])
    for name, body in HOGS.items():
        scripts[f"hog_{name}.py"] = (script(body, revision=name), ["MP000"])
    scripts["hog_import.py"] = (script("pass", revision="imp", extra=IMPORT_HOG), ["MP000"])
    names = list(scripts)
    rng.shuffle(names)
    for name in names:
        (tmp_path / name).write_text(scripts[name][0])
    settings = Settings()
    settings.update({"lint_memory_limit": "256"}, "setup.cfg")
    report = run([tmp_path / name for name in names], settings=settings, dialects=["postgresql"])
    got = {name: [f.code for f in report.findings if Path(f.path).name == name] for name in names}
    assert got == {name: codes for name, (_, codes) in scripts.items()}
    for finding in report.findings:
        if finding.code == "MP000":
            assert finding.message.startswith("exceeded the memory limit of 256 MiB (lint_memory_limit)"), finding
    assert report.exit_code == 2


def test_memory_limit_is_validated():
    with pytest.raises(ConfigError):
        Settings().update({"lint_memory_limit": "-1"}, "setup.cfg")


def test_a_plugin_that_hangs_is_stopped_by_the_time_limit(tmp_path):
    (tmp_path / "r1.py").write_text(script("pass"))
    (tmp_path / "slow_plugin.py").write_text("import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                             "time.sleep(3600)\n")
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlint_plugins = slow_plugin\nlint_timeout = 2\n")
    proc = _cli(tmp_path, "lint", "r1.py")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "lint_plugins: " in proc.stderr and "slow_plugin" in proc.stderr and "did not finish within" in proc.stderr


@pytest.mark.parametrize("seed", [3, 11])
def test_replay_runs_registered_operations_too(tmp_path, monkeypatch, run_lint, seed):
    """``--replay`` runs each script on a scratch database: a registered operation must be there too
    (imported from env.py's imports), judged by what its implementation did to the database."""
    rng = random.Random(seed)
    monkeypatch.chdir(tmp_path)
    name = f"custom_{rng.choice(['seq', 'audit', 'grant'])}_{rng.randrange(1000)}"
    table, column = f"t{rng.randrange(100)}", f"c{rng.randrange(100)}"
    versions = _project(tmp_path, name, f'drop_column(operation.table, "{column}")', "import myproj.ops")
    (versions / "r1.py").write_text(script(
        f'op.create_table("{table}", sa.Column("id", sa.Integer, primary_key=True), sa.Column("{column}", sa.Integer))'))
    path = versions / "r2.py"
    path.write_text(script(f'op.{name}("{table}")', revision="r2", down="r1"))
    line = path.read_text().splitlines().index(f'    op.{name}("{table}")') + 1
    run = run_lint("--format", "json", "--replay", "--dialect", "sqlite", versions)
    found = [(Path(f["path"]).name, f["code"], f["line"]) for f in run.json["findings"]]
    assert found == [("r2.py", "MP101", line)], (seed, run.out, run.err)
