"""``lint`` reads plain scripts in its own process (``lint.static``): when every script is plain, the worker is
never started and neither alembic nor SQLAlchemy is imported; the report (and the cache) are those of running
every script (``MIGRATIONS_POLICY_LINT_STATIC=0``), for a tree of plain scripts and a tree mixing in scripts
that must run.  Scripts are drawn as in ``test_static_equivalence`` (``MP_STATIC_SEED``)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from migrations_policy.lint.static import reader as static
from migrations_policy.lint.options import Options

from tests.lint.test_static_equivalence import SEED, _script

ROOT = str(Path(__file__).resolve().parents[2])
RUNNER = ("import json, sys\nfrom migrations_policy.cli import main\nimport migrations_policy.lint.sandbox.parallel as p\n"
          "started = []\nspawn = p.spawn\np.spawn = lambda *a, **k: started.append(1) or spawn(*a, **k)\n"
          "code = main(sys.argv[1:])\n"
          "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'sqlalchemy'))"
          " + ['worker'] * len(started)), file=sys.stderr)\nsys.exit(code)")


def _lint(directory: Path, cache: str, static_on: bool, *extra: str) -> tuple[dict, list]:
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": cache, "PYTHONPATH": ROOT,
           "MIGRATIONS_POLICY_LINT_STATIC": "1" if static_on else "0"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, "lint", "--format", "json", *extra, str(directory)],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 2) and proc.stdout, (SEED, proc.stderr[-2000:])  # 2: a drawn MP000
    return json.loads(proc.stdout), json.loads(proc.stderr.strip().splitlines()[-1])


def _tree(tmp_path: Path, name: str, rng: random.Random, count: int, plain_only: bool) -> Path:
    directory = tmp_path / name / "versions"
    directory.mkdir(parents=True)
    written = 0
    index = 0
    while written < count:
        text = _script(rng, index)
        index += 1
        path = directory / f"s{index}.py"
        path.write_text(text)
        readable = static.analyse(path, "expand", Options(dialects=("postgresql", "mysql", "sqlite"))) is not None
        if plain_only and not readable:
            path.unlink()
            continue
        written += 1
    if not plain_only:  # and scripts that must run
        (directory / "loop.py").write_text("from alembic import op\nrevision = 'loop'\ndown_revision = None\n\n"
                                           "def upgrade():\n    for c in ('a', 'b'):\n        op.drop_column('t', c)\n")
    return directory


def test_plain_trees_never_import_alembic_and_give_the_same_report(tmp_path):
    rng = random.Random(SEED)
    directory = _tree(tmp_path, "plain", rng, 8, True)
    fast, imported = _lint(directory, "off", True, "--dialect", "postgresql", "--dialect", "mysql", "--dialect", "sqlite")
    assert imported == [], (SEED, imported)
    slow, imported_slow = _lint(directory, "off", False, "--dialect", "postgresql", "--dialect", "mysql",
                                "--dialect", "sqlite")
    assert fast == slow, SEED
    assert "worker" in imported_slow  # (the control: the worker is started when the static path is off)
    # the cache written by the static path answers the next run (the same entries as the worker's)
    cache = str(tmp_path / "cache")
    first, _ = _lint(directory, cache, True)
    again, imported = _lint(directory, cache, False)
    assert first == again and imported == [], SEED


def test_a_mixed_tree_gives_the_report_of_running_every_script(tmp_path):
    rng = random.Random(SEED + 1)
    directory = _tree(tmp_path, "mixed", rng, 8, False)
    fast, _ = _lint(directory, "off", True)
    slow, _ = _lint(directory, "off", False)
    assert fast == slow, SEED
    assert any(f["code"] == "MP101" for f in fast["findings"] if f["path"].endswith("loop.py")), fast
