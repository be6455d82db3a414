"""Commands as plain functions: each takes a ``Project`` and plain arguments and
returns a result object (``text()`` for people, ``to_dict()`` for JSON, ``exit_code``).

The shell in ``migrations_policy.cli`` only parses arguments and prints results,
so a project can call these functions from its own tooling, and tests can call
them without subprocesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alembic import command as alembic_command
from alembic.util import CommandError

from .errors import PolicyError, UsageError
from .project import Project, _one_line
from .revisions import CONTRACT, EXPAND, PHASES, BranchStatus, branch_statuses, current_heads


@dataclass
class Result:
    """Base result: exit code 0 and nothing to say."""

    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {}

    def text(self) -> str:
        return ""


def _alembic(fn, *args, **kwargs) -> None:
    """Run an alembic command, turning its CommandError into a one-line PolicyError."""
    try:
        fn(*args, **kwargs)
    except CommandError as exc:
        raise PolicyError(f"alembic: {_one_line(exc)}") from None


def _run_alembic_on(project: Project, conn, fn, *args, **kwargs) -> None:
    """Run alembic command *fn* on our connection (env.py takes it from ``config.attributes``).

    The connection is handed over with no transaction open, so that env.py's
    ``begin_transaction()`` owns the transactions (per migration) and
    ``autocommit_block()`` works.
    """
    if conn.in_transaction():
        conn.commit()
    project.alembic_config.attributes["connection"] = conn
    try:
        _alembic(fn, project.alembic_config, *args, **kwargs)
    except BaseException:
        if conn.in_transaction():
            conn.rollback()
        raise
    else:
        if conn.in_transaction():
            conn.commit()
    finally:
        project.alembic_config.attributes.pop("connection", None)


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


# -- status -----------------------------------------------------------------
@dataclass
class StatusResult(Result):
    branches: dict[str, BranchStatus] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {name: status.to_dict() for name, status in self.branches.items()}

    def text(self) -> str:
        lines = []
        for name, status in self.branches.items():
            current = ", ".join(status.current) or "(none)"
            lines.append(f"{name}: current {current}, head {status.head or '(none)'}, {len(status.pending)} pending")
            lines.extend(f"  pending {rev}" for rev in status.pending)
        return "\n".join(lines)


def status(project: Project) -> StatusResult:
    """Per branch: applied revisions, head, and pending revisions."""
    script = project.script
    with project.connect() as conn:
        heads = current_heads(conn)
    return StatusResult(branches=branch_statuses(script, heads))


# -- upgrade / stamp ----------------------------------------------------------
@dataclass
class UpgradeResult(Result):
    phases: list[str] = field(default_factory=list)
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    sql: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"phases": self.phases, "before": self.before, "after": self.after}

    def text(self) -> str:
        if self.sql is not None:
            return self.sql
        if self.before == self.after:
            return f"{' + '.join(self.phases)}: already at head ({', '.join(self.after) or 'base'})"
        return f"{' + '.join(self.phases)}: upgraded {', '.join(self.before) or 'base'} -> {', '.join(self.after)}"


def _phase_target(project: Project, phase: str) -> str:
    labels = set()
    for rev in project.script.walk_revisions():
        labels.update(rev.branch_labels or ())
    if phase in labels:
        return f"{phase}@heads"
    if phase == EXPAND:
        return "heads"  # a project without the expand/contract layout: one branch
    raise UsageError(f"{project.alembic_ini}: no revision has the branch label {phase!r}")


def upgrade(project: Project, phases: tuple[str, ...] = PHASES) -> UpgradeResult:
    """Apply the heads of each phase in order (expand first)."""
    for phase in phases:
        if phase not in PHASES:
            raise UsageError(f"unknown phase {phase!r}")
    with project.connect() as conn:
        before = sorted(current_heads(conn))
        for phase in phases:
            _run_alembic_on(project, conn, alembic_command.upgrade, _phase_target(project, phase))
        after = sorted(current_heads(conn))
    return UpgradeResult(phases=list(phases), before=before, after=after)


def stamp(project: Project, revisions: list[str], purge: bool = False) -> UpgradeResult:
    """Record *revisions* as applied without running them."""
    with project.connect() as conn:
        before = sorted(current_heads(conn))
        _run_alembic_on(project, conn, alembic_command.stamp, revisions, purge=purge)
        after = sorted(current_heads(conn))
    return UpgradeResult(phases=["stamp"], before=before, after=after)


# -- online data migrations ---------------------------------------------------------
@dataclass
class DataMigrationsResult(Result):
    """The run's ``migrations_policy.data.RunReport``: summary table, JSON, exit code 0/1/2."""

    report: Any = None

    def to_dict(self) -> dict[str, Any]:
        return self.report.to_dict()

    def text(self) -> str:
        return self.report.text()


def online_data_migrations(project: Project, **options: Any) -> DataMigrationsResult:
    """Run the project's online data migrations in batches (docs/data_migrations.rst).

    Keyword arguments: ``batch_size``, ``max_count``, ``sleep``, ``workers``,
    ``migrations`` (names), ``options`` (``"NAME.key=value"`` strings), ``progress``.
    """
    from .data.command import run_for_project

    report = run_for_project(project, **options)
    return DataMigrationsResult(exit_code=report.exit_code, report=report)


__all__ = ["Result", "version", "status", "upgrade", "stamp", "online_data_migrations", "EXPAND", "CONTRACT"]
