"""``dbsync plan``'s result: per pending revision and statement, the table, its size, the lock,
rewrite or scan, the estimated time the lock is held; text and JSON; the exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migrations_policy.core.result import Result

#: Exit codes of ``dbsync plan`` (0 and 2 as every command; 6 is plan's own: no other dbsync
#: command gives 6 a meaning).
EXIT_OK, EXIT_TOO_LONG = 0, 6


@dataclass
class PlannedStatement:
    line: int
    operation: str  # "add column nodes.meta"
    kind: str
    table: str | None
    size: Any  # sizes.TableSize, or None: no table
    lock: str  # the policy's lock, or "brief" (catalog only)
    blocks_reads: bool
    blocks_writes: bool
    rewrite: bool
    scan: bool
    note: str = ""
    fails: str = ""
    sql: str = ""
    #: The work the estimate is for (``plan.rate.work_of``: "scan", "foreign key check", "index build",
    #: "rewrite", "rewrite computing each row", "rebuild in place"), None when the lock is brief.
    work: str | None = None
    #: Estimated seconds the blocking lock is held (0.0 brief; None: cannot be estimated, and why).
    seconds: float | None = 0.0
    unknown: str = ""
    exceeds: bool = False

    @property
    def blocking(self) -> bool:
        return self.blocks_reads or self.blocks_writes or self.rewrite

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "operation": self.operation, "kind": self.kind, "table": self.table,
                "size": None if self.size is None else self.size.to_dict(), "lock": self.lock,
                "blocking": self.blocking, "blocks_reads": self.blocks_reads, "blocks_writes": self.blocks_writes,
                "rewrite": self.rewrite, "scan": self.scan, "work": self.work, "note": self.note,
                "fails": self.fails or None, "sql": self.sql or None,
                "estimated_seconds": None if self.seconds is None else round(self.seconds, 3),
                "unknown": self.unknown or None, "exceeds_max_lock_seconds": self.exceeds}

    def text(self) -> str:
        effects = [w for flag, w in ((self.rewrite, "rewrites"), (self.scan, "scans")) if flag]
        blocks = ("reads and writes" if self.blocks_reads and self.blocks_writes else
                  "writes" if self.blocks_writes or self.rewrite else "reads" if self.blocks_reads else "")
        head = f"  line {self.line}: {self.operation}"
        if self.size is not None:
            head += f" [{_size(self.size)}]"
        parts = [f"lock {self.lock}"] + effects
        if blocks:
            parts.append(f"blocks {blocks} for {_duration(self)}")
        line = f"{head}: {', '.join(parts)}"
        if self.fails:
            line += f"; FAILS: {self.fails}"
        if self.exceeds:
            line += "  <-- over --max-lock-seconds"
        return line


def _size(size) -> str:
    if not size.exists:
        return "table absent"
    rows = "? rows" if size.rows is None else f"{'~' if size.estimated else ''}{size.rows:,} rows"
    return rows + ("" if size.bytes is None else f", {_bytes(size.bytes)}")


def _bytes(value: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return ""  # pragma: no cover


def _duration(statement: PlannedStatement) -> str:
    if statement.seconds is None:
        return f"an unknown time ({statement.unknown})"
    return f"~{statement.seconds:,.2f} s (estimated {statement.work})" if statement.work else "a brief moment"


@dataclass
class PlannedRevision:
    revision: str
    phase: str
    path: str
    statements: list[PlannedStatement] = field(default_factory=list)
    unread: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "phase": self.phase, "path": self.path, "unread": self.unread,
                "statements": [s.to_dict() for s in self.statements]}


@dataclass
class PlanResult(Result):
    database: str = ""  # masked URL
    dialect: str = ""
    max_lock_seconds: float | None = None
    revisions: list[PlannedRevision] = field(default_factory=list)
    rates: list[Any] = field(default_factory=list)  # rate.ReadRate
    contract_note: str = ""
    #: How the durations are estimated (``rate.method``).
    method: str = ""

    @property
    def exceeding(self) -> list[tuple[PlannedRevision, PlannedStatement | None]]:
        """Statements over the threshold, and unread revisions (their statements are unknown)."""
        if self.max_lock_seconds is None:
            return []
        found = []
        for rev in self.revisions:
            if rev.unread:
                found.append((rev, None))
            found.extend((rev, s) for s in rev.statements if s.exceeds)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"database": self.database, "dialect": self.dialect, "max_lock_seconds": self.max_lock_seconds,
                "exit_code": self.exit_code, "estimate_method": self.method,
                "read_rates": [r.to_dict() for r in self.rates], "contract": self.contract_note or None,
                "revisions": [r.to_dict() for r in self.revisions],
                "exceeding": [{"revision": rev.revision, "line": s.line if s else None,
                               "operation": s.operation if s else None,
                               "estimated_seconds": None if s is None or s.seconds is None else round(s.seconds, 3),
                               "why": (s.unknown or "estimated over the threshold") if s else rev.unread}
                              for rev, s in self.exceeding]}

    def text(self) -> str:
        if not self.revisions:
            return f"{self.database}: nothing pending: dbsync upgrade would apply no revision"
        lines = [f"{self.database} ({self.dialect}): dbsync upgrade would apply {len(self.revisions)} revision(s)"]
        for rev in self.revisions:
            lines.append(f"{rev.phase} {rev.revision} ({rev.path})")
            if rev.unread:
                lines.append(f"  statements unknown: {rev.unread}")
            lines.extend(s.text() for s in rev.statements)
            if not rev.statements and not rev.unread:
                lines.append("  (no statement)")
        if self.contract_note:
            lines.append(self.contract_note)
        for rate in self.rates:
            per_second = rate.rows_per_second
            lines.append(f"read rate of {rate.table}: {rate.rows:,} rows in {rate.seconds:.3f} s"
                         + (f" = {per_second:,.0f} rows/s" if per_second else ""))
        lines.append("durations are estimates: " + self.method)
        if self.max_lock_seconds is not None:
            over = self.exceeding
            lines.append(f"{len(over)} statement(s) would hold a blocking lock longer than {self.max_lock_seconds:g} s "
                         "or for an unknown time" if over else
                         f"no statement would hold a blocking lock longer than {self.max_lock_seconds:g} s")
        return "\n".join(lines)

