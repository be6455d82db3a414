"""Run a revision's ``upgrade()`` statement by statement on our connection, observing each statement.

``run_revision`` configures an alembic ``MigrationContext`` on the connection and
wraps its ``impl._exec`` (as ``lock_timeout`` does; alembic has no public
per-statement hook): every statement goes through ``observe(sql_text, execute)``,
which decides whether and how to run it.  ``autocommit_block()`` (CONCURRENTLY)
would commit the trace's transaction, so inside it statements are handed to
``observe`` with ``autocommit=True`` and must not be executed in a transaction.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from alembic.migration import MigrationContext
from alembic.operations import Operations
from alembic.script import Script
from sqlalchemy.engine import Connection

from migrations_policy.core.sqltext import statement_text

#: observe(sql_text, execute, autocommit) -> result of execute() or None when not run.
Observer = Callable[[str, Callable[[], Any], bool], Any]


def run_revision(connection: Connection, revision: Script, observe: Observer) -> None:
    """Call *revision*'s ``upgrade()`` with every statement going through *observe*."""
    context = MigrationContext.configure(connection)
    impl = context.impl
    original = impl._exec
    state = {"autocommit": False}

    def exec_(construct: Any, *args: Any, **kwargs: Any) -> Any:
        return observe(statement_text(construct, connection), lambda: original(construct, *args, **kwargs),
                       state["autocommit"])

    @contextmanager
    def autocommit_block() -> Iterator[None]:
        state["autocommit"] = True
        try:
            yield
        finally:
            state["autocommit"] = False

    impl._exec = exec_
    context.autocommit_block = autocommit_block  # type: ignore[method-assign]
    with Operations.context(context):
        revision.module.upgrade()
