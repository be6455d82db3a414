"""Run a revision's ``upgrade()`` or ``downgrade()`` offline and keep the operations it invokes.

alembic's offline (``--sql``) mode sends nothing to the database: the operations
render SQL into a buffer we throw away.  What we keep is the list of operation
objects (``op.drop_column`` -> ``DropColumnOp``, ``op.require_data_migrations`` ->
``RequireDataMigrationsOp``, and the ops inside ``batch_alter_table``), captured at
``AbstractOperations.invoke`` (batch ops too), and every statement the script executes
without an operation (``op.get_bind().execute(...)``, the context's connection: alembic
renders them to the same output) as the ``ExecuteSQLOp`` it amounts to: what is read is
what the SQL would run, not only what the script asked alembic's operations for.  The gate uses it to see every requirement a stamped revision
declares, however it was called; ``dbsync rollback`` to see what a downgrade drops.
"""

from __future__ import annotations

import io
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from migrations_policy.core.project_code import first_line, what

__all__ = ["RebuiltTable", "dropping_operations", "first_line", "record_operations"]


def _not_static_sql(record: logging.LogRecord) -> bool:
    return record.msg != "Generating static SQL"


@contextmanager
def quiet_offline() -> Iterator[None]:
    """An offline ``MigrationContext`` made while this is in force does not log alembic's
    "Generating static SQL": our offline reads of a script (during a live ``alembic upgrade
    heads``, say) are not the ``--sql`` run that line announces."""
    logger = logging.getLogger("alembic.runtime.migration")
    logger.addFilter(_not_static_sql)
    try:
        yield
    finally:
        logger.removeFilter(_not_static_sql)


@dataclass(frozen=True)
class RebuiltTable:
    """Recorded, without *flush_batches*, for a ``batch_alter_table(..., recreate="always")`` block:
    the table will be copied, dropped and renamed (its triggers go with it)."""

    table: str


#: In a MigrationContext's ``opts``: the script is being read (what it does, how many statements
#: its online run issues), not rendered as ``--sql`` for a database to run.  An operation whose
#: offline SQL differs from its online statements (a check only ``--sql`` needs) reads as online.
READING = "migrations_policy_reading"


def record_operations(fn: Callable[[], Any], dialect: Any,
                      on_statement: Callable[[Any], None] | None = None,
                      flush_batches: bool = True) -> tuple[list[Any], str | None]:
    """Call *fn* (a revision's ``upgrade`` or ``downgrade``) against an offline context for
    *dialect* (a name or a SQLAlchemy dialect); return the operations it invoked and why it
    stopped early (None: it ran to the end).  *on_statement* receives each statement construct
    instead of its rendering (the journal counts a revision's statements so).  Without
    *flush_batches* a ``batch_alter_table`` block only records its operations, and a
    ``RebuiltTable`` when it re-creates its table whatever the dialect (SQLite's rebuild would
    need a live database to reflect the table; a reader of the operations needs no SQL)."""
    from alembic import op as op_module
    from alembic.operations import Operations
    from alembic.operations.base import AbstractOperations
    from alembic.operations.batch import BatchOperationsImpl
    from alembic.runtime.migration import MigrationContext

    opts = {"as_sql": True, "output_buffer": io.StringIO(), "literal_binds": on_statement is None, READING: True}
    with quiet_offline():
        context = (MigrationContext.configure(dialect_name=dialect, opts=opts) if isinstance(dialect, str)
                   else MigrationContext.configure(dialect=dialect, opts=opts))
    rendered = context.impl._exec if on_statement is None else \
        (lambda construct, *args, **kwargs: on_statement(construct))
    recorded: list[Any] = []
    inside = [0]  # operations being invoked (their own statements are theirs)
    original_invoke = AbstractOperations.invoke  # Operations and BatchOperations both inherit it

    def invoke(self: Any, operation: Any) -> Any:
        recorded.append(operation)
        inside[0] += 1
        try:
            return original_invoke(self, operation)
        finally:
            inside[0] -= 1

    def execute(construct: Any, *args: Any, **kwargs: Any) -> Any:
        # Every statement reaches the output here, however the script issued it; one no operation
        # issued (``op.get_bind().execute(...)``, the context's connection, ``impl.execute``) is
        # recorded as the ``op.execute`` it amounts to: a reader of the operations sees what runs.
        if not inside[0]:
            recorded.append(_executed(construct, context))
        return rendered(construct, *args, **kwargs)

    context.impl._exec = execute

    previous = getattr(op_module, "_proxy", None)
    operations = Operations(context)
    original_flush = BatchOperationsImpl.flush
    AbstractOperations.invoke = invoke  # type: ignore[method-assign]
    if not flush_batches:
        def flush(self: Any) -> None:  # record only: a rebuild is announced, not rendered
            if self.recreate == "always":
                recorded.append(RebuiltTable(self.table_name))

        BatchOperationsImpl.flush = flush  # type: ignore[method-assign]
    operations._install_proxy()
    try:
        fn()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the project's script, run where it was not written to run (sys.exit too)
        return recorded, what(exc)
    finally:
        AbstractOperations.invoke = original_invoke  # type: ignore[method-assign]
        BatchOperationsImpl.flush = original_flush  # type: ignore[method-assign]
        operations._remove_proxy()
        if previous is not None:
            previous._install_proxy()
    return recorded, None


def _executed(construct: Any, context: Any) -> Any:
    """An ``ExecuteSQLOp`` of a statement executed outside any operation, with its SQL as text."""
    from alembic.operations import ops

    from migrations_policy.core.sqltext import statement_text

    return ops.ExecuteSQLOp(statement_text(construct, context))


def dropping_operations(fn: Callable[[], Any], dialect_name: str) -> tuple[list[Any], str | None]:
    """``record_operations`` for reading what *fn* drops: a ``batch_alter_table`` block only
    records its operations (its rebuild needs a live table to reflect, or ``copy_from``: offline
    it would stop the run there, and the operations after it, an ``op.drop_sync_trigger`` say,
    would go unseen); on the database's dialect, else as PostgreSQL would run it."""
    recorded, problem = record_operations(fn, dialect_name, flush_batches=False)
    if problem and dialect_name != "postgresql":
        recorded, problem = record_operations(fn, "postgresql", flush_batches=False)
    return recorded, problem
