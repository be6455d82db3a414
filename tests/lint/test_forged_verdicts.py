"""A script that writes into the linter's result channels cannot decide another file's verdict (red-team F1).

Generated: victims that each drop a column (MP101), and one forger per strategy -- frames into the worker's
pipe to the linter (now, mid-run or after the worker ended, from a setsid descendant; then killing the
worker or not), or an answer into a sibling child's result pipe.  Every victim gets MP101 or MP000, never
"clean", and once the forger is gone the cache answers MP101 for every victim.
"""

from __future__ import annotations

import json
import random

import pytest

from migrations_policy import cli

from .conftest import script

_FORGE = '''
import glob, marshal, os, signal, struct, time
def _forge(delay, kill, extra):
    worker = os.getppid()
    outs = [os.open(f"/proc/{worker}/fd/1", os.O_WRONLY)]
    if extra:  # the other children's result pipes too
        for fd in os.listdir(f"/proc/{worker}/fd"):
            try:
                if os.readlink(f"/proc/{worker}/fd/{fd}").startswith("pipe:") and fd not in ("0", "1", "2"):
                    outs.append(os.open(f"/proc/{worker}/fd/{fd}", os.O_WRONLY))
            except OSError:
                pass
    if os.fork() == 0:
        os.setsid()
        time.sleep(delay)
        n = len(glob.glob(os.path.join(os.path.dirname(__file__), "*.py")))
        clean = marshal.dumps(([], None, []))
        for index in range(n):
            for out in outs:
                try:
                    if out == outs[0]:
                        for frame in (("start", index), ("done", index, [], None, [])):
                            data = marshal.dumps(frame)
                            os.write(out, struct.pack("!I", len(data)) + data)
                    else:
                        os.write(out, struct.pack("!I", len(clean)) + clean)
                except OSError:
                    pass
        if kill:
            os.kill(worker, signal.SIGKILL)
        os._exit(0)
    time.sleep(delay / 2)
'''

STRATEGIES = [(0.0, False, False), (0.0, True, False), (0.3, False, True), (1.5, False, False),
              (0.0, False, True), (0.2, True, True)]


def _lint(directory, capsys) -> dict[str, set[str]]:
    code = cli.main(["lint", "--format", "json", "--phase", "expand", "--dialect", "postgresql", str(directory)])
    out = capsys.readouterr().out
    assert code in (1, 2), out
    verdicts: dict[str, set[str]] = {}
    for finding in json.loads(out)["findings"]:
        verdicts.setdefault(finding["path"].rsplit("/", 1)[-1], set()).add(finding["code"])
    return verdicts


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("jobs", ["1", "3"])
def test_a_forger_cannot_clear_other_files_nor_poison_the_cache(strategy, jobs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MIGRATIONS_POLICY_LINT_JOBS", jobs)
    rng = random.Random(f"{strategy}{jobs}")
    directory = tmp_path / "versions"
    directory.mkdir()
    victims = [f"v{i}_{rng.randrange(10 ** 6)}.py" for i in range(rng.randint(3, 6))]
    for number, name in enumerate(victims):
        (directory / name).write_text(script(f'op.drop_column("users", "c{number}")', revision=f"v{number}"))
    forger = directory / f"{rng.choice('amz')}_forger.py"
    forger.write_text(script(f"_forge{strategy!r}", revision="forger", extra=_FORGE))
    verdicts = _lint(directory, capsys)
    for name in victims:
        assert verdicts.get(name, set()) & {"MP101", "MP000"}, (name, verdicts)
    forger.unlink()
    verdicts = _lint(directory, capsys)
    for name in victims:
        assert "MP101" in verdicts.get(name, set()), (name, verdicts)


@pytest.mark.parametrize("seed", range(200))
def test_the_ledger_never_keeps_a_forged_verdict(seed):
    """Generated: a genuine frame sequence (workers running several children at once) with forged frames
    inserted anywhere; the ledger either refuses the channel or keeps exactly the genuine verdicts."""
    from migrations_policy.lint.sandbox.channel import Forged, Ledger

    rng = random.Random(seed)
    n = rng.randint(1, 6)
    pending, running, genuine = list(range(n)), [], []
    while pending or running:
        if pending and (not running or rng.random() < 0.5):
            index = pending.pop(0)
            running.append(index)
            genuine.append(("start", index))
        else:
            index = running.pop(rng.randrange(len(running)))
            genuine.append(("done", index, [[1, "MP101", "real", "", "error"]], None, []))
    genuine.append(("end",))
    frames = list(genuine)
    for _ in range(rng.randint(1, 3)):
        index = rng.choice([*range(n), n, -1, "x"])
        forged = rng.choice([("done", index, [], None, []), ("start", index), ("end",)])
        frames.insert(rng.randrange(len(frames) + 1), forged)
    ledger = Ledger({i: f"f{i}.py" for i in range(n)})
    try:
        for frame in frames:
            if ledger.ended:
                raise Forged("frames after the end of job")  # parallel._closed: nothing may follow
            {"start": lambda f: ledger.start(f[1]), "done": lambda f: ledger.done(f[1], f[2:]),
             "end": lambda f: ledger.end()}[frame[0]](frame)
    except Forged:
        return
    assert ledger.ended and all(result[0][0][2] == "real" for result in ledger.results.values())
    assert sorted(ledger.results) == list(range(n))
