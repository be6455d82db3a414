"""The suite collects the same tests from the same seed: pytest-xdist (the quick loop's ``-n auto``)
has every worker collect on its own, and ``tests/conftest.py`` seeds the global ``random`` alike in
each.  A generated test that draws its seeds at collection from a fresh ``random.Random()`` or
``SystemRandom`` would make the workers disagree ("Different tests were collected")."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROBE = (
    "import random, sys, pytest\n"
    "random.seed(int(sys.argv[1]))\n"
    "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', sys.argv[2]]))\n"
)


def _collect(seed: int) -> set[str]:
    env = {**os.environ, "MP_TEST_BACKENDS": "sqlite,postgresql,mysql"}
    out = subprocess.run([sys.executable, "-c", PROBE, str(seed), str(TESTS)], capture_output=True, text=True,
                         env=env, cwd=TESTS.parent, check=False).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_the_same_seed_collects_the_same_tests():
    import random

    seed = random.randrange(1 << 30)
    first, second = _collect(seed), _collect(seed)
    assert first, "nothing collected"
    assert first == second, (seed, sorted(first ^ second)[:10])
