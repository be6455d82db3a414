"""What happens when alembic runs migrations through a project's env.py.

``environment.configure_options(context)`` adds ``guard_options(context)``:
it wraps the list of steps alembic is about to run (the ``fn`` alembic's
commands hand to the migration context), so that before the first step:

1. the contract gate judges the revisions this run will apply (``gate.py``) and
   refuses before any DDL — for ``dbsync upgrade`` and plain
   ``alembic upgrade heads`` alike; in offline ``--sql`` mode it writes the
   requirements as SQL comments and warns that it could not check them;
2. the session gets a bounded lock timeout and every statement is retried with
   backoff when it times out on a lock (``lock_timeout.py``), and each statement
   of a revision is journaled so that an interrupted one resumes (``journal.py``);
3. an ``on_version_apply`` callback records each applied revision's phase in
   ``migrations_policy_revisions``, so ``assert_schema_compatible`` can tell an
   unknown expand revision (fine for older code) from an unknown contract one.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable

import sqlalchemy as sa
from alembic.runtime.migration import RevisionStep

from . import gate, journal, lock_timeout
from .config import Settings, load_settings
from .environment import TABLE_PREFIX
from .operations import GATE_CHECKED_ATTRIBUTE
from .revisions import CONTRACT, phase_of

log = logging.getLogger(__name__)

#: ``config.attributes`` keys dbsync sets for one run.
FORCE_ATTRIBUTE = "migrations_policy.force"
STATS_ATTRIBUTE = "migrations_policy.lock_stats"
#: ``alembic -x migrations_policy_force=REASON upgrade ...`` for plain alembic.
FORCE_X_ARGUMENT = "migrations_policy_force"

REVISIONS_TABLE = f"{TABLE_PREFIX}revisions"
_metadata = sa.MetaData()
revisions_table = sa.Table(
    REVISIONS_TABLE, _metadata,
    sa.Column("revision", sa.String(255), primary_key=True),
    sa.Column("phase", sa.String(16), nullable=True),
)


def project_settings(config: Any) -> Settings:
    """Settings of the project whose alembic config is *config*."""
    ini = getattr(config, "config_file_name", None)
    root = os.path.dirname(os.path.abspath(ini)) if ini else "."
    return load_settings(root, alembic_ini=ini)


def load_registry(config: Any, settings: Settings) -> Any:
    """The project's data migrations (imported lazily: only a contract run needs them)."""
    from .data.discovery import load_registry as _load

    return _load(settings, config.get_prepend_sys_paths_list())


def _force_reason(context: Any) -> str | None:
    forced = context.config.attributes.get(FORCE_ATTRIBUTE)
    if forced:
        return forced if isinstance(forced, str) else "dbsync --force"
    x_args = context.get_x_argument(as_dictionary=True)
    if FORCE_X_ARGUMENT in x_args:
        return x_args[FORCE_X_ARGUMENT] or f"alembic -x {FORCE_X_ARGUMENT}"
    return None


def how_to_finish(config: Any) -> str:
    """The exact commands that get past the gate, for its refusal message."""
    ini = getattr(config, "config_file_name", None) or "alembic.ini"
    dbsync = f"dbsync -c {ini}"
    return (f"Finish them with: {dbsync} online_data_migrations   (repeat until it exits 0; "
            f"`{dbsync} status` shows progress), then rerun: {dbsync} upgrade --contract. "
            "To override (recorded in the ledger): dbsync upgrade --contract --force")


def _annotate_offline(migration_context: Any, revisions: list) -> None:
    needs = [(rev.revision, gate.requirements_of(rev)) for rev in revisions if phase_of(rev) == CONTRACT]
    needs = [(rev, names) for rev, names in needs if names]
    for rev, names in needs:
        migration_context.impl.static_output(
            f"-- migrations_policy: contract revision {rev} requires data migrations {', '.join(names)} "
            "to be complete. NOT CHECKED: offline (--sql) mode cannot see the database.")
    if needs:
        print("WARNING: migrations_policy could not check the contract gate in offline (--sql) mode; "
              "its requirements are written as comments in the SQL", file=sys.stderr)


def _guard(context: Any, original: Callable) -> Callable:
    def steps_after_checks(heads, migration_context):
        context.config.attributes[GATE_CHECKED_ATTRIBUTE] = False
        steps = list(original(heads, migration_context))
        upgrades = [s.revision for s in steps if isinstance(s, RevisionStep) and s.is_upgrade]
        if not upgrades:
            return steps
        if migration_context.as_sql:
            _annotate_offline(migration_context, upgrades)
            return steps
        connection = migration_context.connection
        settings = project_settings(context.config)
        contract = [r for r in upgrades if phase_of(r) == CONTRACT]
        if contract:
            verdict = gate.evaluate(connection, migration_context.script, upgrades, heads,
                                    load_registry(context.config, settings))
            if not verdict.allowed:
                reason = _force_reason(context)
                if reason is None:
                    if connection.in_transaction():
                        connection.rollback()
                    raise gate.GateRefused(verdict, how_to_finish(context.config))
                gate.record_force(connection, verdict, reason)
        context.config.attributes[GATE_CHECKED_ATTRIBUTE] = True
        revisions_table.create(connection, checkfirst=True)
        lock_timeout.set_session_lock_timeout(connection, settings.lock_timeout)
        if connection.in_transaction():
            connection.commit()
        context.config.attributes[STATS_ATTRIBUTE] = lock_timeout.install_statement_retries(
            migration_context, settings.lock_retries)
        return journal.install(migration_context, steps,  # resumable revisions (journal.py)
                               context.config.attributes[STATS_ATTRIBUTE])

    return steps_after_checks


def _record_phase(ctx, step, heads, run_args) -> None:
    """on_version_apply: keep ``migrations_policy_revisions`` in step with the version table."""
    if ctx.as_sql or ctx.connection is None or not sa.inspect(ctx.connection).has_table(REVISIONS_TABLE):
        return
    script = ctx.script
    ids = step.up_revision_ids if step.is_upgrade else (step.up_revision_id,)
    ids = [i for i in ids if i]
    if not ids:
        return
    ctx.connection.execute(sa.delete(revisions_table).where(revisions_table.c.revision.in_(ids)))
    if step.is_upgrade:
        ctx.connection.execute(sa.insert(revisions_table), [
            {"revision": i, "phase": phase_of(script.get_revision(i))} for i in ids])


def guard_options(context: Any) -> dict[str, Any]:
    """``context.configure`` options that put the gate, lock timeouts and phase records in place."""
    # env.py passes the ``alembic.context`` module proxy; its ``_proxy`` is the EnvironmentContext.
    environment = getattr(context, "_proxy", None) or context
    original = environment.context_opts.get("fn")
    options: dict[str, Any] = {"on_version_apply": (_record_phase, journal.forget_versioned)}
    if original is not None:
        options["fn"] = _guard(context, original)
    return options
