"""What a long command is doing right now, for people watching it (a terminal) and for logs
(CI, a Kubernetes Job, systemd): the revision alembic is running, the statement it is waiting
for, and how long each took.

``watch()`` follows one thread's migration: alembic's own "Running upgrade A -> B, message"
calls (whatever the project's logging config shows of them) and the statements that thread
sends (SQLAlchemy cursor events).  ``reporting(mode, stream)``
prints from it:

* ``line`` (logs): a line when a revision starts and when it ends, with its time, and every
  *interval* seconds a "still running" line naming the statement and how long it has run;
* ``live`` (a terminal): one line rewritten in place;
* ``none``: nothing.

``auto`` is ``live`` on a terminal, else ``line``.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, TextIO

from sqlalchemy import event
from sqlalchemy.engine import Engine

PROGRESS_MODES = ("auto", "line", "live", "none")
#: Seconds between two progress lines in logs (``--progress-interval``).
DEFAULT_INTERVAL = 5.0


def resolve_mode(mode: str, stream: TextIO) -> str:
    """``auto`` → ``live`` on a terminal, ``line`` otherwise."""
    if mode != "auto":
        return mode
    try:
        return "live" if stream.isatty() else "line"
    except (AttributeError, ValueError):
        return "line"


def one_line(sql: str, width: int = 100) -> str:
    text = " ".join(str(sql).split())
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Step:
    """One revision being applied: ``A -> B, message``."""

    revision: str
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    statements: int = 0
    #: The command stopped with an error inside this step (it did not run to its end).
    failed: bool = False

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started


class Watch:
    """The revision and statement one thread is running (see ``watch``)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.steps: list[Step] = []
        self.statement: str | None = None
        self.statement_started = 0.0
        #: Free-text milestones of the command (rehearse: its phases), printed in order.
        self.notes: list[str] = []
        self._lock = threading.Lock()

    @property
    def current(self) -> Step | None:
        with self._lock:
            return self.steps[-1] if self.steps and self.steps[-1].finished is None else None

    def describe(self) -> str:
        """"revision A -> B, message" of the running step, or "" outside one."""
        step = self.current
        return f"revision {step.revision}" if step is not None else ""

    # -- inputs: alembic's "Running upgrade" calls, the thread's statements -------------
    def step_started(self, description: str) -> None:
        with self._lock:
            now = time.monotonic()
            if self.steps and self.steps[-1].finished is None:
                self.steps[-1].finished = now
            self.steps.append(Step(description.removeprefix("upgrade ").strip(), started=now))
            self.statement = None

    def _before(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if threading.get_ident() == self.thread:
            self.statement, self.statement_started = statement, time.monotonic()
            step = self.current
            if step is not None:
                step.statements += 1

    def _after(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if threading.get_ident() == self.thread:
            self.statement = None

    def finish(self, failed: bool = False) -> None:
        """End the running step; *failed*: the command stopped with an error inside it."""
        with self._lock:
            if self.steps and self.steps[-1].finished is None:
                self.steps[-1].finished = time.monotonic()
                self.steps[-1].failed = failed


class _AlembicLog:
    """Stands in for ``alembic.runtime.migration.log`` while a command is watched: alembic calls
    ``log.info("Running %s", step)`` before each revision, whatever logging the project configured
    (env.py's ``fileConfig`` resets the levels and handlers of alembic's loggers, so a handler or a
    level of ours would not survive it).  Everything is passed on to the real logger unchanged."""

    def __init__(self, real: logging.Logger):
        self._real = real

    def info(self, msg, *args, **kwargs):
        if isinstance(msg, str) and msg.startswith("Running ") and args:
            current = active()
            if current is not None:
                current.step_started(str(args[0]))
        return self._real.info(msg, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


_active = threading.local()
_installed = {"count": 0, "real": None}
_install_lock = threading.Lock()


def _install() -> None:
    from alembic.runtime import migration

    with _install_lock:
        if _installed["count"] == 0:
            _installed["real"] = migration.log
            migration.log = _AlembicLog(migration.log)
        _installed["count"] += 1


def _uninstall() -> None:
    from alembic.runtime import migration

    with _install_lock:
        _installed["count"] -= 1
        if _installed["count"] == 0:
            migration.log = _installed["real"]


@contextmanager
def watch() -> Iterator[Watch]:
    """Follow the calling thread's migrations (nested calls share the outer watch)."""
    existing = getattr(_active, "watch", None)
    if existing is not None:
        yield existing
        return
    current = Watch()
    _install()
    event.listen(Engine, "before_cursor_execute", current._before)
    event.listen(Engine, "after_cursor_execute", current._after)
    _active.watch = current
    failed = True
    try:
        yield current
        failed = False
    finally:
        current.finish(failed=failed)
        _active.watch = None
        event.remove(Engine, "before_cursor_execute", current._before)
        event.remove(Engine, "after_cursor_execute", current._after)
        _uninstall()


def active() -> Watch | None:
    """The calling thread's watch, if a command is being watched."""
    return getattr(_active, "watch", None)


def note(text: str) -> None:
    """A milestone of a long command ("phase expand: release-N code running"), shown by the
    progress reporter if the command is watched; nothing otherwise."""
    current = active()
    if current is not None:
        with current._lock:
            current.notes.append(text)


# -- printing ----------------------------------------------------------------------------
class _Reporter:
    def __init__(self, current: Watch, mode: str, stream: TextIO, interval: float, label: str):
        self.watch, self.mode, self.stream, self.interval, self.label = current, mode, stream, interval, label
        self._stop = threading.Event()
        self._reported = 0  # steps whose end was printed
        self._started_shown: set[int] = set()
        self._width = 0
        self._thread = threading.Thread(target=self._loop, name="migrations_policy-progress", daemon=True)

    def _write(self, line: str) -> None:
        try:
            if self.mode == "live":  # one terminal row: a wrapped line could not be rewritten by "\r"
                line = line[: max(shutil.get_terminal_size().columns - 1, 20)]
                self.stream.write("\r" + line.ljust(self._width))
                self._width = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the stream went away: progress is best effort
            self._stop.set()

    def _loop(self) -> None:
        last_line = time.monotonic()
        tick = min(self.interval, 0.2)
        while not self._stop.wait(tick):
            self._report_steps()
            now = time.monotonic()
            if self.mode == "live" or now - last_line >= self.interval:
                step = self.watch.current
                if step is not None:
                    self._write(self._still_running(step, now))
                last_line = now

    def _still_running(self, step: Step, now: float) -> str:
        line = f"{self.label}: still running {step.revision} ({step.seconds:,.1f} s"
        statement = self.watch.statement
        if statement:
            line += f"; statement {now - self.watch.statement_started:,.1f} s: {one_line(statement)}"
        return line + ")"

    def _report_steps(self) -> None:
        with self.watch._lock:
            notes, self.watch.notes = self.watch.notes, []
        for text in notes:
            if self.mode == "line":
                self._write(f"{self.label}: {text}")
        steps = list(self.watch.steps)
        for index, step in enumerate(steps):
            if index not in self._started_shown and self.mode == "line":
                self._started_shown.add(index)
                self._write(f"{self.label}: running {step.revision}")
            if index >= self._reported and step.finished is not None:
                self._reported = index + 1
                if self.mode == "line":
                    ended = (f"stopped with an error in {step.revision} after" if step.failed
                             else f"ran {step.revision} in")
                    self._write(f"{self.label}: {ended} {step.seconds:,.2f} s ({step.statements:,} statement(s))")

    def __enter__(self) -> "_Reporter":
        self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.watch.finish(failed=exc_type is not None)
        self._report_steps()
        if self.mode == "live" and self._width:
            self._write("")
            self.stream.write("\r")


@contextmanager
def reporting(mode: str, stream: TextIO, interval: float = DEFAULT_INTERVAL, label: str = "upgrade") -> Iterator[None]:
    """Watch the calling thread's migrations and print progress on *stream* (see the module doc)."""
    mode = resolve_mode(mode, stream)
    with watch() as current:
        if mode == "none":
            yield
            return
        with _Reporter(current, mode, stream, interval, label):
            yield
