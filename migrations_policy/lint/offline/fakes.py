"""What a script finds when the linter runs its ``upgrade()`` offline, as close to a real run as offline allows.

* ``OfflineBind``: what ``op.get_bind()`` returns.  It records what is executed
  through it (like alembic's offline ``MockConnection``), and also has a dialect,
  a URL without credentials (``postgresql://offline``), ``begin()`` /
  ``begin_nested()`` / ``commit()`` / ``rollback()`` / ``close()`` that do nothing,
  and can be inspected: ``sa.inspect(bind)`` is an ``OfflineInspector`` that
  answers as an empty database would (no tables, no columns, no indexes) and notes
  that it was asked (the engine says so in ``MP001``).  Rows (``.scalar()``,
  ``.fetchall()``) and anything else an inspector does raise ``OfflineResultError``:
  a limitation of offline linting, never a bug of the script.
* ``call_upgrade(upgrade, op)``: calls ``upgrade`` as a framework would: a required
  parameter named ``op`` / ``operations`` gets alembic's ``op``, ``tables`` a
  namespace of empty ``sa.Table`` objects named by the attribute, any other a
  ``Harmless`` object; an ``upgrade`` written as a generator is run to its end,
  a coroutine is run to completion.
* ``Harmless``: accepts every attribute, call, item and iteration (empty, falsy) and
  prints as the expression that made it (``tester.populate_column(...)``), never as
  ``<object at 0x...>``.
"""

from __future__ import annotations

import inspect as _inspect
from typing import Any, Callable

from sqlalchemy import MetaData, Table, inspection, text
from sqlalchemy.engine import URL
from sqlalchemy.engine.mock import MockConnection


class OfflineResultError(RuntimeError):
    """A script used what only a live database can answer (rows, some reflection)."""


class _OfflineResult:
    """What ``bind.execute()`` returns offline: any use of it is an offline limitation."""

    def __getattr__(self, name: str):
        raise OfflineResultError(f"the result of bind.execute() (.{name}) is not available offline")

    def __iter__(self):
        raise OfflineResultError("the rows of bind.execute() are not available offline")


OFFLINE_RESULT = _OfflineResult()


class _Transaction:
    """``bind.begin()`` offline: a context manager whose commit and rollback do nothing."""

    is_active = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def commit(self) -> None:
        pass

    rollback = close = commit


class OfflineBind(MockConnection):
    """``op.get_bind()`` offline (see the module docstring)."""

    closed = invalidated = False

    def __init__(self, dialect, execute: Callable, on_inspect: Callable[[], None], strict: bool = False):
        super().__init__(dialect, execute)
        self._on_inspect = on_inspect
        #: Read from the source: what the database would answer is unknown (its dialect is known).
        self._strict = strict
        self.info: dict = {}

    @property
    def url(self) -> URL:
        return URL.create(self.dialect.name, host="offline")

    @property
    def connection(self) -> "OfflineBind":
        return self

    def begin(self) -> _Transaction:
        return _Transaction()

    begin_nested = begin_twophase = begin

    def in_transaction(self) -> bool:
        return True

    def commit(self) -> None:
        pass

    rollback = close = dispose = invalidate = commit

    def exec_driver_sql(self, statement: str, parameters=None, execution_options=None):
        return self.execute(text(statement))

    def scalar(self, *args, **kwargs):
        raise OfflineResultError("bind.scalar() needs a database")

    scalars = scalar


class OfflineInspector:
    """``sa.inspect(op.get_bind())`` offline: an empty database."""

    def __init__(self, bind: OfflineBind):
        self.bind = self.engine = bind
        self.dialect = bind.dialect
        self.default_schema_name = None
        bind._on_inspect()

    def _asked(self, name: str) -> None:
        if self.bind._strict:  # the inspector's dialect is known (a dialect guard reads it), the answers are not
            raise OfflineResultError(f"inspector.{name}() needs a database")

    def get_pk_constraint(self, *args, **kwargs) -> dict:
        self._asked("get_pk_constraint")
        return {"constrained_columns": [], "name": None}

    def get_table_options(self, *args, **kwargs) -> dict:
        self._asked("get_table_options")
        return {}

    def get_table_comment(self, *args, **kwargs) -> dict:
        self._asked("get_table_comment")
        return {"text": None}

    def clear_cache(self) -> None:
        pass

    def __getattr__(self, name: str):
        if name.startswith("get_") and not name.startswith("get_multi"):
            self._asked(name)
            return lambda *args, **kwargs: []
        if name.startswith("has_"):
            self._asked(name)
            return lambda *args, **kwargs: False
        raise OfflineResultError(f"inspector.{name}() needs a database")


inspection._inspects(OfflineBind)(OfflineInspector)


class Harmless:
    """An argument a framework would pass (see the module docstring)."""

    def __init__(self, expression: str):
        object.__setattr__(self, "_expression", expression)

    def __getattr__(self, name: str) -> "Harmless":
        if name.startswith("__"):
            raise AttributeError(name)
        return Harmless(f"{self._expression}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __call__(self, *args, **kwargs) -> "Harmless":
        return Harmless(f"{self._expression}(...)")

    def __getitem__(self, key) -> "Harmless":
        return Harmless(f"{self._expression}[...]")

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __enter__(self) -> "Harmless":
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __repr__(self) -> str:
        return self._expression

    __str__ = __repr__


class _Tables:
    """``tables`` as quay-style frameworks pass it: ``tables.users`` is a table named ``users``."""

    def __init__(self):
        self._metadata = MetaData()

    def __getattr__(self, name: str) -> Table:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._metadata.tables.get(name) or Table(name, self._metadata)

    def __getitem__(self, name: str) -> Table:
        return self.__getattr__(str(name))


_OP_NAMES = frozenset({"op", "operations", "ops"})


def argument(name: str, op: Any) -> Any:
    if name in _OP_NAMES:
        return op
    if name == "tables":
        return _Tables()
    return Harmless(name)


def call_upgrade(upgrade: Callable, op: Any) -> None:
    """Call *upgrade* with what a framework would pass, and run it to its end (see the module docstring)."""
    args, kwargs = [], {}
    try:
        parameters = _inspect.signature(upgrade).parameters.values()
    except (TypeError, ValueError):
        parameters = ()
    for parameter in parameters:
        if parameter.default is not parameter.empty or parameter.kind in (parameter.VAR_POSITIONAL,
                                                                          parameter.VAR_KEYWORD):
            continue
        value = argument(parameter.name, op)
        if parameter.kind == parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    result = upgrade(*args, **kwargs)
    if _inspect.isgenerator(result):
        for _ in result:
            pass
    elif _inspect.iscoroutine(result):
        import asyncio

        asyncio.run(result)
