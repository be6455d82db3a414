"""Commands as plain functions: each takes a ``Project`` and plain arguments and
returns a result object (``text()`` for people, ``to_dict()`` for JSON, ``exit_code``).

The shell in ``migrations_policy.cli`` only parses arguments and prints results,
so a project can call these functions from its own tooling, and tests can call
them without subprocesses.

Here: the commands that move the schema (``upgrade``, ``stamp``, ``rollback``), each run
through the gate by ``alembic_run.run_alembic_on``, and the entry points of the others
(online data migrations, prune, plan, authoring).  ``version``, ``status`` and ``check`` live
in ``status_check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from alembic import command as alembic_command
from alembic.util import CommandError

from migrations_policy.authoring.scaffold import DEFAULT_TEMPLATE
from migrations_policy.commands.alembic_run import run_alembic_on
from migrations_policy.commands.state import object_versions_before_expand
from migrations_policy.core.errors import PolicyError, UsageError
from migrations_policy.core.project import Project
from migrations_policy.core.result import Result
from migrations_policy.core.revisions import EXPAND, PHASES, branch_statuses, current_heads
from migrations_policy.gate.hook.runtime import FORCE_ATTRIBUTE, STATS_ATTRIBUTE
from migrations_policy.gate.verdict import GateRefused

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from migrations_policy.commands.data import BatchOptions


# -- upgrade / stamp ----------------------------------------------------------
@dataclass
class UpgradeResult(Result):
    phases: list[str] = field(default_factory=list)
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    #: Why contract did not run after expand (the gate's message), if it did not.
    refused: str | None = None
    #: DDL statements that gave up waiting for a lock and were retried.
    lock_timeouts: int = 0
    #: Per branch (expand, contract): its current revisions before and after.
    moves: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"phases": self.phases, "before": self.before, "after": self.after, "refused": self.refused,
                "lock_timeouts_retried": self.lock_timeouts,
                "branches": {name: {"before": before, "after": after} for name, (before, after) in self.moves.items()}}

    def text(self) -> str:
        if self.before == self.after:
            lines = [f"{' + '.join(self.phases)}: already at head ({', '.join(self.after) or 'base'})"]
        elif self.moves:  # "expand: A -> B; contract: C -> D" (a branch that did not move: "at C")
            lines = ["; ".join(f"{name}: {', '.join(before) or 'base'} -> {', '.join(after) or 'base'}"
                               if before != after else f"{name}: at {', '.join(after) or 'base'}"
                               for name, (before, after) in self.moves.items())]
        else:
            lines = [f"{' + '.join(self.phases)}: upgraded {', '.join(self.before) or 'base'} -> "
                     f"{', '.join(self.after)}"]
        if self.lock_timeouts:
            lines.append(f"{self.lock_timeouts} statement(s) gave up waiting for a lock and were retried")
        if self.refused:
            lines.append("expand applied; " + self.refused)
        return "\n".join(lines)


def _branch_moves(project: Project, before: list[str], after: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Each branch's current revisions before and after (alembic's heads say no branch: a contract
    head stands for the expand revision it depends on too); {} without the expand/contract layout."""
    try:
        old, new = branch_statuses(project.script, before), branch_statuses(project.script, after)
    except (CommandError, PolicyError, KeyError):
        return {}
    return {name: (list(old[name].current), list(new[name].current)) for name in PHASES
            if name in old and name in new and (old[name].head or new[name].head)}


def _phase_target(project: Project, phase: str) -> str:
    labels = set()
    for rev in project.script.walk_revisions():
        labels.update(rev.branch_labels or ())
    if phase in labels:
        return f"{phase}@heads"
    if phase == EXPAND:
        return "heads"  # a project without the expand/contract layout: one branch
    raise UsageError(f"{project.alembic_ini}: no revision has the branch label {phase!r}")


def _refuse_unfinished_object_versions(project: Project, conn) -> None:
    """Before new expand revisions: every object row must carry an accepted version (ironic's
    check_versions), i.e. the previous upgrade's data migrations finished.  Tables that
    pending expand revisions will create are tolerated."""
    if not project.settings.release_mapping:
        return
    expand_pending = bool(branch_statuses(project.script, current_heads(conn))[EXPAND].pending)
    report = object_versions_before_expand(project, conn, expand_pending)
    if conn.in_transaction():
        conn.rollback()
    if report is not None:
        report.raise_for_problems()


def upgrade(project: Project, phases: tuple[str, ...] = PHASES, force: str | None = None) -> UpgradeResult:
    """Apply the heads of each phase in order (expand first), contract through the gate.

    With both phases, a gate refusal after a successful expand is not an error
    of the expand: the result says why contract did not run, with exit code 4.
    *force* (a reason) lets contract past the gate; it is recorded in the ledger.
    """
    for phase in phases:
        if phase not in PHASES:
            raise UsageError(f"unknown phase {phase!r}")
    result = UpgradeResult(phases=list(phases))
    with project.connect() as conn:
        result.before = sorted(current_heads(conn))
        if EXPAND in phases:
            _refuse_unfinished_object_versions(project, conn)
        for phase in phases:
            if force:
                project.alembic_config.attributes[FORCE_ATTRIBUTE] = force
            try:
                run_alembic_on(project, conn, alembic_command.upgrade, _phase_target(project, phase))
                stats = project.alembic_config.attributes.pop(STATS_ATTRIBUTE, None)
                result.lock_timeouts += stats.timeouts if stats is not None else 0
            except PolicyError as exc:
                if exc.exit_code != GateRefused.exit_code or phase == phases[0]:
                    raise
                result.exit_code, result.refused = exc.exit_code, exc.message
            finally:
                project.alembic_config.attributes.pop(FORCE_ATTRIBUTE, None)
        result.after = sorted(current_heads(conn))
    result.moves = _branch_moves(project, result.before, result.after)
    return result


def stamp(project: Project, revisions: list[str], purge: bool = False, force: str | None = None) -> UpgradeResult:
    """Record *revisions* as applied without running them.  Through the gate: stamping a
    revision whose data migrations are pending needs *force* (a reason), recorded like a
    forced upgrade."""
    with project.connect() as conn:
        before = sorted(current_heads(conn))
        if force:
            project.alembic_config.attributes[FORCE_ATTRIBUTE] = force
        try:
            run_alembic_on(project, conn, alembic_command.stamp, revisions, purge=purge)
        finally:
            project.alembic_config.attributes.pop(FORCE_ATTRIBUTE, None)
        after = sorted(current_heads(conn))
    return UpgradeResult(phases=["stamp"], before=before, after=after,
                         moves=_branch_moves(project, before, after))


# -- rollback ---------------------------------------------------------------------------
@dataclass
class RollbackResult(Result):
    plan: Any = None
    dry_run: bool = False
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    #: Data migrations whose ledger entries went with their columns.
    forgotten: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "plan": self.plan.to_dict(), "before": self.before, "after": self.after,
                "forgotten_ledger_entries": self.forgotten}

    def text(self) -> str:
        if self.dry_run:
            return "\n".join(["rollback (dry run, nothing changed): would " + self.plan.lines()[0],
                               *self.plan.lines()[1:]])
        lines = [f"rolled back: {', '.join(self.before)} -> {', '.join(self.after) or 'base'}", *self.plan.lines()]
        if self.forgotten:
            lines.append(f"ledger entries forgotten: {', '.join(self.forgotten)}")
        return "\n".join(lines)


def rollback(project: Project, dry_run: bool = False, force: str | None = None, to: str | None = None) -> RollbackResult:
    """Revert the expand revisions of the last release whose contract has not run, or those above
    *to* (``rollback.py``).  Each statement is judged again under its lock as it runs (``gate/drops/at_risk.py``)."""
    from migrations_policy.lifecycle import rollback as rolling_back
    from migrations_policy.commands.data import project_registry
    from migrations_policy.gate.hook.runtime import COMMAND_ATTRIBUTE

    registry = project_registry(project)
    with project.connect() as conn:
        heads = current_heads(conn)
        plan = rolling_back.plan(conn, project.script, heads, registry, to)
        result = RollbackResult(plan=plan, dry_run=dry_run, before=sorted(heads), after=sorted(heads))
        if dry_run:
            return result
        if (plan.at_risk or plan.unknown) and not force:
            lost = "; ".join([r.describe() for r in plan.at_risk] + [f"unknown: {u}" for u in plan.unknown])
            raise PolicyError(f"rollback refused: {plan.rows_at_risk:,} row(s) would be lost with the revisions "
                              f"{', '.join(plan.revisions)} ({lost}); rerun with --force --reason ... to drop "
                              "them anyway (recorded)", exit_code=rolling_back.EXIT_REFUSED)
        attributes = project.alembic_config.attributes
        attributes[COMMAND_ATTRIBUTE] = "rollback"
        if force:
            attributes[FORCE_ATTRIBUTE] = force
        try:
            run_alembic_on(project, conn, alembic_command.downgrade, plan.target)
        finally:
            attributes.pop(FORCE_ATTRIBUTE, None)
            attributes.pop(COMMAND_ATTRIBUTE, None)
        result.forgotten = rolling_back.forget_ledger_entries(conn, registry)
        result.after = sorted(current_heads(conn))
    return result


# -- online data migrations ---------------------------------------------------------
@dataclass
class DataMigrationsResult(Result):
    """The run's ``migrations_policy.data.RunReport``: summary table, JSON, exit code 0/1/2."""

    report: Any = None

    def to_dict(self) -> dict[str, Any]:
        return self.report.to_dict()

    def text(self) -> str:
        return self.report.text()


def online_data_migrations(project: Project, **options: Unpack[BatchOptions]) -> DataMigrationsResult:
    """Run the project's online data migrations in batches (docs/data_migrations.rst); the keyword
    arguments are ``commands.data.BatchOptions``."""
    from migrations_policy.commands.data import run_for_project

    report = run_for_project(project, **options)
    return DataMigrationsResult(exit_code=report.exit_code, report=report)


@dataclass
class PruneResult(DataMigrationsResult):
    """A prune run: the runner's report (``migrated`` = rows deleted) and the rows kept per prune
    because another table still references them."""

    kept: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "kept_referenced": self.kept}

    def text(self) -> str:
        if not self.report.migrations:
            return "no prunes are declared (Prune objects in the data_migrations modules)"
        kept = [f"  {name}: {rows:,} row(s) kept: another table still references them"
                for name, rows in self.kept.items() if rows]
        return "\n".join([self.report.text(), *kept])


@dataclass
class PruneDryRunResult(Result):
    """``dbsync prune --dry-run``: per prune, the rows a run would delete, counted as of the read."""

    counts: list[Any] = field(default_factory=list)
    max_count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"dry_run": True, "prunes": [
            {"name": c.name, "table": c.table, "would_delete": c.would_delete, "kept_referenced": c.kept_referenced,
             "lower_bound": c.lower_bound,
             **({} if self.max_count is None else {"within_max_count": c.within_max_count,
                                                   "max_count_shared": c.max_count_shared})}
            for c in self.counts]}
        if self.max_count is not None:
            found["max_count"] = self.max_count
            found["within_max_count"] = self.within_max_count()
        return found

    def within_max_count(self) -> int:
        """What a run of ``--max-count`` deletes in all: the budget, or everything if less (the run
        goes on level by level until either runs out)."""
        return min(self.max_count or 0, sum(c.would_delete for c in self.counts))

    def text(self) -> str:
        if not self.counts:
            return "no prunes are declared (Prune objects in the data_migrations modules)"
        lines = [f"{c.name}: {c.table}: {'at least ' if c.lower_bound else ''}{c.would_delete:,} row(s) would be "
                 f"deleted; {c.kept_referenced:,} kept (another table still references them)"
                 + ("" if self.max_count is None else
                    f"; {'up to ' if c.max_count_shared else ''}{c.within_max_count:,} by a run of --max-count "
                    f"{self.max_count:,}") for c in self.counts]
        if self.max_count is not None:
            lines.append(f"a run of --max-count {self.max_count:,} deletes "
                         f"{self.within_max_count():,} row(s) in all, children first")
        lines.append("dry run: counted as of this read, nothing deleted; rows written meanwhile change what a "
                     "run deletes")
        return "\n".join(lines)


def prune(project: Project, dry_run: bool = False,
          **options: Unpack[BatchOptions]) -> PruneResult | PruneDryRunResult:
    """Delete the rows the project declares prunable, in batches, children first (``data/prune/deletion.py``).
    Keyword arguments as ``online_data_migrations`` (``migrations`` selects prunes by name;
    ``options`` does not apply).  *dry_run*: count what a run would delete now, delete nothing."""
    from migrations_policy.commands.data import prune_dry_run_for_project, prune_for_project

    if dry_run:
        max_count = options.get("max_count")
        return PruneDryRunResult(counts=prune_dry_run_for_project(project, options.get("migrations", ()), max_count),
                                 max_count=max_count)
    report, kept = prune_for_project(project, **options)
    return PruneResult(exit_code=report.exit_code, report=report, kept=kept)


# -- plan: migrations_policy.plan ----------------------------------------------------------
def plan(project: Project, max_lock_seconds: float | None = None) -> Result:
    """``dbsync plan``: per pending revision and statement, the table's live size, the lock, rewrite or
    scan, and the estimated time the lock is held (``plan/``); exit 6 over *max_lock_seconds*."""
    from migrations_policy.plan import plan as run

    return run(project, max_lock_seconds=max_lock_seconds)


# -- authoring (init, check-models, revision): migrations_policy.commands.authoring
def init(directory: str, *, template: str = DEFAULT_TEMPLATE, config_file: str = "alembic.ini",
         url: str | None = None, metadata: str | None = None) -> Result:
    """``migrations-policy init DIR``: an alembic environment in the expand/contract layout; *url*
    becomes ``sqlalchemy.url`` of a new ini file, *metadata* (``MODULE:ATTRIBUTE``) env.py's
    ``target_metadata``."""
    from migrations_policy.commands.authoring import init as run

    return run(directory, template=template, config_file=config_file, url=url, metadata=metadata)


def adopt(config_file: str = "alembic.ini", *, template: str = DEFAULT_TEMPLATE) -> Result:
    """``migrations-policy init --adopt``: both branches start at the current head."""
    from migrations_policy.commands.authoring import adopt as run

    return run(config_file, template=template)


def check_models(target: str, project: Project | None = None) -> Result:
    """``migrations-policy check-models MODULE[:NAME]``: object tables without a version column."""
    from migrations_policy.commands.authoring import check_models as run

    return run(target, project)


def revision(project: Project, message: str, rev_id: str | None = None) -> Result:
    """``dbsync revision -m MSG``: autogenerate, split into expand and contract scripts."""
    from migrations_policy.commands.authoring import revision as run

    return run(project, message, rev_id=rev_id)


# -- lint: migrations_policy.commands.lint_command (no alembic import on the lint path) ----------------
