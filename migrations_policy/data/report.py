"""What a run did, per migration: the honest summary table, JSON, and terminal progress."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from . import ledger

# Exit codes of ``dbsync online_data_migrations`` (part of the stable interface).
EXIT_COMPLETE, EXIT_MORE_WORK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2, 127


@dataclass
class MigrationReport:
    name: str
    strategy: str = ""
    strategy_note: str = ""
    remaining_before: int | None = None
    migrated: int = 0
    stuck: int = 0
    remaining_after: int | None = None
    batches: int = 0
    errors: int = 0
    error: str | None = None
    state: str = ledger.NEVER_RUN
    longest_batch_seconds: float = 0.0
    #: (smallest, largest) batch size this run used (they differ with a batch time target).
    batch_sizes: tuple[int, int] = (0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "state": self.state, "strategy": self.strategy, "note": self.strategy_note,
            "remaining_before": self.remaining_before, "migrated": self.migrated, "stuck": self.stuck,
            "remaining_after": self.remaining_after, "errors": self.errors, "error": self.error,
            "batches": self.batches, "longest_batch_seconds": round(self.longest_batch_seconds, 4),
            "batch_sizes": list(self.batch_sizes),
        }


@dataclass
class RunReport:
    migrations: list[MigrationReport] = field(default_factory=list)
    max_count: int | None = None
    max_count_reached: bool = False
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if any(m.state in (ledger.ERROR, ledger.STUCK) for m in self.migrations):
            return EXIT_FAILED
        if any(m.state != ledger.COMPLETE and m.state != ledger.INAPPLICABLE for m in self.migrations):
            return EXIT_MORE_WORK
        return EXIT_COMPLETE

    @property
    def migrated(self) -> int:
        return sum(m.migrated for m in self.migrations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code, "migrated": self.migrated, "max_count": self.max_count,
            "max_count_reached": self.max_count_reached, "seconds": round(self.seconds, 3),
            "migrations": [m.to_dict() for m in self.migrations],
        }

    def text(self) -> str:
        if not self.migrations:
            return "no data migrations are declared (settings: data_migrations, release_mapping)"
        header = ("migration", "remaining before", "migrated", "stuck", "remaining after", "errors", "state")
        rows = [header] + [
            (m.name, _count(m.remaining_before), str(m.migrated), str(m.stuck), _count(m.remaining_after),
             str(m.errors), m.state) for m in self.migrations
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [" | ".join(cell.ljust(w) if i == 0 else cell.rjust(w) if i < 6 else cell
                            for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
        lines.insert(1, "-+-".join("-" * w for w in widths))
        lines.extend(self._notes())
        return "\n".join(lines)

    def _notes(self) -> list[str]:
        notes = []
        for m in self.migrations:
            if m.strategy_note:
                notes.append(f"{m.name}: {m.strategy_note}")
            if m.error:
                notes.append(f"{m.name}: error: {m.error}")
            if m.stuck:
                notes.append(f"{m.name}: {m.stuck} row(s) still pending after their batch migrated them: "
                             "the migration cannot migrate them (fix the data or the migration, then rerun)")
        verdict = {
            EXIT_COMPLETE: "all data migrations are complete",
            EXIT_MORE_WORK: ("--max-count reached, work remains: run again" if self.max_count_reached
                             else "work remains: run again"),
            EXIT_FAILED: "FAILED: errors or stuck rows (see above); other migrations still ran",
        }[self.exit_code]
        return notes + [f"{self.migrated} row(s) migrated in {self.seconds:.1f} s; {verdict}"]


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


class TerminalProgress:
    """One updating line on a terminal: rows done / remaining / rate / ETA."""

    def __init__(self, stream: TextIO, interval: float = 0.2):
        self.stream = stream
        self.interval = interval
        self.started = time.monotonic()
        self._shown = 0.0
        self._width = 0

    def update(self, reports: list[MigrationReport], current: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < self.interval:
            return
        self._shown = now
        done = sum(m.migrated + m.stuck for m in reports)
        total = sum(m.remaining_before or 0 for m in reports)
        remaining = max(total - done, 0)
        rate = done / max(now - self.started, 1e-6)
        eta = f"{remaining / rate:.0f} s" if rate > 0 else "?"
        line = f"{done:,} done, {remaining:,} remaining, {rate:,.0f} rows/s, ETA {eta}"
        if current:
            line += f" [{current}]"
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


class LineProgress:
    """Progress for logs (not a terminal): every *interval* seconds, one line per migration that
    has work: rows done of its total, rows/s and ETA, with thousands separators."""

    def __init__(self, stream: TextIO, interval: float = 5.0, label: str = "online_data_migrations"):
        self.stream, self.interval, self.label = stream, interval, label
        self._shown = time.monotonic()
        self._first: dict[str, tuple[float, int]] = {}  # name -> (when, rows) first seen

    def _line(self, m: MigrationReport, now: float) -> str:
        done = m.migrated + m.stuck
        since, rows_then = self._first.setdefault(m.name, (now, done))
        rate = (done - rows_then) / (now - since) if now > since else 0.0
        line = f"{self.label}: {m.name}: {done:,}"
        if m.remaining_before:
            remaining = max(m.remaining_before - done, 0)
            line += f" of {m.remaining_before:,} rows ({100.0 * done / m.remaining_before:.1f}%)"
            eta = f"{remaining / rate:,.0f} s" if rate > 0 else "?"
        else:
            line += " rows"
            eta = "?"
        return line + f", {rate:,.0f} rows/s, ETA {eta}"

    def update(self, reports: list[MigrationReport], current: str = "", force: bool = False) -> None:
        now = time.monotonic()
        for m in reports:  # the rate of each migration counts from when it was first seen
            self._first.setdefault(m.name, (now, m.migrated + m.stuck))
        if not force and now - self._shown < self.interval:
            return
        self._shown = now
        lines = [self._line(m, now) for m in reports
                 if m.state not in (ledger.COMPLETE, ledger.INAPPLICABLE) or m.name == current]
        if lines:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def close(self) -> None:
        pass


def choose_progress(mode: str, stream: TextIO, interval: float = 5.0, label: str = "online_data_migrations"):
    """The data-migration progress for ``--progress MODE``: None, a live line or log lines."""
    from ..progress import resolve_mode

    mode = resolve_mode(mode, stream)
    if mode == "none":
        return None
    return TerminalProgress(stream) if mode == "live" else LineProgress(stream, interval, label)
