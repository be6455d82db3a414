"""``dbsync version``, ``status`` and ``check``: where the database stands (``state.assess``),
reported for people and as JSON, and ``check``'s exit code for automation (glance's convention:
0 nothing to do, 3 expand pending, 4 data migrations pending, 5 contract allowed, 2 a pending
revision cannot be applied as it stands).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migrations_policy.commands.state import (CHECK_CANNOT_APPLY,
    CHECK_CONTRACT_ALLOWED,
    CHECK_DATA_PENDING,
    CHECK_EXPAND_PENDING,
    CHECK_NOTHING_TO_DO,
    UpgradeState,
    assess)
from migrations_policy.core.project import Project
from migrations_policy.core.result import Result
from migrations_policy.core.revisions import CONTRACT, current_heads
from migrations_policy.gate.verdict import NOT_DECLARED


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
