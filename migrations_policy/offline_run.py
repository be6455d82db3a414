"""Run a revision's ``upgrade()`` or ``downgrade()`` offline and keep the operations it invokes.

alembic's offline (``--sql``) mode sends nothing to the database: the operations
render SQL into a buffer we throw away.  What we keep is the list of operation
objects (``op.drop_column`` -> ``DropColumnOp``, ``op.require_data_migrations`` ->
``RequireDataMigrationsOp``, and the ops inside ``batch_alter_table``), captured at
``Operations.invoke``.  The gate uses it to see every requirement a stamped revision
declares, however it was called; ``dbsync rollback`` to see what a downgrade drops.
"""

from __future__ import annotations

import io
from typing import Any, Callable


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (also for one whose ``__str__`` raises)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return (text.strip().splitlines() or [""])[0][:200]


def record_operations(fn: Callable[[], Any], dialect_name: str) -> tuple[list[Any], str | None]:
    """Call *fn* (a revision's ``upgrade`` or ``downgrade``) against an offline *dialect_name*
    context; return the operations it invoked and why it stopped early (None: it ran to the end)."""
    from alembic import op as op_module
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(dialect_name=dialect_name, opts={
        "as_sql": True, "output_buffer": io.StringIO(), "literal_binds": True})
    recorded: list[Any] = []
    original_invoke = Operations.invoke

    def invoke(self: Any, operation: Any) -> Any:
        recorded.append(operation)
        return original_invoke(self, operation)

    previous = getattr(op_module, "_proxy", None)
    operations = Operations(context)
    Operations.invoke = invoke  # type: ignore[method-assign]  (BatchOperations inherits it)
    operations._install_proxy()
    try:
        fn()
    except Exception as exc:  # the project's script, run where it was not written to run
        return recorded, f"{type(exc).__name__}: {first_line(exc)}"
    finally:
        Operations.invoke = original_invoke  # type: ignore[method-assign]
        operations._remove_proxy()
        if previous is not None:
            previous._install_proxy()
    return recorded, None
