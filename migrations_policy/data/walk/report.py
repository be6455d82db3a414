"""What a run did, per migration: the honest summary table, JSON, and terminal progress."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from migrations_policy.core.errors import EXIT_MIGRATION_FAILED
from migrations_policy.data import ledger

# Exit codes of ``dbsync online_data_migrations`` (part of the stable interface).
EXIT_COMPLETE, EXIT_MORE_WORK, EXIT_CAUGHT_UP, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 3, 2, 130
#: A migration failed or left stuck rows (the others still ran): dbsync's one code for a migration that failed.
EXIT_FAILED = EXIT_MIGRATION_FAILED
#: States of a migration that do not keep a run from being caught up (exit 3).
_AS_FAR_AS_IT_GETS = (ledger.COMPLETE, ledger.INAPPLICABLE, ledger.CAUGHT_UP, ledger.WAITING)


@dataclass
class MigrationReport:
    name: str
    strategy: str = ""
    strategy_note: str = ""
    remaining_before: int | None = None
    #: *remaining_before* is the planner's estimate (a big table is not counted).
    remaining_before_estimated: bool = False
    migrated: int = 0
    #: Of *migrated* (counted there too): rows a deleting migration (``deletes=True``, ``dbsync prune``) deleted.
    deleted: int = 0
    stuck: int = 0
    remaining_after: int | None = None
    #: *remaining_after* is the planner's estimate (rows remain; 0 is always verified).
    remaining_after_estimated: bool = False
    batches: int = 0
    errors: int = 0
    error: str | None = None
    state: str = ledger.NEVER_RUN
    longest_batch_seconds: float = 0.0
    #: (smallest, largest) batch size this run used (they differ with a batch time target).
    batch_sizes: tuple[int, int] = (0, 0)
    #: Batches that gave way to an application transaction on a row lock (rolled back, retried smaller).
    yielded: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "state": self.state, "strategy": self.strategy, "note": self.strategy_note,
            "remaining_before": self.remaining_before, "remaining_before_estimated": self.remaining_before_estimated,
            "migrated": self.migrated, "deleted": self.deleted, "stuck": self.stuck,
            "remaining_after": self.remaining_after, "remaining_after_estimated": self.remaining_after_estimated,
            "errors": self.errors, "error": self.error,
            "batches": self.batches, "longest_batch_seconds": round(self.longest_batch_seconds, 4),
            "batch_sizes": list(self.batch_sizes), "yielded": self.yielded,
        }


@dataclass
class RunReport:
    migrations: list[MigrationReport] = field(default_factory=list)
    max_count: int | None = None
    max_count_reached: bool = False
    seconds: float = 0.0
    #: Ctrl-C or SIGTERM stopped the run (the batch in progress rolled back).
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        """130 interrupted; 8 an error or stuck rows; 1 a walk stopped before its end (--max-count);
        3 caught up: every walk reached its end but rows written behind it meanwhile remain
        (or wait for those: ``run_last``); 0 complete."""
        states = {m.state for m in self.migrations}
        if self.interrupted:
            return EXIT_INTERRUPTED
        if states & {ledger.ERROR, ledger.STUCK}:
            return EXIT_FAILED
        if states - set(_AS_FAR_AS_IT_GETS):
            return EXIT_MORE_WORK
        if states & {ledger.CAUGHT_UP, ledger.WAITING}:
            return EXIT_CAUGHT_UP
        return EXIT_COMPLETE

    @property
    def migrated(self) -> int:
        return sum(m.migrated for m in self.migrations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code, "migrated": self.migrated, "max_count": self.max_count,
            "max_count_reached": self.max_count_reached, "caught_up": self.exit_code == EXIT_CAUGHT_UP,
            "interrupted": self.interrupted, "seconds": round(self.seconds, 3),
            "migrations": [m.to_dict() for m in self.migrations],
        }

    def text(self) -> str:
        if not self.migrations:
            return "no data migrations are declared (settings: data_migrations, release_mapping)"
        header = ("migration", "remaining before", "migrated", "stuck", "remaining after", "errors", "state")
        rows = [header] + [
            (m.name, _count(m.remaining_before, m.remaining_before_estimated),
             f"{m.deleted} deleted" if m.deleted else str(m.migrated), str(m.stuck),
             _count(m.remaining_after, m.remaining_after_estimated),
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
            if m.yielded:
                notes.append(f"{m.name}: {m.yielded} batch(es) gave way to application transactions on a row lock "
                             "(rolled back and retried smaller)")
            if m.stuck:
                notes.append(f"{m.name}: {m.stuck} row(s) still pending after their batch migrated them: "
                             "the migration cannot migrate them (fix the data or the migration, then rerun)")
        if any(m.remaining_before_estimated or m.remaining_after_estimated for m in self.migrations):
            notes.append("~: the planner's estimate of the rows pending (--exact counts them)")
        verdict = {
            EXIT_COMPLETE: "all data migrations are complete",
            EXIT_MORE_WORK: ("--max-count reached, work remains: run again" if self.max_count_reached
                             else "work remains: run again"),
            EXIT_FAILED: "FAILED: errors or stuck rows (see above); other migrations still ran",
            EXIT_CAUGHT_UP: ("caught up: every walk reached its end, but rows were written behind it meanwhile "
                             "(code of the previous release still running?); once that code is stopped, a final "
                             "run exits 0"),
            EXIT_INTERRUPTED: "interrupted: the batch in progress was rolled back; run again to continue",
        }[self.exit_code]
        deleted = sum(m.deleted for m in self.migrations)
        done = f"{self.migrated - deleted} row(s) migrated" + (f", {deleted} row(s) DELETED" if deleted else "")
        return notes + [f"{done} in {self.seconds:.1f} s; {verdict}"]


def _count(value: int | None, estimated: bool = False) -> str:
    return "-" if value is None else f"~{value}" if estimated else str(value)


class _Totals:
    """Each migration's total as the progress shows it: its rows pending when the run began,
    unless the work already done contradicts that estimate (more rows done than it said): then
    the rows done plus a fresh estimate of what is pending now (*estimator*, given the
    migration's name; the command sets it), or no total at all when there is none.  A
    percentage is never above 100% and an ETA never comes from a total the work has passed."""

    def __init__(self) -> None:
        #: name -> the rows still pending now, estimated (None: no estimate); set by the command.
        self.estimator: Callable[[str], int | None] | None = None
        self._fresh: dict[str, tuple[int, bool] | None] = {}  # name -> (total, estimated) refreshed
        self._lock = threading.Lock()

    def total(self, m: MigrationReport, done: int) -> tuple[int, bool] | None:
        """(total, estimated) of *m* with *done* rows done; None: no plausible total."""
        with self._lock:
            current = self._fresh.get(m.name, (m.remaining_before, m.remaining_before_estimated)) \
                if m.name in self._fresh or m.remaining_before is not None else None
            if current is not None and current[0] >= done:
                return current
            fresh = None
            if self.estimator is not None:
                try:
                    pending = self.estimator(m.name)
                except Exception:  # noqa: BLE001 - progress is best effort: show no total instead
                    pending = None
                if pending is not None:
                    fresh = (done + pending, True)
            self._fresh[m.name] = fresh
            return fresh


class TerminalProgress(_Totals):
    """One updating line on a terminal: rows done / remaining / rate / ETA."""

    def __init__(self, stream: TextIO, interval: float = 0.2):
        super().__init__()
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
        totals = [self.total(m, m.migrated + m.stuck) for m in reports]
        rate = done / max(now - self.started, 1e-6)
        if all(t is not None for t in totals):
            remaining = max(sum(t[0] for t in totals) - done, 0)
            about = "~" if any(t[1] for t in totals) else ""
            eta = f"{remaining / rate:,.0f} s" if rate > 0 else "?"
            line = f"{done:,} done, {about}{remaining:,} remaining, {rate:,.0f} rows/s, ETA {eta}"
        else:
            line = f"{done:,} done, {rate:,.0f} rows/s, ETA ?"
        if current:
            line += f" [{current}]"
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


class LineProgress(_Totals):
    """Progress for logs (not a terminal): every *interval* seconds, one line per migration
    under way: rows done of its total, rows/s and ETA, with thousands separators.  A migration
    with nothing to do, or whose walk has ended (its line said so once), is not repeated."""

    def __init__(self, stream: TextIO, interval: float = 5.0, label: str = "online_data_migrations"):
        super().__init__()
        self.stream, self.interval, self.label = stream, interval, label
        self._shown = time.monotonic()
        self._first: dict[str, tuple[float, int]] = {}  # name -> (when, rows) first seen
        self._last: dict[str, int] = {}  # name -> rows done its last line said

    def _line(self, m: MigrationReport, now: float) -> str:
        done = m.migrated + m.stuck
        since, rows_then = self._first.get(m.name, (now, done))
        rate = (done - rows_then) / (now - since) if now > since else 0.0
        line = f"{self.label}: {m.name}: {done:,}"
        total = self.total(m, done)
        if total is not None and total[0]:
            remaining = total[0] - done
            about = "~" if total[1] else ""
            line += f" of {about}{total[0]:,} rows ({100.0 * done / total[0]:.1f}%)"
            eta = f"{remaining / rate:,.0f} s" if rate > 0 else "0 s" if not remaining else "?"
        else:
            line += " rows"
            eta = "?"
        return line + f", {rate:,.0f} rows/s, ETA {eta}"

    def _under_way(self, m: MigrationReport, current: str) -> bool:
        """Whether *m* gets a line: started, with work, and something new to say."""
        if m.state in (ledger.COMPLETE, ledger.INAPPLICABLE) and m.name != current:
            return False
        done = m.migrated + m.stuck
        if m.remaining_before is None or (m.remaining_before == 0 and not done):
            return False  # not started yet, or nothing to do
        if self._last.get(m.name) == done:
            return False  # said already: its walk has ended (a last batch found nothing) or waits
        return True

    def update(self, reports: list[MigrationReport], current: str = "", force: bool = False) -> None:
        now = time.monotonic()
        for m in reports:  # the rate of each migration counts from its first batch (not its wait for a turn)
            if m.migrated + m.stuck:
                self._first.setdefault(m.name, (now, m.migrated + m.stuck))
        if not force and now - self._shown < self.interval:
            return
        self._shown = now
        shown = [m for m in reports if self._under_way(m, current)]
        lines = [self._line(m, now) for m in shown]
        for m in shown:
            self._last[m.name] = m.migrated + m.stuck
        if lines:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def close(self) -> None:
        pass


def choose_progress(mode: str, stream: TextIO, interval: float = 5.0, label: str = "online_data_migrations"):
    """The data-migration progress for ``--progress MODE``: None, a live line or log lines."""
    from migrations_policy.core.progress import resolve_mode

    mode = resolve_mode(mode, stream)
    if mode == "none":
        return None
    return TerminalProgress(stream) if mode == "live" else LineProgress(stream, interval, label)
