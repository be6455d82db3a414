"""Analyse the files a run could not answer from the cache, isolated from this process and from each other.

``analyse_all(tasks, options) -> Analysis`` returns, for every ``(path, phase)`` task
and in order, the hits of ``engine.analyse`` as the lists the cache stores
(``Hit.to_list()``), and the linter's own errors per task.

No script runs in this process: a worker process (``lint.sandbox.worker``, a fresh
interpreter) forks one child per script, at most ``jobs()`` at a time, and kills a
child that runs out of time.  Every file gets a verdict; what one script does cannot
change another's (each child starts from the same state), so the results do not
depend on the order of the files nor on the number of processes.
``$MIGRATIONS_POLICY_LINT_JOBS`` sets that number (``1``: one script at a time).

A script that kills or stops the worker itself: the worker is restarted for the
rest, and each script that was running then is run again alone; if the worker dies
again, that script's verdict is ``MP000``.  The verdicts of a worker that ended early are
not kept (they are analysed again): a script that forged frames and then killed the worker
could have written them.  ``channel`` checks every frame (a script can answer for itself,
never for another file).
"""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
from pathlib import Path

from migrations_policy.core.errors import ConfigError
from migrations_policy.lint.analysis import ENV, Analysis, jobs  # noqa: F401 (re-exported)
from migrations_policy.lint.sandbox.channel import Broken, Forged, Ledger, Reader
from migrations_policy.lint.options import Options
from migrations_policy.lint.output.report import printable_path

#: Seconds the worker may stay silent beyond the time limit before it is declared stuck (a stopped worker).
GRACE = 30.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


class WorkerError(Exception):
    """The worker process could not run at all (a bug or a broken installation); one line."""


def _env() -> dict[str, str]:
    """The environment of the worker: this process's, with this copy of migrations_policy importable first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def worker_job(tasks: list[tuple[int, Path, str]], options: Options, workers: int, extra: dict | None = None) -> dict:
    """The job a worker reads from its stdin (marshal): the options, *workers* and the ``(index, path, phase)``
    *tasks*, completed by *extra*."""
    return {"dialects": list(options.dialects), "postgresql_version": options.postgresql_version,
            "timeout": float(options.timeout), "url": options.url, "workers": workers,
            "memory_limit": options.memory_limit, "alembic_ini": [options.alembic_ini, options.alembic_ini_sha],
            "plugins": [list(options.plugins.configured), list(options.plugins.found), list(options.plugins.paths),
                        options.plugins.source],
            "tasks": [(index, str(path), phase) for index, path, phase in tasks], **(extra or {})}


def _errors_file():
    """An anonymous file for the worker's stderr, read only when the worker fails: a ``memfd`` where the system has
    one (no directory, and no ``tempfile`` import -- shutil, bz2, lzma, random: ~12 ms on a one-file run's path
    to its worker), else ``tempfile.TemporaryFile``."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("migrations-policy-lint-worker-stderr", os.MFD_CLOEXEC), "w+b")
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile()


class Spawned:
    """A worker started with its job written (``spawn``), not read from yet: the linter does the rest of its own
    work (``linter.run``) while the worker imports and analyses, then ``analyse_all(..., spawned=)`` reads it."""

    def __init__(self, tasks: list, options: Options, workers: int, module: str, extra: dict | None):
        self.tasks, self.workers = tasks, workers
        self.errors = _errors_file()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.errors, env=_env(),
                                         start_new_session=True)
        except BaseException:
            self.errors.close()
            raise
        self.write_error: OSError | None = None
        try:
            self.proc.stdin.write(marshal.dumps(worker_job(tasks, options, workers, extra)))
            self.proc.stdin.close()
        except OSError as exc:  # read as "broke its pipe" by _run_worker, where the worker is judged
            self.write_error = exc

    def cancel(self) -> None:
        """The linter stopped before reading it (an error, Ctrl-C): the worker and its children are killed."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL) if _group_alive(self.proc.pid) else self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.errors.close()


def spawn(tasks: list[tuple[Path, str]], options: Options, workers: int | None = None) -> Spawned:
    """Start the first worker of ``analyse_all(tasks, options, workers)`` now (see ``Spawned``)."""
    workers = 1 if options.url else max(1, min(jobs(workers), len(tasks)))
    todo = [(i, path, phase) for i, (path, phase) in enumerate(tasks)]
    return Spawned(todo, options, workers, "migrations_policy.lint.sandbox.worker", None)


def _run_worker(tasks: list[tuple[int, Path, str]], options: Options, workers: int,
                on_done, module: str = "migrations_policy.lint.sandbox.worker", extra: dict | None = None,
                partial: bool = True, spawned: Spawned | None = None) -> tuple[set[int], str]:
    """Run *tasks* in one worker (*module*, its job completed by *extra*); ``on_done(index, hits, internal, ...)``
    per verdict, once the worker has ended (``channel.Ledger`` checks every frame first).

    Returns the indexes started but not judged when the worker ended early, and how it ended.  The verdicts of
    a worker that ended early are passed on only when *partial*.  A worker whose channel carried frames it did
    not send (a script wrote into it): ``MP000`` for every script started in it, none of its verdicts passed on.
    """
    from migrations_policy.lint.sandbox.limits import wall_limit

    silence = wall_limit(options.timeout) + GRACE if options.timeout > 0 else None
    ledger = Ledger({index: printable_path(str(path)) for index, path, _ in tasks})
    plugins = options.plugins.configured + options.plugins.found
    importing = bool(plugins)  # until the worker says they are imported: a silence is theirs
    forged = ""
    spawned = spawned or Spawned(tasks, options, workers, module, extra)
    proc = spawned.proc
    with spawned.errors as errors:
        ended = ""
        try:
            if spawned.write_error is not None:
                raise spawned.write_error
            reader = Reader(proc.stdout.fileno(), silence, lambda: proc.poll() is not None)
            while not ledger.ended:
                frame = reader.frame()
                if frame is None:
                    break
                importing = _take(frame, ledger, importing)
            if ledger.ended:
                _closed(proc, reader)
        except Forged as exc:
            forged = str(exc)
        except TimeoutError:
            if importing:
                raise ConfigError(f"{options.plugins.source or 'env.py'}: lint_plugins: importing "
                                  f"{', '.join(plugins)} did not finish within {silence:g} s") from None
            ended = f"stopped answering for {silence:g} s"
        except (OSError, EOFError, ValueError, TypeError, Broken) as exc:  # a broken pipe or frame: the worker died
            ended = f"broke its pipe ({type(exc).__name__})"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL) if _group_alive(proc.pid) else proc.kill()
            status = proc.wait()
            proc.stdout.close()
        if forged:
            return _refuse(tasks, ledger, forged, on_done), "received frames it did not send"
        if not ended:
            ended = _describe(status) if status or not ledger.ended else ""
        if not ended or partial:
            for index, result in ledger.results.items():
                on_done(index, *result)
        if not ended or (ledger.open and (status < 0 or ended.startswith("stopped"))) or status == 0:
            return ledger.open, ended  # finished, or killed / stopped (by a script?) while scripts ran
        errors.seek(0)
        last = [line for line in errors.read().decode("utf-8", "replace").splitlines() if line.strip()]
        raise WorkerError(f"the lint worker process {ended}: {last[-1] if last else 'no message'}")


def _take(frame: tuple, ledger: Ledger, importing: bool) -> bool:
    """Enter *frame* into *ledger*; whether the plugins are still being imported."""
    tag = frame[0]
    if tag == "start" and len(frame) == 2:
        ledger.start(frame[1])
    elif tag == "done" and len(frame) >= 3:
        ledger.done(frame[1], frame[2:])
    elif tag == "end" and len(frame) == 1:
        ledger.end()
    elif tag == "plugin error" and len(frame) == 2 and importing and isinstance(frame[1], str):
        raise ConfigError(frame[1])
    elif tag == "plugins imported" and importing:
        return False
    else:
        raise Forged(f"an unexpected {tag!r} frame")
    return importing


def _closed(proc: subprocess.Popen, reader: Reader) -> None:
    """After the worker's end of job: it exits, and nothing follows that frame in the channel."""
    try:
        proc.wait(GRACE)
    except subprocess.TimeoutExpired:
        raise Forged("the worker went on after its end of job") from None
    if reader.drain():
        raise Forged("frames after the end of job")


#: Scripts named in the MP000 of a worker that received forged frames, at most.
_NAMED = 10


def _refuse(tasks, ledger: Ledger, why: str, on_done) -> set[int]:
    """MP000 for every script started in a worker whose channel was written into (none of its verdicts is kept)."""
    paths = {index: str(path) for index, path, _ in tasks}
    started = [index for index in ledger.started if index in paths]
    if not started:
        raise WorkerError(f"the lint worker process received frames it did not send ({why}) before running "
                          "any script (a process left by an earlier script?)")
    names = ", ".join(paths[index] for index in started[:_NAMED])
    if len(started) > _NAMED:
        names += f" and {len(started) - _NAMED} more"
    message = (f"the linter's worker process received results it did not send ({why}): one of the scripts run "
               f"in it wrote into the linter's result channel, so none of their verdicts is trusted "
               f"(scripts run in that worker: {names})")
    for index in started:
        on_done(index, [[1, "MP000", message, "", "error"]], None, [])
    return set()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def analyse_all(tasks: list[tuple[Path, str]], options: Options, workers: int | None = None,
                spawned: Spawned | None = None) -> Analysis:
    """The verdict of each ``(path, phase)`` task; *spawned*: its first worker, already started (``spawn``)."""
    hits: list[list[list] | None] = [None] * len(tasks)
    analysis = Analysis(hits)  # type: ignore[arg-type]

    def done(index: int, found: list, internal, modules=(), judged=False, *more) -> None:
        hits[index] = found
        if internal:
            analysis.internal[index] = tuple(internal)
        if modules:
            analysis.modules[index] = list(modules)
        if judged is True and not internal:
            analysis.judged.add(index)

    workers = 1 if options.url else max(1, min(jobs(workers), len(tasks)))
    todo = [(i, path, phase) for i, (path, phase) in enumerate(tasks)]
    while todo:
        before = len(todo)
        suspects, ended = _run_worker(todo, options, workers, done, partial=False, spawned=spawned)
        spawned = None
        for index in sorted(suspects):  # each alone: which one ended the worker?
            alone, how = _run_worker([(index, *tasks[index])], options, 1, done, partial=False)
            if alone:
                hits[index] = [[1, "MP000", f"the script ended the linter's worker process (it {how})", "", "error"]]
                analysis.judged.discard(index)
        todo = [(i, path, phase) for i, path, phase in todo if hits[i] is None]
        if len(todo) == before:
            raise WorkerError(f"the lint worker process {ended} without judging {len(todo)} file(s)")
    return analysis
