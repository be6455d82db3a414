"""Commands as plain functions: each takes a ``Project`` and plain arguments and
returns a result object (``text()`` for people, ``to_dict()`` for JSON, ``exit_code``).

The shell in ``migrations_policy.cli`` only parses arguments and prints results,
so a project can call these functions from its own tooling, and tests can call
them without subprocesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alembic import command as alembic_command
from alembic.util import CommandError

from sqlalchemy import exc as sa_exc

from migrations_policy.core import project_code
from migrations_policy.core.errors import PolicyError, UsageError
from migrations_policy.gate.verdict import NOT_DECLARED, DataDestroyed, GateRefused, NotWired
from migrations_policy.expand.lock_timeout import is_retryable
from migrations_policy.core.progress import watch
from migrations_policy.core.project import Project, _one_line
from migrations_policy.core.result import Result
from migrations_policy.core.revisions import CONTRACT, EXPAND, PHASES, branch_statuses, current_heads
from migrations_policy.gate.runtime import (FORCE_ATTRIBUTE,
    GUARD_RAN_ATTRIBUTE,
    REQUIRE_GUARD_ATTRIBUTE,
    STATS_ATTRIBUTE)
from migrations_policy.commands.state import (CHECK_CANNOT_APPLY,
    CHECK_CONTRACT_ALLOWED,
    CHECK_DATA_PENDING,
    CHECK_EXPAND_PENDING,
    CHECK_NOTHING_TO_DO,
    UpgradeState,
    assess,
    object_versions_before_expand)
from migrations_policy.window.sync_keeper import SyncTriggerRefused
from migrations_policy.authoring.scaffold import DEFAULT_TEMPLATE

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from migrations_policy.commands.data import BatchOptions


def _alembic(fn, *args, **kwargs) -> None:
    """Run an alembic command; its errors become PolicyErrors (gate refusal: exit 4)."""
    with watch() as running:
        _alembic_watched(running, fn, *args, **kwargs)


def _alembic_watched(running, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except NotImplementedError as exc:  # an op this dialect cannot run (SQLite: ALTER of constraints)
        where = running.describe() or "a revision"
        raise PolicyError(f"migration failed: {where}: {_one_line(exc)}") from None
    except (GateRefused, NotWired, DataDestroyed, SyncTriggerRefused) as exc:
        raise PolicyError(str(exc), exit_code=exc.exit_code) from None
    except CommandError as exc:  # journal.py's refusals carry their own exit code
        raise PolicyError(f"alembic: {_one_line(exc)}", exit_code=getattr(exc, "exit_code", None)) from None
    except (ImportError, OSError) as exc:  # env.py missing, or the project's env.py cannot import its code
        if running.describe():  # no: a revision's upgrade() imported or opened something
            raise PolicyError(f"migration failed: {running.describe()}: {project_code.describe(exc)}") from None
        if project_code.culprit(exc) is not None:  # env.py or a revision script, loading
            raise PolicyError(f"alembic: cannot load the project's code: {project_code.describe(exc)}") from None
        raise PolicyError(f"alembic: cannot load the environment's env.py: {_one_line(exc)}") from None
    except sa_exc.DBAPIError as exc:
        if is_retryable(exc):
            raise PolicyError("gave up waiting for a lock after every retry: another transaction holds a lock "
                              f"on the table ({_one_line(exc)}); the revision stopped before that statement "
                              "(statements that committed before it are journaled: `dbsync status` shows them), "
                              "rerun when that transaction has finished: the rerun resumes") from None
        raise PolicyError(f"migration failed: {running.describe() or 'a revision'}: {_one_line(exc)}") from None
    except (KeyboardInterrupt, PolicyError):  # ours (env.py's hook raised it): already one line
        raise
    except BaseException as exc:
        if _is_driver_error(exc):  # a revision that used the DB-API connection itself (op.get_bind().connection...)
            raise PolicyError(f"migration failed: {running.describe() or 'a revision'}: {_one_line(exc)}") from None
        if not project_code.stopped_by_project(exc):
            raise  # raised by the libraries alone (ours included): a bug, with its traceback
        # the script, env.py or the project's code raised, or called sys.exit(): what ran of the
        # revision rolled back with its transaction (or is journaled), and the version did not move
        raise PolicyError(f"migration failed: {running.describe() or 'a revision'}: "
                          f"{project_code.describe(exc)}") from None


def _is_driver_error(exc: BaseException) -> bool:
    """A PEP 249 driver's own error (sqlite3, psycopg, PyMySQL ...), not wrapped by SQLAlchemy."""
    return any(k.__name__ in ("DatabaseError", "InterfaceError") and k.__module__ != __name__
               for k in type(exc).__mro__)


def run_alembic_on(project: Project, conn, fn, *args, **kwargs) -> None:
    """Run alembic command *fn* on our connection (env.py takes it from ``config.attributes``).

    The connection is handed over with no transaction open, so that env.py's
    ``begin_transaction()`` owns the transactions (per migration) and
    ``autocommit_block()`` works.
    """
    if conn.in_transaction():
        conn.commit()
    attributes = project.alembic_config.attributes
    attributes.update({"connection": conn, REQUIRE_GUARD_ATTRIBUTE: True, GUARD_RAN_ATTRIBUTE: False})
    try:
        _alembic(fn, project.alembic_config, *args, **kwargs)
    except BaseException:
        if conn.in_transaction():
            conn.rollback()
        raise
    else:
        if conn.in_transaction():
            conn.commit()
        if not attributes.get(GUARD_RAN_ATTRIBUTE):
            env_py = Path(project.script.dir, "env.py")
            raise PolicyError(f"{env_py}: env.py did not run the migrations through migrations_policy's gate "
                              "(it must call context.configure(..., **policy.configure_options(context)) and "
                              "context.run_migrations()); nothing was applied", exit_code=NotWired.exit_code)
    finally:
        for key in ("connection", REQUIRE_GUARD_ATTRIBUTE, GUARD_RAN_ATTRIBUTE):
            attributes.pop(key, None)


# -- version ----------------------------------------------------------------
@dataclass
class VersionResult(Result):
    heads: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.heads}

    def text(self) -> str:
        return "\n".join(self.heads) if self.heads else "(no revision applied)"


def version(project: Project) -> VersionResult:
    """The revisions recorded in the database's alembic version table."""
    with project.connect() as conn:
        return VersionResult(heads=sorted(current_heads(conn)))


# -- status / check ---------------------------------------------------------------
@dataclass
class StatusResult(Result):
    state: UpgradeState | None = None

    def to_dict(self) -> dict[str, Any]:
        state = self.state
        data = {name: status.to_dict() for name, status in state.branches.items()}
        data["data_migrations"] = [{"name": m.name, "remaining": m.remaining, "estimated": m.estimated,
                                    "state": m.state, "runners": state.runners.get(m.name, 0)}
                                   for m in state.data_migrations]
        data["contract_allowed"] = state.contract_allowed
        data["partly_applied"] = [p.to_dict() for p in state.partly_applied]
        data["sync_triggers_left"] = state.sync_triggers_left
        data["drops_data"] = state.drops_data
        data["gate"] = state.verdict.to_dict()
        if state.object_versions is not None:
            data["object_versions"] = state.object_versions.to_dict()
        return data

    def text(self) -> str:
        state = self.state
        lines = []
        for name, status in state.branches.items():
            current = ", ".join(status.current) or "(none)"
            lines.append(f"{name}: current {current}, head {status.head or '(none)'}, {len(status.pending)} pending")
            lines.extend(f"  pending {rev}" for rev in status.pending)
        lines.extend(p.describe() for p in state.partly_applied)
        lines.append(f"data migrations: {len(state.data_pending)} with rows remaining")
        for m in state.data_migrations:
            remaining = ("n/a (table or columns absent)" if m.remaining is None else
                         f"~{m.remaining:,} remaining (estimate; --exact counts)" if m.estimated else
                         f"{m.remaining:,} remaining")
            runners = state.runners.get(m.name, 0)
            at_work = f", {runners} runner{'' if runners == 1 else 's'} at work" if runners else ""
            lines.append(f"  {m.name}: {remaining}, {m.state}{at_work}")
        if state.verdict.defects:
            lines.append("cannot be applied as they stand (fix the scripts):")
            lines.extend(f"  {defect}" for defect in state.verdict.defects)
        lines.extend(state.sync_triggers_left)
        if state.branches[CONTRACT].pending:
            lines.append("contract: " + ("allowed" if state.contract_allowed else "refused by the gate"))
            lines.extend(f"  {p.describe()}" for p in state.verdict.pending)
            lines.extend(f"  {c} needs expand revision {e} applied first" for c, e in state.verdict.missing_expand)
            lines.extend(f"  {v.describe()}" for v in state.verdict.violations)
            lines.extend(f"  {line}" for line in state.drops_data)
            if state.verdict.deferred:
                lines.append(f"  existing rows not yet checked against {len(state.verdict.deferred)} constraint(s) "
                             "it adds (checked once nothing else is pending; --exact checks now)")
        if state.object_versions is not None and not state.object_versions.ok:
            lines.append("object versions: " + "; ".join(state.object_versions.problems()))
        return "\n".join(lines)


def status(project: Project, exact: bool = False) -> StatusResult:
    """Per branch: applied, head, pending; data migrations (remaining rows estimated by the
    planner unless *exact*); whether contract is allowed."""
    with project.connect() as conn:
        project.check_version_table(conn)
        return StatusResult(state=assess(project, conn, exact=exact))


@dataclass
class CheckResult(StatusResult):
    def meaning(self) -> str:
        if self.exit_code == CHECK_CANNOT_APPLY and self.state.sync_triggers_left and not (
                self.state.verdict.defects or self.state.reverting):
            return CHECK_TRIGGERS_LEFT
        if self.exit_code == CHECK_DATA_PENDING and self.state.verdict.violations and not self.state.data_pending:
            return CHECK_DATA_VIOLATES
        if self.exit_code == CHECK_DATA_PENDING and self._undeclared():
            return CHECK_NOT_DECLARED
        return CHECK_MEANINGS[self.exit_code]

    def _undeclared(self) -> list[str]:
        """The required data migrations no listed module declares, described (what to list where)."""
        return [p.describe() for p in self.state.verdict.pending if p.state == NOT_DECLARED]

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "meaning": self.meaning(), **super().to_dict()}

    def text(self) -> str:
        partly = [p.describe() for p in self.state.partly_applied]
        if self.exit_code == CHECK_CANNOT_APPLY:
            return "\n".join(["; ".join([self.meaning(), *self.state.verdict.defects]),
                              *self.state.sync_triggers_left, *partly])
        violations = [v.describe() for v in self.state.verdict.violations] if self.exit_code == CHECK_DATA_PENDING \
            else []
        undeclared = self._undeclared() if self.exit_code == CHECK_DATA_PENDING else []
        return "\n".join([self.meaning(), *undeclared, *violations, *partly])


CHECK_MEANINGS = {
    CHECK_NOTHING_TO_DO: "nothing to do: schema at head, data migrations complete",
    CHECK_EXPAND_PENDING: "expand pending: run dbsync upgrade --expand",
    CHECK_DATA_PENDING: "data migrations pending: run dbsync online_data_migrations",
    CHECK_CONTRACT_ALLOWED: "contract pending and allowed: run dbsync upgrade --contract",
    CHECK_CANNOT_APPLY: "a pending revision cannot be applied as it stands",
}
#: Exit code 2 when only sync triggers left behind make it (no pending revision is at fault).
CHECK_TRIGGERS_LEFT = "sync triggers left behind: remove them (each is named below)"
#: Exit code 4 when a required data migration is declared by no listed module (running them cannot help).
CHECK_NOT_DECLARED = ("data migrations the contract requires are not declared: list the modules that declare "
                      "them in the data_migrations setting (each is named below)")
#: Exit code 4 when only existing rows stop the contract (no data migration has rows left).
CHECK_DATA_VIOLATES = ("contract refused: existing rows violate (or cannot be checked against) a constraint it "
                       "adds: fix or delete them")


def check(project: Project) -> CheckResult:
    """What the next upgrade step is, as an exit code for automation (glance's convention)."""
    with project.connect() as conn:
        project.check_version_table(conn)
        state = assess(project, conn, decisive=True)
    if state.object_versions is not None:
        state.object_versions.raise_for_problems()
    return CheckResult(exit_code=state.check_code(), state=state)


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
    *to* (``rollback.py``).  Each statement is judged again under its lock as it runs (``gate/at_risk.py``)."""
    from migrations_policy.lifecycle import rollback as rolling_back
    from migrations_policy.commands.data import project_registry
    from migrations_policy.gate.runtime import COMMAND_ATTRIBUTE

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


def prune(project: Project, **options: Unpack[BatchOptions]) -> PruneResult:
    """Delete the rows the project declares prunable, in batches, children first (``data/prune.py``).
    Keyword arguments as ``online_data_migrations`` (``migrations`` selects prunes by name;
    ``options`` does not apply)."""
    from migrations_policy.commands.data import prune_for_project

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


# -- lint: migrations_policy.commands.lint (no alembic import on the lint path) ----------------
