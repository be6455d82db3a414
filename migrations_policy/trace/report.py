"""What the trace saw per statement, and where it contradicts the policy knowledge base."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migrations_policy.commands import Result

#: PostgreSQL table lock modes, weakest first.
PG_LOCK_MODES = ("AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock",
                 "ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock")
#: Exit codes of ``migrations-policy trace``.
EXIT_CLEAN, EXIT_FINDINGS = 0, 1


@dataclass
class StatementTrace:
    """One statement of a revision: what it locked, rewrote, scanned; or why it did not run."""

    revision: str
    sql: str
    locks: list[tuple[str, str]] = field(default_factory=list)  # (relation, mode) newly held
    rewritten: list[str] = field(default_factory=list)  # relations whose relfilenode changed
    created: list[str] = field(default_factory=list)
    scanned: dict[str, int] = field(default_factory=dict)  # table -> rows read by sequential scans
    #: MariaDB: the ALGORITHM/LOCK clauses the server accepted or refused, in the order tried.
    algorithms: list[tuple[str, str]] = field(default_factory=list)  # (clause, "accepted" | refusal)
    not_run: str = ""
    error: str = ""
    policy: str = ""  # what the knowledge base says
    findings: list[str] = field(default_factory=list)

    def strongest_lock(self, relation: str | None = None) -> str | None:
        modes = [mode for name, mode in self.locks if relation is None or name == relation]
        return max(modes, key=PG_LOCK_MODES.index) if modes else None

    def to_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "sql": self.sql, "locks": [list(x) for x in self.locks],
                "rewritten": self.rewritten, "created": self.created, "scanned": self.scanned,
                "algorithms": [list(x) for x in self.algorithms], "not_run": self.not_run, "error": self.error,
                "policy": self.policy, "findings": self.findings}

    def text(self) -> list[str]:
        sql = " ".join(self.sql.split())
        lines = [f"  {sql[:160]}{'...' if len(sql) > 160 else ''}"]
        if self.not_run:
            lines.append(f"    not run: {self.not_run}")
        if self.error:
            lines.append(f"    refused: {self.error}")
        if self.locks:
            lines.append("    locks: " + ", ".join(f"{mode} on {name}" for name, mode in self.locks))
        if self.rewritten:
            lines.append("    REWROTE: " + ", ".join(self.rewritten))
        if self.scanned:
            lines.append("    scanned: " + ", ".join(f"{name} ({rows} rows)" for name, rows in self.scanned.items()))
        if self.created:
            lines.append("    created: " + ", ".join(self.created))
        for clause, outcome in self.algorithms:
            lines.append(f"    {clause}: {outcome}")
        if self.policy:
            lines.append(f"    policy: {self.policy}")
        lines += [f"    FINDING: {finding}" for finding in self.findings]
        return lines


@dataclass
class TraceResult(Result):
    """The trace of the pending expand revisions; exit code 1 when a statement contradicts the policy."""

    dialect: str = ""
    revisions: list[str] = field(default_factory=list)
    statements: list[StatementTrace] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[str]:
        return [f"{s.revision}: {f}" for s in self.statements for f in s.findings]

    def finish(self) -> "TraceResult":
        self.exit_code = EXIT_FINDINGS if self.findings else EXIT_CLEAN
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "dialect": self.dialect, "revisions": self.revisions,
                "statements": [s.to_dict() for s in self.statements], "findings": self.findings,
                "notes": self.notes}

    def text(self) -> str:
        if not self.revisions:
            return "no pending expand revisions to trace"
        lines = []
        for revision in self.revisions:
            lines.append(f"{revision}:")
            for statement in (s for s in self.statements if s.revision == revision):
                lines += statement.text()
        lines += [f"note: {note}" for note in self.notes]
        found = self.findings
        lines.append(f"{len(found)} finding(s): statements that did more than the policy says" if found
                     else "no findings: every traced statement did what the policy says")
        return "\n".join(lines)
