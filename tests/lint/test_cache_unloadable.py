"""MP000 verdicts that depend on the script alone are cached (issue 28): a warm run answers them without running
anything; a MP000 built for a script that did not answer (the wall-clock backstop) is not cached."""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy.lint.sandbox import parallel

from .conftest import script

SEED = int(os.environ.get("MP_CACHE000_SEED") or random.randrange(10 ** 9))
print(f"test_cache_unloadable: MP_CACHE000_SEED={SEED}")

UNLOADABLE = [
    "revision = 'x'\nthis is not python {n}\n",
    "revision = 'x'\ndown_revision = None\nraise SystemExit({n})\n",
    "revision = 'x'\ndown_revision = None\nVALUE = {n}\n",  # no upgrade()
    "revision = 'x'\ndown_revision = None\ndef upgrade():\n    raise ValueError('script bug {n}')\n",
]


def test_unloadable_verdicts_are_answered_from_the_cache(tmp_path, run_lint, monkeypatch):
    rng = random.Random(SEED)
    paths = []
    for i, template in enumerate(rng.sample(UNLOADABLE, 3)):
        path = tmp_path / f"u{i}.py"
        path.write_text(template.format(n=rng.randrange(10 ** 6)))
        paths.append(path)
    good = tmp_path / "good.py"
    good.write_text(script('op.drop_column("t", "c")'))
    cold = run_lint("--format", "json", "--phase", "expand", *paths, good)
    assert {f["path"] for f in cold.findings("MP000")} == {str(p) for p in paths}, (SEED, cold.json)

    def no_analysis(*args, **kwargs):
        raise AssertionError("a warm run analysed a script")

    monkeypatch.setattr(parallel, "analyse_all", no_analysis)
    warm = run_lint("--format", "json", "--phase", "expand", *paths, good)
    assert warm.json == cold.json and warm.code == cold.code == 2, SEED


def test_a_wall_clock_limit_is_not_cached(tmp_path, run_lint, monkeypatch):
    """A script that sleeps uses little CPU: the wall-clock backstop ends it, a verdict of the moment, never cached
    (the CPU limit's is: ``test_cpu_limit_cached.py``)."""
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    path = tmp_path / "slow.py"
    path.write_text(script("import time\nwhile True:\n    time.sleep(0.05)"))
    assert "did not finish" in run_lint("--format", "json", path).findings("MP000")[0]["message"]
    calls = []
    real = parallel.analyse_all
    monkeypatch.setattr(parallel, "analyse_all", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert "did not finish" in run_lint("--format", "json", path).findings("MP000")[0]["message"]
    assert calls == [1]
