"""``op.require_data_migrations(...)``: a contract revision names the data migrations it needs.

Importing this module registers the operation with alembic (the env.py hook and
the alembic plugin import it).  It is the in-script form of the module
attribute ``requires_data_migrations``; both are read by the contract gate
*before* any revision runs (``runtime.py``).  When the operation itself runs:

* offline (``--sql``): it writes the requirement as an SQL comment;
* online, after the gate already judged this run: nothing;
* online without the env.py hook (a stock env.py): it checks the live
  remaining counts itself and refuses, so the revision's own DDL never runs
  while its data is unmigrated.
"""

from __future__ import annotations

from alembic.operations import MigrateOperation, Operations

#: ``config.attributes`` key the env.py hook sets once the gate has judged the run.
GATE_CHECKED_ATTRIBUTE = "migrations_policy.gate_checked"


@Operations.register_operation("require_data_migrations")
class RequireDataMigrationsOp(MigrateOperation):
    """Declare that this (contract) revision needs the named data migrations complete."""

    def __init__(self, *names: str) -> None:
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError("require_data_migrations() takes one or more data migration names")
        self.names = names

    @classmethod
    def require_data_migrations(cls, operations: Operations, *names: str) -> None:
        """``op.require_data_migrations("nodes_extra_to_meta", ...)``"""
        return operations.invoke(cls(*names))

    def reverse(self) -> "RequireDataMigrationsOp":
        return RequireDataMigrationsOp(*self.names)


@Operations.implementation_for(RequireDataMigrationsOp)
def _require_data_migrations(operations: Operations, operation: RequireDataMigrationsOp) -> None:
    ctx = operations.migration_context
    names = ", ".join(operation.names)
    if ctx.as_sql:
        ctx.impl.static_output(f"-- migrations_policy: requires data migrations {names} to be complete "
                               "(NOT CHECKED in offline mode)")
        return
    environment = ctx.environment_context
    config = environment.config if environment is not None else None
    if config is not None and config.attributes.get(GATE_CHECKED_ATTRIBUTE):
        return
    _check_now(ctx, config, operation.names)


def _check_now(ctx, config, names: tuple[str, ...]) -> None:
    """No env.py hook ran: judge the requirement here, before this revision's DDL."""
    from .gate import GateRefused, GateVerdict, unfinished
    from .runtime import how_to_finish, load_registry, project_settings

    registry = load_registry(config, project_settings(config))
    verdict = GateVerdict(pending=unfinished(ctx.connection, registry, {n: ["this revision"] for n in names}))
    if not verdict.allowed:
        raise GateRefused(verdict, how_to_finish(config))
