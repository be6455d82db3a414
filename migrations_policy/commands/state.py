"""Where a database stands in the rolling upgrade, computed once for ``status`` and ``check``.

* each branch (expand, contract): applied, head, pending revisions;
* each data migration: live remaining rows and ledger state;
* the contract gate's verdict on the pending contract revisions;
* object versions (when the project has a release mapping) — judged only when
  expand revisions are pending, as ``dbsync upgrade`` would judge them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from migrations_policy.gate import verdict as gate
from migrations_policy.gate.drops.sync_trigger_checks import sync_triggers_left_behind
from migrations_policy.expand import journal
from migrations_policy.core.project import Project
from migrations_policy.gate.drops import data_drops
from migrations_policy.core.revisions import CONTRACT, EXPAND, BranchStatus, branch_statuses, current_heads

# ``dbsync check`` exit codes (glance's convention, plus 2 for errors).
CHECK_NOTHING_TO_DO, CHECK_EXPAND_PENDING, CHECK_DATA_PENDING, CHECK_CONTRACT_ALLOWED = 0, 3, 4, 5
#: A pending revision cannot be applied as it stands (its phase is ambiguous, or its requirements
#: cannot be known before it runs): the project must fix the script.  Also: a sync trigger is
#: left behind after its contract (``gate.sync_trigger_checks.sync_triggers_left_behind``).
CHECK_CANNOT_APPLY = 2


@dataclass
class UpgradeState:
    heads: tuple[str, ...]
    branches: dict[str, BranchStatus]
    data_migrations: list[Any] = field(default_factory=list)  # data.pending.PendingMigration
    verdict: gate.GateVerdict = field(default_factory=gate.GateVerdict)
    object_versions: Any = None  # data.versions.ObjectVersionReport, when expand is pending
    partly_applied: list[journal.PartlyApplied] = field(default_factory=list)  # interrupted revisions
    #: Sync triggers no pending revision removes, or whose columns are gone (one line each).
    sync_triggers_left: list[str] = field(default_factory=list)
    #: The pending revisions' decisions to drop data no migration moves (``gate.data_drops``).
    drops_data: list[str] = field(default_factory=list)
    #: {data migration: live runner sessions holding claims on it} (``status`` only).
    runners: dict[str, int] = field(default_factory=dict)

    @property
    def data_pending(self) -> list[Any]:
        return [m for m in self.data_migrations if m.remaining]

    @property
    def reverting(self) -> bool:
        """A revision is partly reverted (an interrupted rollback)."""
        return any(p.direction == journal.DOWNGRADE for p in self.partly_applied)

    @property
    def contract_allowed(self) -> bool:
        return self.verdict.allowed

    def check_code(self) -> int:
        if self.verdict.defects or self.reverting or self.sync_triggers_left:
            return CHECK_CANNOT_APPLY  # a partly reverted revision: upgrades are refused until the rollback ends
        if self.branches[EXPAND].pending:
            return CHECK_EXPAND_PENDING
        if self.data_pending:
            return CHECK_DATA_PENDING
        if self.branches[CONTRACT].pending:
            return CHECK_CONTRACT_ALLOWED if self.contract_allowed else CHECK_DATA_PENDING
        return CHECK_NOTHING_TO_DO


def object_versions_before_expand(project: Project, connection: Connection, expand_pending: bool) -> Any:
    """Object versions as the next expand would judge them (ironic's check_versions), or None
    when no expand is pending or the project has no release mapping.

    The judgement is of the schema as the last *completed* release left it: a version column that a
    pending expand revision adds holds nothing the previous release wrote (its rows are NULL because
    the column is new), whether that revision has not run yet or an interrupted run of it (the
    journal) already added it; such a column is not judged, as a table a pending revision creates is
    not.  So an expand stopped after adding its version columns resumes with ``dbsync upgrade``."""
    if not expand_pending or not project.settings.release_mapping:
        return None
    from migrations_policy.data.discovery import load_release_mapping
    from migrations_policy.data.versions import check_object_versions

    return check_object_versions(connection, load_release_mapping(project.settings.release_mapping),
                                 added_by_pending=lambda: pending_expand_additions(project, connection))


def pending_expand_additions(project: Project, connection: Connection) -> set[tuple[str, str | None]]:
    """``(table, column)`` of every column, and ``(table, None)`` of every table, that the pending
    expand revisions add: read from each script rendered offline, and from the journal's record of
    what an interrupted run of one applied (its statements' descriptions)."""
    from migrations_policy.policy import model as m
    from migrations_policy.policy.sql import from_sql

    script = project.script
    pending = branch_statuses(script, current_heads(connection))[EXPAND].pending
    texts: list[str] = []
    for revision in pending:
        texts.extend(journal.planned_statements(script, revision, connection) or [])
    added: set[tuple[str, str | None]] = set()
    for text in texts:
        try:
            operations = from_sql(text)
        except Exception:  # noqa: BLE001 - a statement the reader cannot classify adds nothing we trust
            continue
        for operation in operations:
            if operation.kind == m.ADD_COLUMN and operation.table and operation.column:
                added.add((operation.table.lower(), operation.column.lower()))
            elif operation.kind == m.CREATE_TABLE and operation.table:
                added.add((operation.table.lower(), None))
    for revision, entries in journal.read_entries(connection).items():
        if revision in pending:
            for entry in entries.values():
                added.update(journal.added_by_description(entry.description))
    return added


def assess(project: Project, connection: Connection, exact: bool = False, decisive: bool = False) -> UpgradeState:
    """Everything ``status`` and ``check`` report, read in one go; remaining rows estimated
    unless *exact* (``data.pending``: whether a row is pending is always verified).

    *decisive* (``check``): read only what decides ``check_code``: no data migration while
    expand is pending, and the data migrations only up to the first with rows remaining
    (the gate then stops there too: the others are ``not checked``)."""
    from migrations_policy.data.walk.claim_table import runners_at_work
    from migrations_policy.commands.data import project_registry
    from migrations_policy.data.remaining.pending import pending_migrations

    script = project.script
    registry = project_registry(project)
    heads = current_heads(connection)
    state = UpgradeState(heads=heads, branches=branch_statuses(script, heads))
    expand_pending = bool(state.branches[EXPAND].pending)
    if not (decisive and expand_pending):
        state.data_migrations = pending_migrations(connection, registry, exact=exact, stop_at_pending=decisive,
                                                   remember=True)
    if not decisive:
        state.runners = runners_at_work(connection)
    state.partly_applied = journal.partly_applied(connection, script)
    pending = [script.get_revision(r) for name in (EXPAND, CONTRACT) for r in state.branches[name].pending]
    if connection.dialect.name == "mysql" and connection.in_transaction():
        connection.rollback()  # reads only: the probes' metadata locks would keep a proof's triggers out
    state.verdict = gate.evaluate(connection, script, pending, heads, registry, known=state.data_migrations,
                                  defer_preconditions=not exact, remember=not exact)
    state.sync_triggers_left = sync_triggers_left_behind(connection, pending)
    state.drops_data = data_drops.decided_lines(pending)
    state.object_versions = object_versions_before_expand(project, connection, expand_pending)
    if connection.in_transaction():
        connection.rollback()  # reads only
    return state
