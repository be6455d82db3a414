"""The contract gate: no gated revision is applied while the data it needs is unmigrated.

A revision is *gated* when it sits on the contract branch or declares the online
data migrations it needs, in either form::

    requires_data_migrations = ("nodes_extra_to_meta", "port_node_orphans")

    def upgrade():
        op.require_data_migrations(*NEEDED)   # same effect; any module-level expression

``evaluate`` is the one place that decides.  The env.py hook (``runtime.py``)
asks it before alembic applies (or stamps) anything, so plain ``alembic
upgrade`` is gated as well as ``dbsync upgrade``; ``status`` and ``check`` ask
it too.  It refuses, before any DDL, when

* a required migration still has rows to migrate (counted live by the
  database from its pending predicate: the ledger alone could be stale), or is
  stuck, failed, unknown or not declared;
* the expand revision a contract revision depends on is not applied yet, also
  when it is part of this same run (between expand and contract, data
  migrations must run).  Only a database whose schema is really empty (no
  version rows *and* no tables but the framework's) applies everything in one go;
* a revision's branch, directory and content disagree
  (``policy.phases.revision_phase_disagreement``: the linter reports the same);
* a revision's requirements cannot be known before it runs (an
  ``op.require_data_migrations(...)`` argument that is not a literal or a
  module-level expression);
* existing rows violate a UNIQUE, FOREIGN KEY, NOT NULL or CHECK constraint a
  revision adds (``preconditions``: read from the operations its ``upgrade()``
  invokes offline, counted live, with sample keys; what an ``upgrade()``
  that stops early offline would add after the stop is not checked).

The operation ``op.require_data_migrations`` also checks again when it runs:
the check before the run never switches that off.

``--force`` (``dbsync upgrade --contract --force``, ``dbsync stamp --force``, or
``alembic -x migrations_policy_force=REASON ...``) lets pending data and missing
expands through, never a phase
conflict, unknown requirements or rows violating a constraint (its DDL would
fail half-way anyway), and every override is kept in
``migrations_policy_gate_overrides``.

This module holds the verdict (what was found, how it reads, the errors dbsync exits with)
and the check itself.  It asks its neighbours: ``requirements`` (what a revision declares it
needs, read before it runs), ``sync_trigger_checks`` (what it does to live sync triggers) and,
through its callers, ``overrides`` (the record of every ``--force``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import sqlalchemy as sa
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from migrations_policy.gate.drops import data_drops
from migrations_policy.gate.drops.drop_guard import Destroyed, destroyed, readers, unfinished_readers
from migrations_policy.gate.drops.drop_guard import describe as describe_destroyed
from migrations_policy.gate.requirements import (Requirements, is_gated, phase_defect, requirements_of,
                                                 requirements_when_run)
from migrations_policy.gate.drops.sync_trigger_checks import (dropped_under_sync_triggers, explicit_sync_drops,
                                                        live_sync_triggers, rebuild_refusals, sync_drop_refusals)
from migrations_policy.core.framework_tables import is_framework_table
from migrations_policy.core.revisions import EXPAND, applied_revisions, parents, phase_of

#: State of a required migration ``check`` did not probe: another one already refuses.
NOT_CHECKED = "not checked"
#: State of a required data migration that no listed module declares.
NOT_DECLARED = "not declared"

#: Exit code of dbsync when the gate refuses.
EXIT_REFUSED = 4
#: Exit code of dbsync when a revision destroyed, past every check before the database, what an
#: unfinished data migration reads, and its DDL had committed (MariaDB/MySQL): not recorded as applied.
EXIT_DESTROYED = 7

VIOLATIONS_ADVICE = ("Existing rows violate a constraint the contract adds: fix or delete them (an online data "
                     "migration is the place), then rerun. --force does not override this: the constraint's DDL "
                     "would fail half-way, or on SQLite/non-strict MariaDB keep or coerce the rows.")


@dataclass
class PendingMigration:
    name: str
    remaining: int | None
    state: str
    required_by: list[str] = field(default_factory=list)
    #: *remaining* is the planner's estimate (a pending row was found; counting them all is not needed).
    estimated: bool = False
    #: Not declared: the module that declares it without being listed (``stubs.declaring_module``).
    declared_in: str | None = None

    def describe(self) -> str:
        if self.state == NOT_DECLARED:
            from migrations_policy.authoring.stubs import LISTED_WHERE

            where = (f"module {self.declared_in} declares it but is not listed in {LISTED_WHERE}: add it there"
                     if self.declared_in else f"no module listed in {LISTED_WHERE} declares it")
            return f"{self.name}: not declared: {where} (required by {', '.join(self.required_by)})"
        if self.state == NOT_CHECKED:
            return (f"{self.name}: not checked (another required migration is unfinished; `dbsync status` "
                    f"shows it) (required by {', '.join(self.required_by)})")
        rows = ("unknown rows (its table or columns do not exist yet)" if self.remaining is None
                else f"{'~' if self.estimated else ''}{self.remaining:,} row{'' if self.remaining == 1 else 's'} "
                     f"remaining{' (estimate; dbsync status --exact counts)' if self.estimated else ''}")
        return f"{self.name}: {rows}, state {self.state} (required by {', '.join(self.required_by)})"


@dataclass
class GateVerdict:
    """What the gate found for the revisions about to be applied."""

    contract_revisions: list[str] = field(default_factory=list)  # the gated revisions among them
    pending: list[PendingMigration] = field(default_factory=list)
    missing_expand: list[tuple[str, str]] = field(default_factory=list)  # (contract rev, expand rev it needs)
    #: Defects of the scripts themselves, which ``--force`` does not override: "path: why".
    defects: list[str] = field(default_factory=list)
    #: Revisions to be stamped whose requirements could not be read by running them offline.
    unjudged: list[str] = field(default_factory=list)
    #: Every data migration the judged revisions require: {name: [requiring revisions]}.
    required: dict[str, list[str]] = field(default_factory=dict)
    #: The migrations reading what the judged revisions drop (``drop_guard``), declared or not.
    readers: set[str] = field(default_factory=set)
    #: Constraints the revisions add that existing rows violate (``preconditions.Violation``).
    violations: list[Any] = field(default_factory=list)
    #: Constraints the revisions add whose rows were not counted (``preconditions.Precondition``):
    #: ``status``/``check`` leave them while the contract is refused for pending work anyway
    #: (one full scan each).  A run never defers them: ``--force`` must not skip them.
    deferred: list[Any] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not (self.pending or self.missing_expand or self.defects or self.unjudged or self.violations)

    @property
    def forceable(self) -> bool:
        """``--force`` never overrides a defect, nor rows that violate a constraint the revision
        adds: its DDL would fail half-way (or, on SQLite and non-strict MariaDB, keep or coerce them)."""
        return not (self.defects or self.violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "contract_revisions": self.contract_revisions,
            "pending": [{"name": p.name, "remaining": p.remaining, "estimated": p.estimated, "state": p.state,
                         "required_by": p.required_by} for p in self.pending],
            "missing_expand": [{"revision": c, "needs": e} for c, e in self.missing_expand],
            "defects": self.defects,
            "unjudged": self.unjudged,
            "violations": [v.to_dict() for v in self.violations],
            "preconditions_not_checked": [p.describe() for p in self.deferred],
        }

    def summary(self) -> str:
        parts = []
        if self.defects or self.unjudged:
            parts.append(f"{len(self.defects) + len(self.unjudged)} revision(s) cannot be judged")
        if self.pending:
            parts.append(f"{len(self.pending)} data migration(s) not complete")
        if self.missing_expand:
            parts.append(f"{len(self.missing_expand)} expand revision(s) missing")
        if self.violations:
            parts.append(f"{len(self.violations)} constraint(s) it adds violated by existing rows")
        return "; ".join(parts)


class GateRefused(CommandError):
    """Raised from env.py: alembic prints it (``FAILED: ...``), dbsync exits with code 4."""

    exit_code = EXIT_REFUSED

    def __init__(self, verdict: GateVerdict, how_to_finish: str):
        self.verdict = verdict
        lines = [("contract refused: " if verdict.contract_revisions else "upgrade refused: ") + verdict.summary()]
        lines += [f"  - {d}" for d in verdict.defects + verdict.unjudged]
        lines += [f"  - {p.describe()}" for p in verdict.pending]
        lines += [f"  - {c} needs expand revision {e}, which is not applied: run the expand phase first"
                  for c, e in verdict.missing_expand]
        lines += [f"  - {v.describe()}" for v in verdict.violations]
        if verdict.pending or verdict.missing_expand:
            lines.append(how_to_finish)
        if verdict.violations:
            lines.append(VIOLATIONS_ADVICE)
        super().__init__("\n".join(lines))


class DataDestroyed(CommandError):
    """A revision dropped what an unfinished migration reads by a path no check saw before the
    database acted, and the DDL committed: the revision is not recorded as applied (one line)."""

    exit_code = EXIT_DESTROYED

    def __init__(self, revision: str, found: dict[str, tuple[Any, list[str]]]):
        what = "; ".join(f"{', '.join(items)} (read by unfinished data migration {name})"
                         for name, (_, items) in sorted(found.items()))
        super().__init__(f"revision {revision} destroyed {what}, past the checks before each statement; its DDL "
                         "had committed, so the data is gone: the revision is not recorded as applied. Restore "
                         "the data from a backup (or accept the loss), then rerun")


class NotWired(CommandError):
    """The project's env.py did not hand the run to the gate: nothing was applied."""

    exit_code = EXIT_REFUSED


# -- the check --------------------------------------------------------------------
def schema_is_empty(connection: Connection, version_table: str = "alembic_version") -> bool:
    """No table but alembic's version table and the framework's own: a fresh database."""
    names = sa.inspect(connection).get_table_names()
    return all(name == version_table or is_framework_table(name) for name in names)


def evaluate(connection: Connection, script: ScriptDirectory, revisions: list[Script],
             current: Iterable[str], registry: Any, version_table: str = "alembic_version",
             stamping: bool = False, known: Iterable[Any] | None = None, exact: bool = False,
             defer_preconditions: bool = False, remember: bool = False) -> GateVerdict:
    """Judge *revisions* (about to be applied, or recorded as applied when *stamping*) against
    the ledger and live counts.  A stamp runs no DDL, so it may record an expand and its
    contract together; it still needs their data migrations complete.  *known*: the
    ``data.pending.PendingMigration`` of every migration of *registry*, just read by the
    caller (``status``/``check``), so that no table is probed twice.  *exact*: count the rows
    of an unfinished migration instead of estimating them (for a ``--force`` record).
    *defer_preconditions* (``status``/``check``): while data migrations or an expand are still
    pending the contract is refused whatever the rows hold, so the constraints it adds are
    listed in ``deferred``, not counted (a full scan each, the cost of every call at size).
    *remember* (``status``/``check`` only): a precondition's count that found nothing is
    remembered while the database's dirty marks say nothing was written since (``violations``)."""
    verdict = GateVerdict()
    checked: list[Any] = []  # preconditions of the gated revisions that run (a stamp runs no DDL)
    applied = applied_revisions(script, current)
    fresh = not applied and schema_is_empty(connection, version_table)
    required = verdict.required
    triggers: list[Any] | None = None  # the live sync triggers, read once a gated revision needs them
    droppers: dict[Destroyed, list[str]] = {}  # (table, column) -> the revisions that drop or rename it
    for rev in revisions:
        if not (stamping or fresh) and len(registry):  # a stamp drops nothing; a fresh schema has no data
            for gone in drops_of(rev, connection.dialect.name):
                droppers.setdefault(gone, []).append(rev.revision)
        requirements = requirements_of(rev)
        if stamping and not fresh:
            # A stamp never runs the revision, so the operation's own check never happens: run its
            # upgrade() offline to see every requirement, however it is called.  What cannot be
            # run offline cannot be judged (forceable: adopting an existing database, say).
            ran, problem = requirements_when_run(rev, connection.dialect.name)
            requirements = Requirements(tuple(dict.fromkeys(requirements.names + ran)), requirements.unresolved)
            if problem:
                verdict.unjudged.append(f"{rev.path}: revision {rev.revision} is stamped without running, and "
                                        f"its upgrade() cannot run offline to show what it requires ({problem})")
        defect = phase_defect(rev, requirements)
        if defect:
            verdict.defects.append(defect)
        verdict.defects.extend(requirements.unresolved)
        if not (stamping or fresh):  # a stamp drops nothing; a fresh schema has no data
            verdict.defects.extend(data_drops.refusals(connection, rev, registry))
        if not (stamping or fresh):  # a stamp drops nothing; a fresh schema has no sync trigger
            dropped, rebuilt = explicit_sync_drops(rev, connection.dialect.name)
            if (dropped or rebuilt) and triggers is None:
                triggers = live_sync_triggers(connection)
            verdict.defects.extend(sync_drop_refusals(rev, dropped, triggers or []))
            verdict.defects.extend(rebuild_refusals(rev, rebuilt, triggers or [], connection.dialect.name))
        if not is_gated(rev, requirements):
            continue
        verdict.contract_revisions.append(rev.revision)
        if fresh:
            continue  # no data to migrate, no old code running
        if triggers is None:
            triggers = live_sync_triggers(connection)
        if triggers and not stamping:  # a stamp drops nothing
            verdict.defects.extend(dropped_under_sync_triggers(rev, connection.dialect.name, triggers))
        if not stamping:
            checked.extend(_preconditions(rev, connection))
        for parent in () if stamping else parents(script, rev):
            if phase_of(parent) == EXPAND and parent.revision not in applied:
                verdict.missing_expand.append((rev.revision, parent.revision))
        for name in requirements.names:
            required.setdefault(name, []).append(rev.revision)
    verdict.pending = unfinished(connection, registry, required, known, exact, script_dir=script.dir)
    verdict.readers = set(readers(registry, droppers)) if droppers else set()
    verdict.pending += _undeclared_readers(connection, registry, droppers, required, known)
    if verdict.contract_revisions and not fresh and len(registry):
        verdict.pending += unfinished_anywhere(connection, registry, verdict.contract_revisions,
                                               {p.name for p in verdict.pending}, known, exact)
    if checked and defer_preconditions and (verdict.pending or verdict.missing_expand):
        verdict.deferred = checked
    elif checked:
        from migrations_policy.gate.preconditions import violations

        verdict.violations = violations(connection, checked, remember)
    return verdict


def _preconditions(rev: Script, connection: Connection) -> list[Any]:
    """The constraints *rev* adds (``preconditions``), as far as its upgrade() runs offline.  One
    that stops early (it reads the database: ``op.get_bind()``) is not refused for that, as the
    drop guard does not refuse it (lint's MP001 flags it): a constraint after the stop is not
    checked beforehand, and its own DDL still fails on bad rows (PostgreSQL, strict MariaDB)."""
    from migrations_policy.gate.preconditions import preconditions_of

    return preconditions_of(rev, connection)[0]


def drops_of(rev: Script, dialect_name: str) -> list[Destroyed]:
    """What *rev*'s ``upgrade()``, run offline, drops or renames away (nothing when it cannot run
    offline: the run's own watch, ``drop_guard.watching``, sees those statements as they execute)."""
    from migrations_policy.core.offline_run import dropping_operations
    from migrations_policy.policy.alembic_ops import from_alembic

    recorded, _ = dropping_operations(rev.module.upgrade, dialect_name)
    return destroyed(o for op in recorded for o in from_alembic(op))


def _undeclared_readers(connection: Connection, registry: Any, droppers: dict[Destroyed, list[str]],
                        required: dict[str, list[str]], known: Iterable[Any] | None) -> list[PendingMigration]:
    """Unfinished migrations reading what the revisions drop, that no revision declares."""
    if not droppers:
        return []
    by_text = {describe_destroyed(gone): revs for gone, revs in droppers.items()}
    found = unfinished_readers(connection, registry, list(droppers), known or ())
    return readers_pending({name: found[name] for name in found if name not in required},  # declared: above
                           lambda what: list(dict.fromkeys(r for item in what for r in by_text.get(item, ()))))


#: Why an undeclared migration holds a contract back (the global rule).
GLOBAL_RULE = "the global rule: no contract runs while any data migration is unfinished"


def unfinished_anywhere(connection: Connection, registry: Any, contracts: list[str], seen: set[str],
                        known: Iterable[Any] | None = None, exact: bool = False) -> list[PendingMigration]:
    """The global contract rule (nova's): a contract revision runs only when **no** data migration
    is unfinished, declared or not, reading what it drops or not.  Every migration of *registry*
    not already in *seen* whose tables and columns exist is recounted live (its rows decide; the
    ledger is only reported).  A migration whose table or columns do not exist is not judged here:
    it belongs to a release whose expand has not run, or was retired by a contract that dropped
    what it read (``drop_guard`` still protects what such a one holds)."""
    from migrations_policy.data.remaining.pending import pending_migrations

    live = {p.name: p for p in known or () if p.name in registry}
    unread = [m for m in registry if m.name not in seen and m.name not in live]
    if unread:
        live.update((p.name, p) for p in pending_migrations(connection, unread, exact))
    return [PendingMigration(p.name, p.remaining, p.state, [f"{', '.join(contracts)} ({GLOBAL_RULE})"],
                             p.estimated)
            for name, p in live.items() if name not in seen and p.remaining]


def readers_pending(found: dict[str, tuple[Any, list[str]]],
                    revisions_of: Callable[[list[str]], list[str]]) -> list[PendingMigration]:
    """``drop_guard.unfinished_readers``'s answer as the gate's unfinished migrations, each required
    by the revisions that drop what it reads (``revisions_of(["nodes.extra", ...])``)."""
    return [PendingMigration(name, probed.remaining, probed.state,
                             [f"{', '.join(revisions_of(what))}, which drops {', '.join(what)} that it reads"],
                             probed.estimated)
            for name, (probed, what) in found.items()]


def declaring_module(registry: Any, name: str, script_dir: Any = None) -> str | None:
    """The module that declares *name* but is not listed in data_migrations (None: none found)."""
    from pathlib import Path

    from migrations_policy.authoring.stubs import declaring_module as find

    listed, roots = getattr(registry, "listed", []), [Path(p) for p in getattr(registry, "roots", [])]
    return find(name, listed, Path(script_dir) if script_dir else None, roots)


def unfinished(connection: Connection, registry: Any, required: dict[str, list[str]],
               known: Iterable[Any] | None = None, exact: bool = False,
               script_dir: Any = None) -> list[PendingMigration]:
    """Of the *required* data migrations ({name: [requiring revisions]}), those not complete.

    The rows decide, live (the ledger's state is only reported): one pending row is
    enough to refuse (found with LIMIT 1, its count then estimated); a migration whose
    table or columns do not exist yet, or that is not declared at all, is not complete either.
    """
    if not required:
        return []
    from migrations_policy.data.remaining.pending import pending_migrations

    live = {p.name: p for p in known or () if p.name in registry}
    unread = [registry[name] for name in required if name in registry and name not in live]
    # The gate reads every required migration (its first pending row, or one pass when complete).
    # A caller that read only up to the first unfinished one (``check``) settles for that refusal.
    refused = any(name not in registry or (name in live and live[name].remaining != 0) for name in required)
    if unread and not (known is not None and refused and not exact):
        live.update((p.name, p) for p in pending_migrations(connection, unread, exact))
    found = []
    for name, required_by in required.items():
        migration = live.get(name)
        if migration is None and name in registry:
            found.append(PendingMigration(name, None, NOT_CHECKED, required_by))  # another one refuses already
        elif migration is None:
            found.append(PendingMigration(name, None, NOT_DECLARED, required_by,
                                          declared_in=declaring_module(registry, name, script_dir)))
        elif migration.remaining is None and _gone_with_its_contract(connection, registry[name], required_by):
            continue
        elif migration.remaining is None or migration.remaining > 0:
            found.append(PendingMigration(name, migration.remaining, migration.state, required_by,
                                          migration.estimated))
    return found


def _gone_with_its_contract(connection: Connection, migration: Any, required_by: list[str]) -> bool:
    """The migration's columns are missing because the requiring revision's own interrupted run
    dropped them (MariaDB/MySQL: each DDL commits on its own; the journal lists the statements done):
    the gate let that run start only once the migration was complete, so resuming it is not refused
    for the columns it already took away (the same principle as an interrupted expand's own new
    columns, ``data.versions``).  A table or column missing for any other reason still refuses."""
    from migrations_policy.data.remaining.pending import absent
    from migrations_policy.expand import journal

    missing = {(table.lower(), column.lower() if column else None) for table, column in absent(connection, migration)}
    if not missing:
        return False
    dropped = journal.dropped_by_its_run(connection, required_by)
    return all(item in dropped or (item[0], None) in dropped for item in missing)
