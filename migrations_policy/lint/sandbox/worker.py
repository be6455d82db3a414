"""The worker process: each script is analysed in a child forked from a clean state, which it can kill.

Started by ``parallel`` as ``python -m migrations_policy.lint.sandbox.worker`` (a fresh
interpreter: the same module state whoever starts it).  It reads one job from stdin
(marshal: options, number of concurrent children, ``(index, path, phase)`` tasks),
imports the modules that register the project's custom operations (``lint.offline.plugins``;
a configured one that fails ends the run with ``("plugin error", message)``, else
``("plugins imported",)`` is sent), imports what the analysis needs once (alembic,
SQLAlchemy *including* ``sqlalchemy.orm``, the engine, the rules, the policy), then
forks one child per script, at most *workers* at a time.  A child runs in its own session with
``/dev/null`` as stdin/stdout/stderr, analyses its script (``engine.analyse``) and
writes its hits into a pipe.  So a script can neither change what the next script
sees (each child starts from the state the worker had before any script ran),
nor write into the report, nor stop the run:

* a child may use ``timeout`` seconds of CPU time (``lint_timeout``; ``limits.limit_cpu``: a profiling timer at
  the limit, ``RLIMIT_CPU`` at most two seconds later whatever the script does with signals: SIGKILL; a child
  the wall-clock backstop kills after it used its CPU time counts as one out of CPU time):
  ``MP000`` "did not finish within N s of CPU time" -- CPU time, not wall-clock time, so that a loaded machine
  (CI, a busy laptop) slows an innocent script down without costing it its verdict; at the timer the child
  answers that verdict itself with what the script had imported and read (``_out_of_cpu``): it is cached;
* a child still running after ``wall_limit(timeout)`` seconds of wall-clock time (``WALL_FACTOR`` times the
  limit: a script that blocks -- a sleep, a lock, a socket -- uses no CPU) is killed with its process group:
  ``MP000`` "did not finish within N s of wall-clock time";
* a child's address space may grow by ``memory_limit`` MiB (``RLIMIT_AS``): beyond it
  allocations fail, ``MP000`` "exceeded the memory limit";
* a child that ends without writing its hits (``os._exit``, a signal, closing its
  file descriptors) gives ``MP000`` saying how it ended;
* an exception that escapes the engine (a bug of the linter) is sent back as
  ``("internal", message, traceback)``.

To the parent it writes length-prefixed marshal frames on stdout:
``("start", index)`` when a child is forked, ``("done", index, hits, internal, modules)``
when it is judged and ``("end",)`` last (``channel`` checks them); *internal* is None or
``(message, traceback)``, *modules* the ``(path, sha256)`` of the local modules the script imported
and of the files it read (``reads``): the cache depends on them.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import struct
import sys
import time
from collections import deque

from migrations_policy.lint.sandbox.limits import (die_with_worker, libc, limit_cpu, limit_memory, out_of_cpu, wall_limit,
                                          within)
from migrations_policy.lint.sandbox.prefork import batch, batch_answers, batches, imported_names, in_worker, plain, preimport
from migrations_policy.lint.offline.reads import dependencies, watch

# Bound before any script runs: a script that replaces them in its child cannot silence the child.
_dumps, _write, _exit, _fork = marshal.dumps, os.write, os._exit, os.fork
FRAME = struct.Struct("!I")
#: The hits of a child that ended without answering are built here; engine's own texts.
UNLOADABLE = "MP000"


#: Analysed once before the first fork, so that no child pays for first-use work (lazy imports, caches).
_WARM_UP = """
from alembic import op
import sqlalchemy as sa
revision = "warm"
down_revision = None
def upgrade():
    op.create_table("t", sa.Column("id", sa.Integer, primary_key=True))
    op.add_column("u", sa.Column("a", sa.String(50), nullable=False, server_default="x"))
    op.create_index("ix", "u", ["a"], unique=True)
    op.create_foreign_key("fk", "u", "t", ["a"], ["id"])
    op.alter_column("u", "a", type_=sa.Text(), nullable=True, new_column_name="b")
    op.drop_column("u", "c")
    with op.batch_alter_table("u") as batch:
        batch.drop_column("d")
    op.execute("UPDATE u SET a = 1")
    op.get_bind().execute(sa.text("DELETE FROM u"))
    [c["name"] for c in sa.inspect(op.get_bind()).get_columns("u")]
"""


def _prepare(options, sample: bool = True) -> None:
    """Import everything a script's analysis needs and analyse a sample script, once, before the first fork.

    With the *sample* (a job of more than two scripts) also what a child needs (``_for_children``); a job of
    one or two scripts (pre-commit) imports that only before its first fork: when every script is plain
    (analysed here, ``prefork.in_worker``) it is never imported (~0.12 CPU-s).
    """
    import gc
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    if not sample:
        _ORM_ON_FIRST_USE.append(True)
    gc.disable()
    try:
        import resource  # noqa: F401 - what every child uses (limit_memory, die_with_worker): once, here

        try:
            libc()
        except (OSError, AttributeError):
            pass
        _import_alembic()
        from migrations_policy.policy.sql_lexer import _plain_word
        from migrations_policy.lint import engine, rules  # noqa: F401
        from migrations_policy.lint.offline import astscan, fakes, recorder  # noqa: F401

        rules.all_rules()
        _plain_word("SELECT")
        if sample:  # (one or two scripts -- pre-commit -- are their own warm-up)
            _for_children()
            with tempfile.TemporaryDirectory() as directory:
                warm = Path(directory) / "warm_up.py"
                warm.write_text(_WARM_UP)
                offline = replace(options, url=None)  # never the scratch database
                for phase in ("expand", "contract"):
                    engine.analyse(warm, phase, offline)
    finally:
        gc.enable()
    gc.freeze()  # the children's collections neither scan nor copy what is shared


def _import_alembic() -> None:
    """``alembic.context`` and ``alembic.op``, without the syntax highlighter mako's error pages would use.

    alembic imports ``mako.exceptions``, which imports pygments' lexers when pygments is installed (~0.06-0.1
    CPU-s, a third of that import): pygments is hidden while alembic is imported (mako then escapes its HTML
    error pages without colours, which the linter never renders) and visible again afterwards, so a script that
    imports pygments imports it as usual.  Nothing is hidden when something imported it already."""
    hide = "pygments" not in sys.modules
    if hide:
        sys.modules["pygments"] = None  # type: ignore[assignment] - ``import pygments`` raises ImportError
    try:
        import alembic.context  # noqa: F401
        import alembic.op  # noqa: F401
    finally:
        if hide and sys.modules.get("pygments", 0) is None:
            del sys.modules["pygments"]


_CHILDREN_READY: list = []
#: Set by ``_prepare`` for a job of one or two scripts: ``sqlalchemy.orm`` is bound, executed on first use.
_ORM_ON_FIRST_USE: list = []


def _for_children() -> None:
    """Import, once, what every forked child must find imported, before the first fork (each child starts from
    the worker's state, so all of them find the same): ``sqlalchemy.orm`` -- a script that uses ``sa.orm``
    without importing it runs, as under a real ``env.py`` that imports the project's models, whatever the other
    scripts imported -- and ``gate.operations`` (``op.require_data_migrations()``, as our env.py registers it).
    A plain script (``lint.offline.plain``: alembic's own operations, SQLAlchemy's schema and type constructors, resolved
    in the worker's state) needs neither.  In a job of one or two scripts (pre-commit) ``sqlalchemy.orm`` is bound
    without being executed (``_orm_on_first_use``): the child of a script that reaches for it executes it then."""
    if _CHILDREN_READY:
        return
    import gc

    if _ORM_ON_FIRST_USE:
        _orm_on_first_use()
    else:
        import sqlalchemy.orm  # noqa: F401 - see the docstring

    from migrations_policy.gate import operations  # noqa: F401 - see the docstring

    _CHILDREN_READY.append(True)
    gc.freeze()


def _orm_on_first_use() -> None:
    """``sqlalchemy.orm`` in ``sys.modules`` and bound as ``sqlalchemy.orm``, as ``import sqlalchemy.orm`` leaves it,
    but executed only when first used (``importlib.util.LazyLoader``: any attribute, ``from sqlalchemy.orm import X``,
    ``import sqlalchemy.orm.session``) -- ~0.1 CPU-s that a one-script job pays only in the child of a script that
    uses the ORM; the modules it then imports are the same.  What differs before that use: ``type(sa.orm)`` is
    importlib's lazy module class (a ``types.ModuleType`` subclass).  Nothing is done when it is imported already."""
    import importlib.util

    import sqlalchemy

    if "sqlalchemy.orm" in sys.modules:
        return
    spec = importlib.util.find_spec("sqlalchemy.orm")
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        import sqlalchemy.orm  # noqa: F401 - an unusual installation: imported as before

        return
    lazy = importlib.util.LazyLoader(spec.loader)
    spec.loader = lazy
    module = importlib.util.module_from_spec(spec)
    sys.modules["sqlalchemy.orm"] = module
    lazy.exec_module(module)  # (puts the real loader back on the module and its spec)
    sqlalchemy.orm = module  # type: ignore[attr-defined] - what the import system binds on the parent package


#: (path, sha256) of the local modules the plugins imported: every script's result depends on them.
_PLUGIN_MODULES: list[tuple[str, str]] = []


def _import_plugins(options) -> str | None:
    """Import the modules that register custom operations (``lint.offline.plugins``), within the time limit;
    the one-line error of a configured one that fails."""
    if not (options.plugins.configured or options.plugins.found):
        return None
    from migrations_policy.lint.offline.plugins import import_plugins

    before = set(sys.modules)
    with within(options.timeout):
        failure = import_plugins(options.plugins)
    _PLUGIN_MODULES.extend(_local_modules(before, ""))
    return failure


def _send(frame: tuple) -> None:
    data = _dumps(frame)
    out = sys.stdout.buffer
    out.write(FRAME.pack(len(data)) + data)
    out.flush()


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _analyse(path: str, phase: str, options) -> tuple:
    """A script's analysis as the child sends it: ``(hits, True)`` -- True: the script's own verdict, which
    depends on its content alone (a MP000 the worker builds for a child that did not answer -- the wall-clock
    backstop, RLIMIT_CPU, a death -- depends on the moment and is never cached)."""
    from pathlib import Path

    from migrations_policy.lint.engine import analyse

    return ([hit.to_list() for hit in analyse(Path(path), phase, options)], True)


def _child(write_fd: int, path: str, phase: str, options, worker: int, run=_analyse) -> None:
    """In the forked child: ``run(path, phase, options)`` -> ``(hits, *more)``, write ``(hits, internal, modules,
    *more)``, exit.  Never returns."""
    payload = None
    me = os.getpid()  # a process the script forks runs this too: only this one answers
    try:
        os.setsid()  # its own process group: killed with it, out of reach of the terminal's Ctrl-C
        die_with_worker(worker)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGALRM"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        limit_memory(options.memory_limit)
        before = set(sys.modules)
        opened = watch()  # the files the script reads: its cache entry depends on them (lint.offline.reads)
        # a script's analysis answers at the CPU limit itself (not a batch -- prefork.batch: each is forked alone
        # again --, nor a replay, whose answer says more: ``lint.replay.worker``)
        answers = run is _analyse and isinstance(path, str)
        answering = [True] if answers else []
        if answers:
            signal.signal(signal.SIGPROF, lambda *_: _out_of_cpu(answering, write_fd, me, path, before, opened,
                                                                  options.timeout))
        limit_cpu(options.timeout, keep_handler=answers)
        try:
            hits, *more = run(path, phase, options)
            answering.clear()  # analysed: from here the limit's signal is no verdict of the script's
            depends = (_local_modules(before, path) + dependencies(opened, path) + _PLUGIN_MODULES
                       if isinstance(path, str) else [])  # a batch (prefork.batch): each answer holds its own
            payload = _dumps((hits, None, list(dict.fromkeys(depends)), *more))
        except BaseException as exc:  # noqa: BLE001 - escaped the engine: a bug of the linter
            import traceback

            from migrations_policy.lint.offline.loader import one_line

            payload = _dumps(([], (one_line(exc), traceback.format_exc()), []))
    except BaseException:  # noqa: BLE001 - nothing to say: the parent reports the silent exit
        pass
    finally:
        try:
            if os.getpid() != me:  # forked by the script: its answer would be a second one, or not, by timing
                _exit(0)
            if payload:
                payload = FRAME.pack(len(payload)) + payload  # one frame, whole: anything more is not ours
            while payload:
                payload = payload[_write(write_fd, payload):]
        except BaseException:  # noqa: BLE001
            pass
        _exit(0)


def _out_of_cpu(answering: list, write_fd: int, me: int, path: str, before: set[str], opened: list,
                timeout: float) -> None:
    """The profiling timer's signal at the CPU limit (``limits.limit_cpu``), in the child of *path*: its verdict is
    "did not finish within N s of CPU time", sent with the local modules and files the script had imported or read
    by then, as a finished script's is -- so the cache keeps it (keyed by the content and the limit, valid while
    those files are unchanged) and a warm run does not spend the limit again.  Only while the script runs
    (*answering*) and in that child (not a process the script forked).  Anything unexpected: the signal's default
    action ends the child, whose verdict the worker builds and which is never cached (no record of what the script
    read).  A script that took the signal away is ended by ``RLIMIT_CPU`` the same way."""
    if not answering or os.getpid() != me:
        return
    answering.clear()
    try:
        depends = _local_modules(before, path) + dependencies(opened, path) + _PLUGIN_MODULES
        payload = _dumps(([[1, UNLOADABLE, cpu_limit_message(timeout), "", "error"]], None,
                          list(dict.fromkeys(depends)), True))
        payload = FRAME.pack(len(payload)) + payload
        while payload:
            payload = payload[_write(write_fd, payload):]
    except BaseException:  # noqa: BLE001 - no verdict of its own: ended by the signal, as without this handler
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
        os.kill(me, signal.SIGPROF)
    _exit(0)


def cpu_limit_message(timeout: float) -> str:
    return f"did not finish within {timeout:g} s of CPU time (lint_timeout; an endless loop?)"


def _local_modules(before: set[str], script: str) -> list[tuple[str, str]]:
    """(path, sha256) of the modules the script imported that are not installed ones: the project's own helpers."""
    import hashlib

    from migrations_policy.lint.offline.loader import is_local_file

    found = []
    for name in sorted(set(sys.modules) - before):
        file = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(file, str) or not is_local_file(file) or os.path.realpath(file) == os.path.realpath(script):
            continue
        try:
            with open(file, "rb") as fh:
                found.append((os.path.abspath(file), hashlib.sha256(fh.read()).hexdigest()))
        except OSError:
            continue
    return found


class _Running:
    """A forked child: its result pipe, and (Linux) a pidfd that becomes readable when it exits."""

    __slots__ = ("index", "pid", "fd", "exit_fd", "deadline", "data", "closed", "cpu")

    def __init__(self, index: int, pid: int, fd: int, deadline: float | None):
        self.index, self.pid, self.fd, self.deadline = index, pid, fd, deadline
        self.data = bytearray()
        self.closed = False
        self.cpu = 0.0  # seconds of CPU time it used (user + system), known once reaped
        try:
            self.exit_fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: polled
            self.exit_fd = None

    def read(self, blocking: bool = True) -> None:
        """Read what the pipe holds (all of it unless *blocking*); closed at end of file."""
        if not blocking and not self.closed:
            os.set_blocking(self.fd, False)
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                self.closed = True
                os.close(self.fd)
            else:
                self.data += chunk
            if blocking:
                return

    def release(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)
        if self.exit_fd is not None:
            os.close(self.exit_fd)


def _kill(pid: int, reaped: bool = False) -> None:
    """SIGKILL the child's process group, and the child itself unless reaped (its pid may be reused)."""
    for kill in (os.killpg,) if reaped else (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _verdict(child: _Running, status: int | None, timeout: float) -> tuple:
    if status is None and not (timeout > 0 and child.cpu >= timeout):
        return [[1, UNLOADABLE, f"did not finish within {wall_limit(timeout):g} s of wall-clock time, within its "
                 f"{timeout:g} s of CPU time (a blocking call: a sleep, a lock, a socket?)", "", "error"]], None, []
    if status is None or (timeout > 0 and os.WIFSIGNALED(status) and out_of_cpu(os.WTERMSIG(status), child.cpu,
                                                                                 timeout)):
        return [[1, UNLOADABLE, cpu_limit_message(timeout), "", "error"]], None, []
    data = bytes(child.data)
    if len(data) >= FRAME.size and FRAME.unpack(data[:FRAME.size])[0] != len(data) - FRAME.size:
        return [[1, UNLOADABLE, "its result pipe held more or less than its one answer (another script wrote "
                 "into it?): its verdict is not trusted", "", "error"]], None, []
    try:
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            raise ValueError  # killed (by another script?) after an answer was put in its pipe: not trusted
        return marshal.loads(data[FRAME.size:])
    except (EOFError, ValueError, TypeError):
        return [[1, UNLOADABLE, f"the script ended the linting process before its verdict (it {_describe_exit(status)}; "
                 "os._exit, a signal or closed file descriptors?)", "", "error"]], None, []


def _start(index: int, path: str, phase: str, options, run=_analyse) -> _Running:
    """Fork a child that sends ``run(path, phase, options)`` (see ``_child``)."""
    _for_children()  # (a no-op after the first fork)
    read_fd, write_fd = os.pipe()
    worker = os.getpid()
    pid = _fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, path, phase, options, worker, run)
    os.close(write_fd)
    deadline = time.monotonic() + wall_limit(options.timeout) if options.timeout > 0 else None
    return _Running(index, pid, read_fd, deadline)


def _collect(running: dict[int, _Running], wait: float | None = None) -> list[tuple[_Running, int | None]]:
    """Wait for the children a while (at most *wait* s when given); those that exited (with their status)
    or ran out of time (None)."""
    now = time.monotonic()
    deadlines = [c.deadline - now for c in running.values() if c.deadline is not None]
    polled = any(c.exit_fd is None for c in running.values())
    wait = max(0.0, min(deadlines + [0.005 if polled else 5.0] + ([wait] if wait is not None else [])))
    watched = {c.fd: c for c in running.values() if not c.closed}
    watched.update({c.exit_fd: c for c in running.values() if c.exit_fd is not None})
    readable, _, _ = select.select(list(watched), [], [], wait)
    for fd in readable:
        child = watched[fd]
        if fd == child.fd and not child.closed:
            child.read()
    finished = []
    now = time.monotonic()
    for child in list(running.values()):
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            child.cpu = usage.ru_utime + usage.ru_stime
            _kill(child.pid, reaped=True)  # whatever it left running in its process group
            child.read(blocking=False)  # the rest of its answer (a descendant may hold the pipe open)
            finished.append((child, status))
        elif child.deadline is not None and now >= child.deadline:
            _kill(child.pid)
            usage = os.wait4(child.pid, 0)[2]
            child.cpu = usage.ru_utime + usage.ru_stime
            finished.append((child, None))
    for child, _ in finished:
        child.release()
        del running[child.pid]
    return finished


def start(job: dict):
    """The worker's ``Options`` from *job* (``parallel._run_worker``'s), its plugins imported and
    its analysis prepared; None when a configured plugin failed (the ``plugin error`` frame is sent)."""
    from migrations_policy.lint.options import Options
    from migrations_policy.lint.offline.plugins import Plugins

    options = Options(dialects=tuple(job["dialects"]), postgresql_version=job["postgresql_version"],
                      timeout=job["timeout"], url=job["url"], memory_limit=job["memory_limit"],
                      plugins=Plugins(*map(tuple, job["plugins"][:3]), job["plugins"][3]),
                      alembic_ini=job["alembic_ini"][0], alembic_ini_sha=job["alembic_ini"][1])
    failure = _import_plugins(options)
    if failure:
        _send(("plugin error", failure))
        return None
    if options.plugins.configured or options.plugins.found:
        _send(("plugins imported",))
    _prepare(options, sample=len(job["tasks"]) > 2)
    return options


def serve(job: dict) -> None:
    options = start(job)
    if options is None:
        return
    workers = max(1, job["workers"])
    parent = os.getppid()
    pending: deque = deque()
    plains: deque = deque()
    names: list[str] = []
    running: dict[int, _Running] = {}
    tasks = [tuple(task) for task in job["tasks"]]
    if len(tasks) > 2 and not (options.plugins.configured or options.plugins.found):
        # Batches first, from the prepared state: each plain script is analysed in a batch child, the others
        # come back (with what they import) and get a child each, forked once every batch has answered.
        queue = deque(batches(tasks, workers))
        forked: dict[int, list] = {}
        while queue or running:
            if os.getppid() != parent:
                for child in running.values():
                    _kill(child.pid)
                return
            while queue and len(running) < workers:
                chunk = queue.popleft()
                child = _start(-1, chunk, "", options, run=batch)
                running[child.pid] = child
                forked[child.pid] = chunk
            for child, status in _collect(running):
                chunk = forked.pop(child.pid)
                answers = batch_answers(_verdict(child, status, options.timeout), chunk)
                if answers is None:
                    pending.extend(chunk)
                    names.extend(name for task in chunk for name in imported_names(task[1]))
                    continue
                for task, (index, answer) in zip(chunk, answers):
                    if isinstance(answer, tuple) and answer and answer[0] == "child":
                        pending.append(task)
                        names.extend(answer[1])
                    else:
                        _send(("start", index))
                        _send(("done", index, *answer))
    else:
        for task in tasks:
            found = plain(task[1], options)
            (pending if found is None else plains).append(task if found is None else (*task, *found))
        names = [name for task in pending for name in imported_names(task[1])]
    if pending:
        import gc

        _for_children()  # before the project's packages, as before any script
        preimport(sorted(set(names)), options)
        gc.freeze()
    while pending or running or plains:
        if os.getppid() != parent:  # the linter is gone: so are we, and our children
            for child in running.values():
                _kill(child.pid)
            return
        while pending and len(running) < workers:
            index, path, phase = pending.popleft()
            _send(("start", index))
            child = _start(index, path, phase, options)
            running[child.pid] = child
        if plains:  # while the children run: one plain script here, then a look at the children
            index, path, phase, source, code = plains.popleft()
            verdict = in_worker(path, phase, options, source, code)
            if verdict is None:
                pending.append((index, path, phase))
            else:
                _send(("start", index))
                _send(("done", index, *verdict))
            if not running:
                continue
        for child, status in _collect(running, wait=0.0 if plains else None):
            _send(("done", child.index, *_verdict(child, status, options.timeout)))
    _send(("end",))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills us when interrupted
    job = marshal.loads(sys.stdin.buffer.read())
    serve(job)
    sys.stdout.flush()
    _exit(0)


if __name__ == "__main__":
    main()
