"""A script out of its CPU time (``lint_timeout``) is not run again while nothing its verdict depends on changed
(issue 28: "MP000 results are never cached, so warm runs redo them").

The verdict depends on the script's content, the limit (part of the cache key) and the local modules and files
the script had imported or read when the limit struck (recorded by the child at that moment); the test draws
where the endless loop is (the script's top level, ``upgrade()``, a local helper module it imports, a loop
swallowing exceptions), whether the script reads a data file first, the limit, and the
change made afterwards.  Each run of the script appends a line to ``runs.log`` (written, never read: not a
dependency), so the test sees whether a run executed it:

* cold: one MP000 "did not finish within N s of CPU time", one execution;
* warm, nothing changed: the same report, no execution;
* after the drawn change (the helper module, the data file, the script, ``lint_timeout``): executed again, and
  the same verdict; a change to an unrelated file executes nothing;
* a script that takes the limit's signal away (ignores SIGPROF) is stopped by ``RLIMIT_CPU`` with no record of
  what it imported: its verdict is the same and never cached (it is executed each run); so is, as a rule, one
  that spins in a thread while its main thread waits (Python runs signal handlers in the main thread).

Seed: MP_CPU_CACHE_SEED (printed).
"""

from __future__ import annotations

import os
import random
import sys

from .conftest import script

LOOPS = {
    "upgrade": ("", "log_run()\nwhile True:\n    pass"),
    "top": ("log_run()\nwhile True:\n    pass\n", "pass"),
    "swallowing": ("", "log_run()\nwhile True:\n    try:\n        pass\n    except BaseException:\n        pass"),
    "helper": ("from spin_helper_{n} import spin\n", "log_run()\nspin()"),
}
#: Not answerable at the limit: the script takes the profiling timer's signal away, or spins in a thread while
#: its main thread (where Python runs signal handlers) waits: RLIMIT_CPU ends it.  True: never answered.
UNANSWERABLE = {
    "ignores": ("log_run()\nimport signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\nwhile True:\n    pass", True),
    "thread": ("log_run()\nimport threading\nt = threading.Thread(target=lambda: [None for _ in iter(int, 1)])\n"
               "t.start()\nt.join()", False),  # (the kernel may deliver the signal to the waiting thread)
}

LOG_RUN = "def log_run():\n    with open({log!r}, 'a') as fh:\n        fh.write('run\\n')\n"


def _within(limit: str) -> str:
    return f"did not finish within {float(limit):g} s of CPU time"


def _runs(tmp_path) -> int:
    log = tmp_path / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _lint(run_lint, versions, name):
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", versions / name)
    return run, sorted((f["code"], f["message"]) for f in run.json["findings"])


def test_a_cpu_limit_verdict_is_cached_with_what_the_script_had_read(tmp_path, run_lint):
    seed = int(os.environ.get("MP_CPU_CACHE_SEED") or random.SystemRandom().randrange(10 ** 9))
    print(f"MP_CPU_CACHE_SEED={seed}", file=sys.stderr)
    rng = random.Random(seed)
    versions = tmp_path / "versions"
    versions.mkdir()
    log = str(tmp_path / "runs.log")
    for n in range(2):
        kind = rng.choice(sorted(LOOPS))
        limit = rng.choice(["1", "1.5"])  # (the wall-clock backstop, 6x, far enough on a loaded machine)
        reads = rng.random() < 0.5
        change = rng.choice(["helper" if kind == "helper" else "script", "data" if reads else "script",
                             "lint_timeout", "unrelated"])
        (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nlint_timeout = {limit}\n")
        (tmp_path / f"spin_helper_{n}.py").write_text("def spin():\n    while True:\n        pass\n")
        (tmp_path / f"data_{n}.sql").write_text("SELECT 1")
        (tmp_path / "unrelated.txt").write_text("x")
        top, body = LOOPS[kind]
        if reads:  # before the loop, wherever it is
            read = f"open({str(tmp_path / f'data_{n}.sql')!r}).read()\n"
            top, body = (read + top, body) if kind == "top" else (top, read + body)
        name = f"spin_{n}.py"
        extra = LOG_RUN.format(log=log) + top.format(n=n)
        (versions / name).write_text(script(body, revision=f"s{n}", extra=extra))
        context = (seed, kind, limit, reads, change)
        before = _runs(tmp_path)
        cold, findings = _lint(run_lint, versions, name)
        assert [code for code, _ in findings] == ["MP000"], (context, findings)
        assert _within(limit) in findings[0][1], (context, findings)
        assert cold.code == 2 and _runs(tmp_path) == before + 1, context
        warm, again = _lint(run_lint, versions, name)
        assert again == findings and warm.code == 2, (context, again)
        assert _runs(tmp_path) == before + 1, ("executed again, nothing changed", context)
        if change == "helper":
            (tmp_path / f"spin_helper_{n}.py").write_text("def spin():\n    x = 0\n    while True:\n        x += 1\n")
        elif change == "data":
            (tmp_path / f"data_{n}.sql").write_text("SELECT 2")
        elif change == "script":
            (versions / name).write_text(script(body + "\npass", revision=f"s{n}", extra=extra))
        elif change == "lint_timeout":
            limit = "1.25" if limit == "1" else "1"
            (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nlint_timeout = {limit}\n")
        else:
            (tmp_path / "unrelated.txt").write_text("y")
        third, after = _lint(run_lint, versions, name)
        assert [code for code, _ in after] == ["MP000"] and _within(limit) in after[0][1], (context, after)
        assert _runs(tmp_path) == before + 1 + (change != "unrelated"), ("executed?", context)

    form = rng.choice(sorted(UNANSWERABLE))
    body, never = UNANSWERABLE[form]
    (versions / "unanswered.py").write_text(script(body, revision="u", extra=LOG_RUN.format(log=log)))
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlint_timeout = 1\n")
    before = _runs(tmp_path)
    first, findings = _lint(run_lint, versions, "unanswered.py")
    second, again = _lint(run_lint, versions, "unanswered.py")
    assert [code for code, _ in findings] == ["MP000"] and _within("1") in findings[0][1], (seed, form, findings)
    assert again == findings, (seed, form, again)
    assert _runs(tmp_path) == before + 2 or not never and _runs(tmp_path) == before + 1, (seed, form)
