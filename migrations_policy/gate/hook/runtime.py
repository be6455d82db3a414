"""What happens when alembic runs migrations through a project's env.py.

``environment.configure_options(context)`` adds ``guard_options(context)``:
it wraps the list of steps alembic is about to run (the ``fn`` alembic's
commands hand to the migration context), so that before the first step:

1. the contract gate (``gate.evaluate``) judges every revision this run will
   apply *or stamp* and refuses before any DDL, for ``dbsync`` and plain
   ``alembic upgrade``/``stamp`` alike; in offline ``--sql`` mode the SQL starts
   with statements that fail, when run, while a required migration is pending
   (``offline_guard.py``);
2. the session gets a bounded lock timeout and every statement is retried with
   backoff when it times out on a lock (``lock_timeout.py``), and each statement
   of a revision is journaled so that an interrupted one resumes (``journal.py``);
   on SQLite each revision is made one real transaction (``sqlite_transactions.py``);
3. an ``on_version_apply`` callback records each applied revision's phase in
   ``migrations_policy_revisions``, so ``assert_schema_compatible`` can tell an
   unknown expand revision (fine for older code) from an unknown contract one,
   and appends it to ``migrations_policy_revision_history`` (``dbsync rollback``).

Downgrades get the lock timeouts and retries too.  An env.py that does not pass these options is caught by ``failsafe.py``.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import uuid
from datetime import datetime, timezone
from typing import Any, Callable

import sqlalchemy as sa
from alembic.runtime.migration import RevisionStep, StampStep
from alembic.util import CommandError

from migrations_policy.gate.hook import downgrades

from migrations_policy.gate.drops import drop_guard

from migrations_policy.gate import releases, verdict as gate
from migrations_policy.gate.overrides import record_force
from migrations_policy.gate.requirements import requirements_of, requirements_when_run
from migrations_policy.expand import journal, lock_timeout, sql_mode, sqlite_transactions
from migrations_policy.window import sync_keeper
from migrations_policy.core.config import Settings, load_settings
from migrations_policy.core.framework_tables import REVISIONS_TABLE, revision_history_table, revisions_table  # noqa: F401
from migrations_policy.core.revisions import EXPAND, applied_revisions, phase_of

log = logging.getLogger(__name__)

#: ``config.attributes`` keys dbsync sets for one run.
FORCE_ATTRIBUTE = "migrations_policy.force"
STATS_ATTRIBUTE = "migrations_policy.lock_stats"
#: Set to True by the guard when alembic hands it the run (dbsync refuses a run where it stays False).
GUARD_RAN_ATTRIBUTE = "migrations_policy.guard_ran"
#: Set by dbsync: this run must go through the guard, whatever the project's files say.
REQUIRE_GUARD_ATTRIBUTE = "migrations_policy.require_guard"
#: The data migrations the gate judged complete (or forced) for this run: the operation
#: ``op.require_data_migrations`` checks again only names not among them.
JUDGED_ATTRIBUTE = "migrations_policy.judged_requirements"
#: Set by dbsync to the command that runs alembic ("rollback"), for the records a run writes.
COMMAND_ATTRIBUTE = "migrations_policy.command"
#: ``MigrationContext.opts`` key: (this run's id, whether it started on an empty version table).
RUN_OPTION = "migrations_policy.run"
#: Marks the step functions that are the guard (``failsafe.py`` looks for it).
GUARD_MARK = "_migrations_policy_guard"
#: ``alembic -x migrations_policy_force=REASON upgrade ...`` for plain alembic.
FORCE_X_ARGUMENT = "migrations_policy_force"


def project_settings(config: Any) -> Settings:
    """Settings of the project whose alembic config is *config*."""
    ini = getattr(config, "config_file_name", None)
    root = os.path.dirname(os.path.abspath(ini)) if ini else "."
    return load_settings(root, alembic_ini=ini)


def load_registry(config: Any, settings: Settings) -> Any:
    """The project's data migrations (imported lazily: only a contract run needs them)."""
    from migrations_policy.data.discovery import load_registry as _load

    return _load(settings, config.get_prepend_sys_paths_list())


def force_reason(context: Any) -> str | None:
    """The reason given to force this run past the gate (dbsync --force, alembic -x), or None."""
    forced = context.config.attributes.get(FORCE_ATTRIBUTE)
    if forced:
        return forced if isinstance(forced, str) else "dbsync --force"
    x_args = context.get_x_argument(as_dictionary=True)
    if FORCE_X_ARGUMENT in x_args:
        reason = (x_args[FORCE_X_ARGUMENT] or "").strip()
        if not reason:  # every override needs a reason, recorded with it
            raise CommandError(f"-x {FORCE_X_ARGUMENT}=REASON: the override needs a reason (why; it is recorded "
                               "in migrations_policy_gate_overrides); nothing was applied")
        return reason
    return None


def how_to_finish(config: Any) -> str:
    """The exact commands that get past the gate, for its refusal message."""
    ini = getattr(config, "config_file_name", None) or "alembic.ini"
    dbsync = f"dbsync -c {ini}"
    return (f"Finish them with: {dbsync} online_data_migrations   (repeat until it exits 0; exit 3 means "
            "caught up while old code still writes: stop it, then run once more; "
            f"`{dbsync} status` shows progress), then rerun: {dbsync} upgrade --contract. "
            f"To override (recorded in migrations_policy_gate_overrides): {dbsync} upgrade --contract --force "
            "--reason '...'")


def _annotate_offline(context: Any, migration_context: Any, revisions: list) -> None:
    """Offline (``--sql``): the SQL starts with statements that fail, when it is run, while a
    required data migration is pending (``offline_guard.py``)."""
    from migrations_policy.gate.hook import offline_guard

    from migrations_policy.gate.drops.drop_guard import readers

    dialect = migration_context.dialect.name
    registry = None
    required: dict[str, list[str]] = {}
    for rev in revisions:
        requirements = requirements_of(rev)
        if requirements.unresolved:
            raise gate.GateRefused(gate.GateVerdict(defects=list(requirements.unresolved)), "")
        # As the online gate sees them: calls however written (an aliased op, getattr), and the
        # migrations reading what the revision drops, declared or not.
        names = [*requirements.names, *requirements_when_run(rev, dialect)[0]]
        gone = gate.drops_of(rev, dialect)
        if gone:
            registry = registry or load_registry(context.config, project_settings(context.config))
            names += list(readers(registry, gone))
        for name in dict.fromkeys(names):
            required.setdefault(name, []).append(rev.revision)
    if not required:
        return
    registry = registry or load_registry(context.config, project_settings(context.config))
    for line in offline_guard.guard_lines(migration_context.dialect, required, registry):
        migration_context.impl.static_output(line)
    print("WARNING: migrations_policy cannot see the database in offline (--sql) mode: the SQL starts with "
          "statements that fail while a required data migration is incomplete", file=sys.stderr)


def revisions_entering(script: Any, heads: Any, steps: list) -> tuple[list, bool]:
    """The revisions *steps* will record as applied that are not applied now (oldest first),
    and whether any of them is only stamped (recorded without running)."""
    entering, stamped = [], False
    before = applied_revisions(script, heads)
    for step in steps:
        if isinstance(step, RevisionStep) and step.is_upgrade:
            entering.append(step.revision)
        elif isinstance(step, StampStep) and step.to_:
            new = applied_revisions(script, step.to_) - before
            if new:
                stamped = True
                entering.extend(rev for rev in reversed(list(script.walk_revisions()))
                                if rev.revision in new and rev not in entering)
    return entering, stamped


def _guard(context: Any, original: Callable) -> Callable:
    def steps_after_checks(heads, migration_context):
        context.config.attributes[GUARD_RAN_ATTRIBUTE] = True
        context.config.attributes[JUDGED_ATTRIBUTE] = frozenset()
        try:
            steps = list(original(heads, migration_context))
        except CommandError as exc:
            raise _with_hint(exc, context) from None
        entering, stamped = revisions_entering(migration_context.script, heads, steps)
        if migration_context.as_sql:
            if entering:
                _annotate_offline(context, migration_context, entering)
            return steps
        _refuse_half_done(context, migration_context.connection, steps, entering)
        if not steps:
            return steps
        migration_context.opts[RUN_OPTION] = (uuid.uuid4().hex, not heads)
        connection = migration_context.connection
        settings = project_settings(context.config)
        registry = None
        if entering:
            registry = load_registry(context.config, settings)
            _judge(context, migration_context, heads, entering, stamped, settings, registry)
        reverting = [step for step in steps if isinstance(step, RevisionStep) and not step.is_upgrade]
        if reverting:
            registry = registry if registry is not None else load_registry(context.config, settings)
            downgrades.judge_before(context, migration_context, reverting, registry, force_reason(context))
        revisions_table.create(connection, checkfirst=True)
        revision_history_table.create(connection, checkfirst=True)
        lock_timeout.set_session_lock_timeout(connection, settings.lock_timeout)
        sql_mode.make_strict(connection)  # MariaDB/MySQL: a truncating statement fails and rolls back
        if connection.in_transaction():
            connection.commit()
        sqlite_transactions.make_transactional(connection)  # SQLite: one transaction per revision
        context.config.attributes[STATS_ATTRIBUTE] = lock_timeout.install_statement_retries(
            migration_context, settings.lock_retries)
        steps = journal.install(migration_context, steps,  # resumable revisions (journal.py)
                                context.config.attributes[STATS_ATTRIBUTE])
        if registry is not None and len(registry) and force_reason(context) is None \
                and not (not heads and gate.schema_is_empty(connection, migration_context.version_table)):
            _watch_drops(context, connection, steps, registry, context.config.attributes[JUDGED_ATTRIBUTE])
        _keep_sync_triggers(connection, steps)
        _keep_one_transaction(connection, steps)  # outermost: SQLite, no COMMIT but SQLAlchemy's
        sql_mode.keep_strict(connection, steps)  # MariaDB: strict again before every statement that stores
        if reverting:
            downgrades.judge_each_statement(connection, reverting, registry, force_reason(context),
                                            context.config.attributes.get(COMMAND_ATTRIBUTE) or "downgrade")
        releases.start(migration_context, heads, steps, migration_context.opts[RUN_OPTION][0])
        return steps

    setattr(steps_after_checks, GUARD_MARK, True)
    return steps_after_checks


def _with_hint(exc: CommandError, context: Any) -> CommandError:
    """alembic's "Multiple head revisions are present for given argument 'head'" (``alembic upgrade
    head``, singular, what every alembic user types) with what to type on this layout instead."""
    message = str(exc)
    if "Multiple head revisions" not in message:
        return exc
    ini = getattr(context.config, "config_file_name", None) or "alembic.ini"
    return CommandError(f"{message}. This project has two heads, expand and contract: `alembic upgrade heads` "
                        "applies both (contract through the gate), `alembic upgrade expand@head` the expand "
                        f"phase only; or `dbsync -c {ini} upgrade` (expand, then contract if the gate allows)")


def _refuse_half_done(context: Any, connection: Any, steps: list, entering: list) -> None:
    """The one place that keeps a half-done step from being built on (``journal.py`` knows which).

    While a revision's ``downgrade()`` stopped half way, only downgrades run: an upgrade or a stamp
    that would apply a revision is refused, and so is one with nothing to apply (it would report
    "already at head" on a schema that is neither release's).  While a revision's ``upgrade()``
    stopped half way, no downgrade runs: no ``downgrade()`` removes the part that ran.
    """
    if connection is None or connection.dialect.name not in journal.JOURNALED_DIALECTS:
        return
    dbsync = f"dbsync -c {getattr(context.config, 'config_file_name', None) or 'alembic.ini'}"
    if entering or not steps:
        journal.refuse_while_partly_reverted(connection, f"{dbsync} rollback")
    if any(isinstance(step, RevisionStep) and not step.is_upgrade for step in steps):
        journal.refuse_while_partly_applied(connection, f"{dbsync} upgrade --expand")


def _watch_drops(context: Any, connection: Any, steps: list, registry: Any, judged: frozenset) -> None:
    """Every upgrade step runs under ``drop_guard.watching``: a statement dropping what an
    unfinished data migration reads is refused as it is about to execute (sent through SQLAlchemy
    or straight to the driver), and a revision after which such a column is gone anyway is not
    recorded (``gate.DataDestroyed`` when its DDL had committed).
    Migrations the gate judged before the run (*judged*) are not probed again: once a contract has
    removed its sync triggers, release N+1's writes leave the old columns behind on purpose."""
    def refuse(revision: str, found: dict, committed: bool = False) -> Exception:
        if committed:  # seen after upgrade(), and the drop is beyond the transaction's rollback
            return gate.DataDestroyed(revision, found)
        return gate.GateRefused(gate.GateVerdict(pending=gate.readers_pending(found, lambda what: [revision])),
                                how_to_finish(context.config))

    complete: set[str] = set()  # found complete by a revision's watch: not probed again this run
    home: list[str] = []  # where unqualified names resolve as the run's first revision starts

    def watched(revision: str, migration_fn: Callable) -> Callable:
        @functools.wraps(migration_fn)  # alembic names the step after the function ("upgrade")
        def migrate(**kw: Any) -> Any:
            home[:] = home or [drop_guard.home_schema(connection)]  # inside the revision's transaction
            with drop_guard.watching(connection, registry, revision, refuse, settled=judged, complete=complete,
                                     home=home[0]):
                return migration_fn(**kw)

        return migrate

    for step in steps:
        if isinstance(step, RevisionStep) and step.is_upgrade:
            step.migration_fn = watched(step.revision.revision, step.migration_fn)


def _keep_sync_triggers(connection: Any, steps: list) -> None:
    """Every upgrade step runs under ``sync_keeper.keeping``: no live sync trigger is lost
    silently (a table re-created under it gets it back; an explicit drop outside a contract is
    refused).  ``--force`` does not lift it: no data migration recovers a write that went nowhere."""
    def kept(script: Any, migration_fn: Callable) -> Callable:
        @functools.wraps(migration_fn)
        def migrate(**kw: Any) -> Any:
            with sync_keeper.keeping(connection, script.path, script.revision, phase_of(script)):
                return migration_fn(**kw)

        return migrate

    for step in steps:
        if isinstance(step, RevisionStep) and step.is_upgrade:
            step.migration_fn = kept(step.revision, step.migration_fn)


def _keep_one_transaction(connection: Any, steps: list) -> None:
    """SQLite: every upgrade step runs under ``raw_paths.transaction_kept``: an ``upgrade()`` that ends
    its revision's transaction through the driver (sqlite3's ``executescript`` COMMITs it before its
    script) is refused before its script runs, forced or not (``at_risk.ScriptCommitRefused``): a
    failure or a kill after such a COMMIT would leave the revision partly applied, with its version row
    unmoved and no journal to resume from (``expand.sqlite_transactions``: one transaction per
    revision).  Outermost, so that the drop guard's authorizer, installed inside it, keeps it too."""
    if connection.dialect.name != "sqlite":
        return
    from migrations_policy.gate.drops import raw_paths
    from migrations_policy.gate.drops.at_risk import ScriptCommitRefused

    def kept(revision: str, migration_fn: Callable) -> Callable:
        @functools.wraps(migration_fn)
        def migrate(**kw: Any) -> Any:
            with raw_paths.transaction_kept(connection) as ends:
                try:
                    result = migration_fn(**kw)
                except BaseException as exc:
                    if ends:  # sqlite3's "not authorized", or what the script raised after it
                        raise ScriptCommitRefused(revision, list(dict.fromkeys(ends)), upgrade=True) from exc
                    raise
            if ends:  # the script caught the refusal and went on
                raise ScriptCommitRefused(revision, list(dict.fromkeys(ends)), upgrade=True)
            return result

        return migrate

    for step in steps:
        if isinstance(step, RevisionStep) and step.is_upgrade:
            step.migration_fn = kept(step.revision.revision, step.migration_fn)


def _judge(context: Any, migration_context: Any, heads: Any, entering: list, stamped: bool,
           settings: Settings, registry: Any) -> None:
    """The gate on the revisions entering the database: refuse, or record a force."""
    connection = migration_context.connection
    reason = force_reason(context)
    verdict = gate.evaluate(connection, migration_context.script, entering, heads,
                            registry, migration_context.version_table,
                            stamping=stamped, exact=reason is not None)  # a --force record counts exactly
    if not stamped and any(phase_of(rev) == EXPAND for rev in entering) and len(registry):
        previous, unfinished = releases.previous_release_unfinished(connection, migration_context.script, heads,
                                                                    registry)
        seen = {p.name for p in verdict.pending}
        verdict.pending += [gate.PendingMigration(
            p.name, p.remaining, p.state, [f"the next release's expand ({', '.join(r.revision for r in entering)}); "
                                           f"the previous release ({previous.describe()}) must finish its data "
                                           "migrations first"], p.estimated)
            for p in unfinished if p.name not in seen]
    if not verdict.allowed:
        if reason is None or not verdict.forceable:
            if connection.in_transaction():
                connection.rollback()
            raise gate.GateRefused(verdict, how_to_finish(context.config))
        record_force(connection, verdict, reason, command="stamp" if stamped else "upgrade")
    context.config.attributes[JUDGED_ATTRIBUTE] = frozenset(verdict.required) | frozenset(verdict.readers)


def _record_phase(ctx, step, heads, run_args) -> None:
    """on_version_apply: keep ``migrations_policy_revisions`` in step with the version table, and
    append the step to ``migrations_policy_revision_history`` (``dbsync rollback`` reads it)."""
    if ctx.as_sql or ctx.connection is None or not sa.inspect(ctx.connection).has_table(REVISIONS_TABLE):
        return
    script = ctx.script
    ids = step.up_revision_ids if step.is_upgrade else (step.up_revision_id,)
    ids = [i for i in ids if i]
    if not ids:
        return
    phases = {i: phase_of(script.get_revision(i)) for i in ids}
    ctx.connection.execute(sa.delete(revisions_table).where(revisions_table.c.revision.in_(ids)))
    if step.is_upgrade:
        ctx.connection.execute(sa.insert(revisions_table), [{"revision": i, "phase": phases[i]} for i in ids])
    action = "stamp" if step.is_stamp else "upgrade" if step.is_upgrade else "downgrade"
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    run, from_base = ctx.opts.get(RUN_OPTION) or (uuid.uuid4().hex, False)
    ctx.connection.execute(sa.insert(revision_history_table), [
        {"revision": i, "phase": phases[i], "action": action, "at": now, "run": run, "from_base": from_base}
        for i in ids])
    if step.is_upgrade and not step.is_stamp:
        releases.record_step(ctx, run, ids, phases, heads)


def guard_options(context: Any) -> dict[str, Any]:
    """``context.configure`` options that put the gate, lock timeouts and phase records in place."""
    # env.py passes the ``alembic.context`` module proxy; its ``_proxy`` is the EnvironmentContext.
    environment = getattr(context, "_proxy", None) or context
    original = environment.context_opts.get("fn")
    options: dict[str, Any] = {"on_version_apply": (_record_phase, journal.forget_versioned)}
    if original is not None:
        options["fn"] = _guard(context, original)
    return options
