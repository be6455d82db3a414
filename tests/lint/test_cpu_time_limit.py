"""``lint_timeout`` is CPU time (issue 28): on a loaded machine an innocent script keeps its verdict.

The test loads the machine itself (CPU hogs: twice as many spinning processes as CPUs) and lints, with
``lint_timeout = 1``, generated scripts of three kinds in one run:

* innocent ones that *wait* longer than the limit (a sleep) and compute a little, then issue an operation:
  their verdict is the one the same operation gets alone (no MP000) -- a wall-clock limit gave them MP000;
* spinning ones (an endless loop, also swallowing exceptions, ignoring SIGPROF/SIGXCPU, resetting the
  profiling timer, in a thread): one MP000 line "did not finish within 1 s of CPU time";
* one that blocks forever (a sleep): MP000 from the wall-clock backstop, saying so.

Seed: MP_CPU_LIMIT_SEED (printed).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

from .conftest import script

SPINNERS = [
    "while True:\n    pass",
    "while True:\n    try:\n        pass\n    except BaseException:\n        pass",
    "import signal\nfor s in (signal.SIGPROF, signal.SIGXCPU):\n    signal.signal(s, signal.SIG_IGN)\n"
    "while True:\n    pass",
    "import signal\nsignal.setitimer(signal.ITIMER_PROF, 0)\nsignal.signal(signal.SIGXCPU, lambda *a: None)\n"
    "x = 0\nwhile True:\n    x += 1",
    "import threading\nt = threading.Thread(target=lambda: [None for _ in iter(int, 1)])\nt.start()\nt.join()",
]

#: Their verdict alone is the reference (the same operation linted without the wait, on the unloaded machine).
OPERATIONS = [
    "op.drop_column('users', 'c{n}')",
    "op.add_column('users', sa.Column('c{n}', sa.Integer(), nullable=True))",
    "op.create_index('ix_{n}', 'users', ['a{n}'])",
]


def _hogs() -> list[subprocess.Popen]:
    count = min(2 * (os.cpu_count() or 1), 16)  # the machine loaded, not a large CI runner swamped
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(count)]


def test_cpu_limit_on_a_loaded_machine(tmp_path, run_lint):
    seed = int(os.environ.get("MP_CPU_LIMIT_SEED") or random.SystemRandom().randrange(10 ** 9))
    print(f"MP_CPU_LIMIT_SEED={seed}", file=sys.stderr)
    rng = random.Random(seed)
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    versions = tmp_path / "versions"
    versions.mkdir()
    reference = tmp_path / "reference"
    reference.mkdir()
    innocent, spinning = {}, {}
    for n in range(3):
        operation = rng.choice(OPERATIONS).format(n=n)
        wait = round(rng.uniform(1.3, 2.5), 2)  # longer than the limit, far from the backstop
        work = rng.randrange(10 ** 5, 10 ** 6)  # a few ms of CPU
        body = f"import time\ntime.sleep({wait})\nsum(range({work}))\n{operation}"
        name = f"innocent_{n}.py"
        (versions / name).write_text(script(body, revision=f"i{n}"))
        (reference / name).write_text(script(operation, revision=f"i{n}"))
        innocent[name] = body
    for n, form in enumerate(rng.sample(SPINNERS, 2)):
        name = f"spinning_{n}.py"
        (versions / name).write_text(script(form + "\nop.drop_column('users', 'never')", revision=f"s{n}"))
        spinning[name] = form
    (versions / "blocked.py").write_text(script("import time\ntime.sleep(10 ** 6)", revision="b"))

    expected = {}
    for finding in run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql",
                            reference).json["findings"]:
        expected.setdefault(os.path.basename(finding["path"]), set()).add(finding["code"])

    hogs = _hogs()
    try:
        run = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", versions)
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    found: dict[str, list[dict]] = {}
    for finding in run.json["findings"]:
        found.setdefault(os.path.basename(finding["path"]), []).append(finding)
    for name, body in innocent.items():
        codes = {f["code"] for f in found.get(name, [])}
        assert codes == expected.get(name, set()), (seed, name, body, found.get(name))
    for name, form in spinning.items():
        errors = [f for f in found.get(name, []) if f["code"] == "MP000"]
        assert len(errors) == 1, (seed, name, form, found.get(name))
        message = errors[0]["message"]
        assert "did not finish within 1 s of CPU time" in message and "\n" not in message, (seed, form, message)
        assert {f["code"] for f in found[name]} == {"MP000"}, (seed, form, found[name])
    blocked = [f for f in found.get("blocked.py", []) if f["code"] == "MP000"]
    assert len(blocked) == 1 and "wall-clock" in blocked[0]["message"], (seed, found.get("blocked.py"))
    assert run.code == 2
