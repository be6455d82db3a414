"""``Recording``: the operations recorded from one run of ``upgrade()``, each with its line in the script.

Filled by ``lint.offline.recorder`` (alembic's ops as a script runs) and by ``lint.static`` (a plain script read
without running it): one place decides the flags an operation gets (``in_batch``, ``autocommit``), how a
name that is not a string is read, and when a batch block recreates its table.  Imports neither alembic nor
SQLAlchemy.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from migrations_policy.policy import model as m
from migrations_policy.policy import sqlite as sqlite_policy


@dataclass
class Recording:
    """Operations recorded from one run of ``upgrade()``, each with its line in the script."""

    filename: str
    ops: list[tuple[m.Operation, int]] = field(default_factory=list)
    autocommit: int = 0
    #: The line where the script first inspected the (offline, empty) database; 0: it did not.
    inspected: int = 0
    #: The line where the script first asked ``context.is_offline_mode()`` (offline: only that path ran); 0: never.
    mode_asked: int = 0
    #: > 0 while alembic itself executes an op (online mode): its SQL is not a raw statement.
    executing: int = 0
    #: Whether the run asked for the bind or the migration context (whose dialect differs per dialect linted),
    #: from the script or a helper it calls: then each dialect is recorded on its own.
    dialect_asked: bool = False
    #: (what, line) of each call of an operation the linter does not know (what: ``op.NAME()`` and why).
    unknown: list[tuple[str, int]] = field(default_factory=list)
    #: The line of the statement the source reader (``lint.offline.astscan``) is at, for what it calls from
    #: no frame of the script (a ``with`` block's context manager, entered and exited by the reader); 0: none.
    at: int = 0
    _batch: list[m.Operation] | None = None

    def line(self) -> int:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return frame.f_lineno
            frame = frame.f_back
        return self.at

    def add(self, operations: list[m.Operation], line: int | None = None) -> None:
        line = self.line() if line is None else line
        flags = {}
        if self.autocommit:
            flags["autocommit"] = True
        if self._batch is not None:
            flags["in_batch"] = True
        for op in operations:
            changes = dict(flags)
            for name in _NAMES:  # no placeholder object ever reaches the policy or a message
                value = getattr(op, name)
                if value is not None and not isinstance(value, str):
                    changes[name] = _name(value)
            op = op.with_(**changes) if changes else op
            self.ops.append((op, line))
            if self._batch is not None:
                self._batch.append(op)

    def add_alembic(self, operation: Any) -> None:
        from migrations_policy.policy.alembic_ops import from_alembic  # (imports alembic: the recorder's only)

        self.add(from_alembic(operation))

    @contextmanager
    def batch(self, table: str, recreate: str, line: int) -> Iterator[None]:
        outer, self._batch = self._batch, []
        try:
            yield
        finally:
            inner, self._batch = self._batch, outer
        if recreate == "always" or (recreate == "auto" and sqlite_policy.batch_needs_recreate(inner)):
            self.add([m.Operation(kind=m.BATCH_RECREATE, table=table, value=recreate)], line=line)

    @contextmanager
    def _counting(self, attribute: str) -> Iterator[None]:
        setattr(self, attribute, getattr(self, attribute) + 1)
        try:
            yield
        finally:
            setattr(self, attribute, getattr(self, attribute) - 1)

    def autocommit_block(self):
        """Operations recorded inside are flagged ``autocommit``."""
        return self._counting("autocommit")

    def running_alembic(self):
        """Statements executed inside are alembic's own SQL, not raw statements (online mode)."""
        return self._counting("executing")


_NAMES = ("table", "column", "name")


def _name(value: Any) -> str | None:
    """A name the script passed as something else than a string: a named SQLAlchemy object's name, else unknown."""
    named = getattr(value, "name", None) if not isinstance(value, type) else None
    return str(named) if isinstance(named, str) else None
