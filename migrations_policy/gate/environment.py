"""What a project's alembic ``env.py`` wires in (the expand_contract template does it).

``env.py`` stays explicit, as alembic users expect; it only adds::

    from migrations_policy import environment as policy

    context.configure(connection=connection, target_metadata=target_metadata,
                      **policy.configure_options(context))
    with context.begin_transaction():
        context.run_migrations()

``configure_options`` returns the keyword arguments for ``context.configure``:

* ``include_object``: hides the framework's own tables (``migrations_policy_*``)
  from autogenerate, chaining to a project's own ``include_object``;
* ``transaction_per_migration=True``: nothing half-applied across revisions.

* ``runtime.guard_options``: the contract gate and lock timeouts, checked
  before alembic runs the first step, and the phase of each applied revision
  recorded (``on_version_apply``).

* ``authoring.hooks.autogenerate_options``: the autogenerate split into expand
  and contract scripts (``process_revision_directives``) and the
  ``migrations_policy.object_versions`` comparator (``autogenerate_plugins``).
"""

from __future__ import annotations

from typing import Any, Callable

from migrations_policy.gate import failsafe, operations  # noqa: F401  (operations registers op.require_data_migrations)
from migrations_policy.authoring.hooks import autogenerate_options  # the autogenerate split and comparators
from migrations_policy.core.framework_tables import TABLE_PREFIX, is_framework_table  # noqa: F401  (re-exported)
from migrations_policy.gate.hook.runtime import guard_options  # the gate and lock timeouts


def make_include_object(project_include_object: Callable[..., bool] | None = None) -> Callable[..., bool]:
    """An ``include_object`` that hides framework tables, then asks the project's own."""

    def include_object(obj, name, type_, reflected, compare_to) -> bool:
        table_name = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
        if is_framework_table(table_name):
            return False
        if project_include_object is not None:
            return project_include_object(obj, name, type_, reflected, compare_to)
        return True

    return include_object


def configure_options(
    context: Any,
    include_object: Callable[..., bool] | None = None,
    process_revision_directives: Callable[..., None] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``context.configure`` in a project's env.py.

    A project's own ``include_object`` / ``process_revision_directives`` are
    chained: pass them here rather than to ``context.configure``.
    """
    failsafe.install()  # also where the alembic plugin is not installed (a source checkout)
    return {
        "include_object": make_include_object(include_object),
        "transaction_per_migration": True,
        **autogenerate_options(context, process_revision_directives),
        **guard_options(context),
    }
