"""``op.require_data_migrations(...)``: a contract revision names the data migrations it needs.

Importing this module registers the operation with alembic (the env.py hook and
the alembic plugin import it).  It is the in-script form of the module
attribute ``requires_data_migrations``; the contract gate reads both before any
revision runs (``gate.requirements.requirements_of`` evaluates the call's arguments in the
module's namespace).  When the operation itself runs:

* offline (``--sql``): it writes the requirement as an SQL comment;
* online: it checks the live remaining counts itself and refuses, unless the gate
  judged exactly these names before this run's first statement (a stock env.py,
  an aliased call the source scan could not see: checked here), so the
  revision's DDL after it never runs while its data is unmigrated.
"""

from __future__ import annotations

from alembic.operations import Operations

from migrations_policy.gate.requirement_op import RequireDataMigrationsOp


Operations.register_operation("require_data_migrations")(RequireDataMigrationsOp)


@Operations.implementation_for(RequireDataMigrationsOp)
def _require_data_migrations(operations: Operations, operation: RequireDataMigrationsOp) -> None:
    ctx = operations.migration_context
    names = ", ".join(operation.names)
    if ctx.as_sql:
        ctx.impl.static_output(f"-- migrations_policy: requires data migrations {names} to be complete "
                               "(NOT CHECKED in offline mode)")
        return
    _check_now(ctx, ctx.environment_context, operation.names)


def _check_now(ctx, environment, names: tuple[str, ...]) -> None:
    """Judge the requirement here, before the rest of this revision's DDL (a run forced past
    the gate, recorded by the env.py hook, is not refused again)."""
    from migrations_policy.gate.verdict import GateRefused, GateVerdict, unfinished
    from migrations_policy.gate.hook.runtime import (JUDGED_ATTRIBUTE,
        force_reason,
        how_to_finish,
        load_registry,
        project_settings)

    config = environment.config if environment is not None else None
    if environment is not None and force_reason(environment) is not None:
        return
    if config is not None and set(names) <= config.attributes.get(JUDGED_ATTRIBUTE, frozenset()):
        return  # the gate judged exactly these before the run's first statement
    registry = load_registry(config, project_settings(config))
    script_dir = getattr(getattr(environment, "script", None), "dir", None)
    verdict = GateVerdict(pending=unfinished(ctx.connection, registry, {n: ["this revision"] for n in names},
                                             script_dir=script_dir))
    if not verdict.allowed:
        raise GateRefused(verdict, how_to_finish(config))
