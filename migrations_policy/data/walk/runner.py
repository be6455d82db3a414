"""The runner behind ``dbsync online_data_migrations``.

Each migration is walked once per run, in batches, one transaction per batch:

* **range** stepping over dense integer keys: ``key > a AND key <= a + n AND
  pending`` (an index range scan; the fastest way through a big table);
* **keyset** pagination otherwise (sparse or non-integer keys): the batch's upper
  key is ``max`` of the next *n* pending keys after the cursor (never OFFSET).

Rows the migration cannot migrate are *stuck*: the set-based form's UPDATE skips
them (``DataMigration.unmigratable``) and they are counted once the walk is over;
for the function form they are the batch's rows still pending after it ran.  The
cursor passes them (never selected again in this run) and they fail the run.
Migrations take turns (round robin, ``--workers`` at a time), and a
``--max-count`` budget is shared out between the migrations still working, so
none starves.  Several runners (processes, hosts) on one migration work at once
on key ranges each claims for itself (``claims``); where claims cannot work
(SQLite, non-integer keys) they take turns, one batch at a time.  What remains is
always counted live from the pending predicate (``pending`` decides what remains
for the gate, ``check`` and ``status``).

This module holds the batch loop (``_Walk.step``) and the run; the walk's other concerns
have their own modules: ``survey`` (where a walk starts, how it ends and what it records),
``claiming`` (key ranges claimed beside other runners), ``sizing`` (the next batch's size),
``yielding`` (a batch gives way to live traffic), ``drive`` (the workers and the budget).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from migrations_policy.core import project_code
from migrations_policy.core.urls import mask_text
from migrations_policy.core.engines import interrupts_keep_sqlite_sessions
from migrations_policy.core.errors import UsageError, interrupt_behind
from migrations_policy.core.project import _one_line
from migrations_policy.data.walk import claim_table, locks, yielding
from migrations_policy.data.remaining import completion
from migrations_policy.data import ledger
from migrations_policy.data.declare import Batch, DataMigration, Registry, key_bound
from migrations_policy.data.remaining.pending import index_lookups, one_row_plans
from migrations_policy.data.walk.drive import (LIMITS,  # noqa: F401 (LIMITS: re-exported)
    _Budget,
    _Connections,
    _drive,
    validate)
from migrations_policy.data.walk.report import EXIT_USAGE, MigrationReport, RunReport
from migrations_policy.data.walk.sizing import BatchSizer, next_batch_size  # noqa: F401 (re-exported)
from migrations_policy.data.walk.claiming import CLAIM_BATCHES, Chunk, Claiming  # noqa: F401 (re-exported)
from migrations_policy.data.walk.survey import DENSE_THRESHOLD, Survey  # noqa: F401 (re-exported)

#: With a batch time target, a batch grows to at most this many times ``--batch-size``.
MAX_GROWTH = 10
#: A walk with nothing left to claim waits this long at most for other runners' claimed
#: batches to commit (or their sessions to die), polling every ``PEER_POLL`` seconds.
PEER_WAIT = 60.0
PEER_POLL = 0.05


@dataclass
class RunOptions:
    #: Rows per batch; with *batch_seconds*, the size of each migration's first batch.
    batch_size: int = 5000
    #: Target duration of one batch transaction (None: every batch has *batch_size* rows).
    #: Each batch is then sized from the fixed and per-row parts of the recent batches' time
    #: (``sizing.BatchSizer``; at most ``MAX_GROWTH`` x *batch_size*): about the target, but
    #: never so small that the fixed part is over a tenth of a batch's time, whatever the load.
    batch_seconds: float | None = None
    max_count: int | None = None
    sleep: float = 0.0
    workers: int = 1
    names: Sequence[str] = ()
    #: Count the rows pending before and after the walk (a full scan of a big table each);
    #: default: 0 verified, else counted in a table of at most ``PROBE_WINDOW`` rows, else
    #: the planner's estimate (``pending.remaining``).
    exact: bool = False
    #: {migration name: {option key: raw string}} from ``--option NAME.key=value``.
    options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


# -- queries of the batches ------------------------------------------------------------
def pending_keys(conn: Connection, migration: DataMigration, where: Any, current: bool = False) -> set[Any]:
    """The keys of the rows matching *where* (a batch's ``key range AND pending``).

    *current*: inside a batch on MySQL/MariaDB, read what is committed now (a locking
    read), not what the transaction's REPEATABLE READ snapshot saw before the batch's
    writes; otherwise a row another writer fixed meanwhile would count as stuck.
    """
    query = sa.select(migration.key_column).where(where)
    if current and conn.dialect.name in ("mysql", "mariadb"):
        query = query.with_for_update(read=True)
    return set(conn.execute(query).scalars())


# -- one migration's walk -------------------------------------------------------------
class _Walk(Survey, Claiming):
    def __init__(self, migration: DataMigration, options: Mapping[str, Any], run: RunOptions):
        self.migration = migration
        self.options = options
        self.run = run
        self.report = MigrationReport(migration.name)
        self.batch_size = run.batch_size  # this migration's next batch (adapted to batch_seconds)
        self.finished = False
        self.walked_to_end = False  # the walk found nothing pending ahead of its cursor
        self.finalized = False  # finish() or interrupted() recorded the final state
        self.stop: threading.Event | None = None  # set when the run is interrupted
        self.cursor: Any = None
        self.high: Any = None
        self.walked_to: Any = None  # the upper key of this run's last batch
        self.first_key: Any = None  # the first pending key this run's walk started at
        self.resumed_from: Any = None  # the ledger's cursor this walk resumed past (None: from the start)
        self.swept = False  # a resumed walk went back for the rows behind where it resumed
        self.ledger_key: str | None = None  # the ledger's last_key as this runner last saw or wrote it
        self.integer_keys = False  # the pending keys fit a claim's bounds (claim_table.usable_key)
        self.claiming = False  # batches on claimed key ranges, beside other runners (claim_table.py)
        self.keep_out = False  # taking turns, but keeping out of other runners' live claims
        self.waiting_since: float | None = None  # when the walk began waiting for other runners' claims
        self.chunk: Chunk | None = None  # the part of this runner's claim still to walk
        self.claim_batches = 1  # batches the next claim covers
        self.peers = False  # other runners held live claims at the last claim
        self._ledger_read = ledger.last_key_query(migration.name)  # its last_key, read under the lock
        self.yields_in_a_row = 0  # batches in a row that gave way to application transactions
        self.sizer = BatchSizer(run.batch_seconds, run.batch_size * MAX_GROWTH) if run.batch_seconds else None
        self.migrating_seconds = 0.0  # the last batch's time in its migrating statements
        #: Range stepping: the last batch found nothing to migrate, so the next one starts at the next
        #: pending key (``_past_gap``) instead of stepping through empty keys one batch at a time.
        self.gap = False

    def note(self, text: str) -> None:
        """Add *text* to the report's strategy note."""
        self.report.strategy_note = "; ".join(filter(None, (self.report.strategy_note, text)))

    def fail(self, exc: BaseException) -> None:
        self.report.errors += 1
        # the project's function failed: name its file and line; else the error as it reads
        self.report.error = mask_text(project_code.describe(exc) if project_code.stopped_by_project(exc)
                                      else _one_line(exc))
        self.report.state = ledger.ERROR
        self.finished = True

    def step(self, connections: _Connections, width: int) -> int:
        """One batch of at most about *width* rows; returns the rows it processed.

        Taking turns, the batch runs under the migration's lock.  Claiming, the batch is the
        next part of the key range this runner claimed (``_claim``, under the lock, once per
        claim); it runs in a transaction of its own, without the lock, beside other runners'
        batches, and moves the claim's start past its keys as it commits.

        The batch's time (what sizes the next batch, and ``longest_batch_seconds``) runs from
        the moment the migration's lock is held (claiming: the batch's transaction begins) to
        the commit: waiting while another runner holds the lock holds no row lock, and counting
        it would shrink every runner's batches as runners are added (4 runners on one
        migration: batches of ~80 rows, 16x slower)."""
        started = time.perf_counter()
        conn = None
        try:
            conn = connections.get()
            if self.claiming:
                token = connections.token()
                if self.chunk is None and not self._claim(conn, width, token):
                    self._at_end(conn)
                    return 0
                chunk = self.chunk
                started = time.perf_counter()
                with conn.begin():
                    if chunk.holder != token and not self._rehome(conn, chunk, token):
                        return 0
                    chunk = chunk._replace(holder=token)
                    batch, full = self._batch_in(chunk, conn, width)
                    processed, migrated, stuck = self._run_batch(conn, batch, chunk)
                self.chunk = None if batch.upper >= chunk.high else chunk._replace(low=batch.upper)
                own = chunk.own
            else:
                with locks.batch_transaction(conn, self.migration.name, self._ledger_read) as current:
                    started = time.perf_counter()
                    self._follow_other_runner(current)
                    if self.keep_out:  # taking turns beside runners that claim: not in their keys
                        live = [c for c in claim_table.others(conn, self.migration.name, 0) if not c.free]
                        batch = self._outside(conn, live, width, width)
                    else:
                        batch = self._next_batch(conn, width)
                    if batch is not None:
                        processed, migrated, stuck = self._run_batch(conn, batch)
                if batch is None:  # nothing left to walk (after its lock and transaction)
                    self._at_end(conn)
                    return 0
                own = full = True
                self.ledger_key = ledger.as_key_text(batch.upper)
        except (Exception, SystemExit, GeneratorExit, KeyboardInterrupt) as exc:
            interrupt = interrupt_behind(exc)
            if interrupt is not None:  # Ctrl-C / SIGTERM, or an error cleaning up after one: the batch
                connections.discard()  # rolled back (or dies with the session)
                self.finished, self.chunk = True, None
                raise interrupt from None
            # one migration's failure (its function's sys.exit() too) must not stop the others
            if yielding.gave_way(exc) and self._gave_way(conn, width):
                return 0
            connections.discard()
            self.chunk = None
            self.fail(exc)
            return 0
        seconds = time.perf_counter() - started
        self.waiting_since = None
        self.yields_in_a_row = 0
        if not self.run.batch_seconds and self.batch_size < self.run.batch_size:  # back up after yielding
            self.batch_size = min(self.run.batch_size, 2 * self.batch_size)
        if own:
            self.cursor = self.walked_to = batch.upper
        self.gap = processed == 0
        report = self.report
        report.batches += 1
        report.migrated += migrated
        if self.migration.deletes:
            report.deleted += migrated
        report.stuck += stuck
        report.longest_batch_seconds = max(report.longest_batch_seconds, seconds)
        if self.sizer is not None and full and width == self.batch_size:  # not cut short by --max-count
            self.batch_size = self.sizer.next(width, seconds, self.migrating_seconds)
        report.batch_sizes = (min(report.batch_sizes[0], width) if report.batches > 1 else width,
                              max(report.batch_sizes[1], width))
        if self.run.sleep:
            time.sleep(self.run.sleep)
        return processed

    def _gave_way(self, conn: Connection | None, width: int) -> bool:
        """The batch gave way to an application transaction on a row lock (``yielding``): it
        rolled back whole; count it, halve the next batch, back off, and let the walk try again.
        False after ``MAX_YIELDS`` in a row (the migration then fails with the error)."""
        self.yields_in_a_row += 1
        if self.yields_in_a_row > yielding.MAX_YIELDS or conn is None or conn.invalidated:
            return False
        if conn.in_transaction():
            conn.rollback()
        self.report.yielded += 1
        self.batch_size = max(1, min(self.batch_size, width) // 2)
        yielding.backoff(self.yields_in_a_row)
        return True

    def _run_batch(self, conn: Connection, batch: Batch, chunk: Chunk | None = None) -> tuple[int, int, int]:
        """Inside the batch's transaction: migrate, move the claim's start past the batch (claiming),
        record it in the ledger."""
        name = self.migration.name
        completion.quiet(conn, self.migration)
        began = time.perf_counter()
        processed, migrated, stuck = self._migrate(conn, batch)
        self.migrating_seconds = time.perf_counter() - began
        after = getattr(self.migration, "after_batch", None)  # a prune's reference check: a fixed cost
        if after is not None:
            after(conn)
        advance = None if chunk is None else claim_table.advance_statement(name, chunk.high, chunk.holder, batch.upper)
        ledger.record_batch(conn, name, migrated, stuck, batch.upper if chunk is None else None, along=advance)
        if self.stop is not None and self.stop.is_set():
            raise KeyboardInterrupt  # another thread was interrupted: roll this batch back
        return processed, migrated, stuck

    def _at_end(self, conn: Connection) -> None:
        """Nothing left to walk ahead.  Claiming, wait (at most ``PEER_WAIT``) while other runners'
        claimed batches are in flight: their rows are pending until they commit, and a claim
        whose runner dies is this walk's to take over.  Then the keys behind a resumed walk."""
        if self.peers:
            now = time.monotonic()
            self.waiting_since = self.waiting_since or now
            if now - self.waiting_since < PEER_WAIT:
                time.sleep(PEER_POLL)
                return
            self.note(f"other runners were still migrating claimed keys after {PEER_WAIT:g} s")
        self.waiting_since = None
        if not self._walk_behind(conn):
            self.finished = self.walked_to_end = True

    def _walk_behind(self, conn: Connection) -> bool:
        """A resumed walk reached the end: once, walk the keys behind where it resumed when a row
        there is pending (written since the run that stopped there), so that a ``--max-count``
        loop ends complete rather than caught up.  True: walking on.  False: nothing is pending
        behind, or not resumed (``finish`` proves what remains, past the cursor too: the rows
        this walk could not migrate, or that were written behind it)."""
        if self.resumed_from is None or self.swept:
            return False
        self.swept = True
        m = self.migration
        try:
            with index_lookups(conn), one_row_plans(conn):
                first = self._first_pending(conn, m.key_column <= key_bound(self.resumed_from))
        finally:
            if not conn.invalidated:
                conn.rollback()
        if first is None:
            return False
        self.first_key = first
        self.note(f"then walked from {m.key} {first}: rows behind it were pending")
        if self.report.strategy == "range":
            self.cursor, self.high = first - 1, self.resumed_from
        else:
            self.cursor = None  # keyset: the pending keys from the start
        return True

    def _follow_other_runner(self, current: str | None) -> None:
        """Under the lock: if another runner advanced this migration meanwhile, skip what it did.

        *current* is the ledger's last_key read under the lock.  Skipping never loses a
        row: anything still pending behind the cursor is in the live remaining count (and
        the exit code says to run again).
        """
        if current == self.ledger_key or not (self.report.strategy == "range" or self.claiming):
            return
        self.ledger_key = current
        if current is not None and current.lstrip("-").isdigit() and \
                (self.cursor is None or int(current) > self.cursor):
            self.cursor = int(current)

    def _next_batch(self, conn: Connection, width: int) -> Batch | None:
        m = self.migration
        key = m.key_column
        after = key.is_not(None) if self.cursor is None else key > key_bound(self.cursor)
        if self.report.strategy == "range":
            if self.gap:  # nothing to migrate in the last batch's keys: on to the next pending key
                self.gap = False
                first = self._first_pending(conn, after)
                if first is None:
                    return None
                self.cursor = max(self.cursor, first - 1)
                after = key > key_bound(self.cursor)
            if self.high is None or self.cursor >= self.high:  # rows inserted past the end since: walk on
                self.high = conn.execute(sa.select(sa.func.max(key)).where(after, m.pending)).scalar()
                if self.high is None:
                    return None
            upper = self.cursor + width
        else:
            keys = sa.select(key.label("k")).where(after, m.pending).order_by(key).limit(width).subquery()
            upper = conn.execute(sa.select(sa.func.max(keys.c.k))).scalar()
            if upper is None:
                return None
        return Batch(m, self.cursor, upper, self.options)

    def _migrate(self, conn: Connection, batch: Batch) -> tuple[int, int, int]:
        """Run the batch; (rows processed, rows migrated, rows stuck).

        The set-based form updates only the rows it can migrate (``NOT unmigratable``):
        no read-back of what it wrote, and the rows it cannot migrate are counted once,
        when the walk is over (``finish``).  A function is judged by what it leaves of
        the rows it was given: the batch's pending keys, read before it runs.  Those
        still pending afterwards are stuck; rows that old code inserted (or made
        pending) in the batch's key range after that read were never given to it:
        they are *remaining*, found by a later walk.
        """
        m = self.migration
        given = set() if m.unmigratable is not None or m.deletes else pending_keys(conn, m, batch.where)
        carried = m.unmigratable is not None or getattr(m, "carries_lock_wait", False)  # the runner's own
        with yielding.short_lock_wait(conn, carried, folded=m.unmigratable is not None):  # every statement that
            # migrates gives way to live traffic
            if m.unmigratable is not None:
                processed = yielding.update(conn, m, batch)
                return processed, processed, 0
            returned = m.migrate(conn, batch)
            if m.deletes:  # the rows it was given are gone: none can be stuck
                if not isinstance(returned, int) or isinstance(returned, bool) or returned < 0:
                    raise TypeError(f"{m.name}: a deleting migration returns the number of rows it deleted, "
                                    f"not {returned!r}")
                return returned, returned, 0
            stuck = len(given & pending_keys(conn, m, batch.where, current=True))
        migrated = returned if isinstance(returned, int) and not isinstance(returned, bool) \
            else len(given) - stuck
        return max(len(given), migrated + stuck), migrated, stuck

def _select(registry: Registry, run: RunOptions) -> list[_Walk]:
    for name in [*run.names, *run.options]:
        if name not in registry:
            known = ", ".join(registry.names()) or "none declared"
            raise UsageError(f"unknown data migration {name!r} (known: {known})", exit_code=EXIT_USAGE)
    chosen = [m for m in registry if not run.names or m.name in run.names]
    walks = []
    for migration in chosen:
        try:
            options = migration.parse_options(run.options.get(migration.name, {}))
        except ValueError as exc:
            raise UsageError(f"--option {migration.name}: {exc}", exit_code=EXIT_USAGE) from None
        walks.append(_Walk(migration, options, run))
    return walks

def run(engine: Engine, registry: Registry, options: RunOptions | None = None, progress: Any = None) -> RunReport:
    """Run the data migrations of *registry* on *engine*; see ``RunOptions``.

    Ctrl-C (``KeyboardInterrupt``, also what ``data.command`` turns SIGTERM into) rolls the
    batches in progress back, records ``interrupted`` in the ledger and returns a report
    with ``interrupted`` set (exit code 130).
    """
    run_options = options or RunOptions()
    validate(run_options)
    interrupts_keep_sqlite_sessions(engine)  # an interrupt leaves no SQLite session holding the lock
    walks = _select(registry, run_options)
    with engine.connect() as conn:
        ledger.require(conn)
    started = time.monotonic()
    budget = _Budget(run_options.max_count)
    report = RunReport(migrations=[w.report for w in walks], max_count=run_options.max_count)
    stop = threading.Event()
    for walk in walks:
        walk.stop = stop

    def on_batch(name: str) -> None:
        if progress is not None:
            progress.update(report.migrations, current=name)

    try:
        _run_phases(engine, walks, run_options, budget, on_batch, stop, claim_table.unavailable(engine))
    except KeyboardInterrupt:
        report.interrupted = True
        _record_interrupted(engine, walks)
    finally:
        if progress is not None:
            progress.close()
    report.max_count_reached = budget.exhausted and any(w.report.state == ledger.INCOMPLETE for w in walks)
    report.seconds = time.monotonic() - started
    return report


def _run_phases(engine: Engine, walks: list[_Walk], run_options: RunOptions, budget: _Budget,
                on_batch: Callable[[str], None], stop: threading.Event, no_claims: str | None) -> None:
    """The migrations that do not run last, then (once those are complete) the others.
    *no_claims*: why runners of one migration take turns here (None: they claim key ranges)."""
    first = [w for w in walks if not w.migration.run_last]
    last = [w for w in walks if w.migration.run_last]
    for phase in (first, last):
        if phase is last and any(w.report.state not in (ledger.COMPLETE, ledger.INAPPLICABLE) for w in first):
            for walk in last:
                _prepare(walk, engine)
                if walk.report.state == ledger.RUNNING:
                    walk.report.state = ledger.WAITING
                    walk.report.strategy_note = "runs once every other data migration is complete"
                walk.finish(engine)
            return
        readable = claim_table.readable(engine) if no_claims else None
        for walk in phase:
            _prepare(walk, engine)
            walk.claiming = no_claims is None and walk.integer_keys
            if no_claims and walk.integer_keys and engine.dialect.name in claim_table.DIALECTS:
                walk.note(f"runners take turns: {no_claims}")
                walk.keep_out = readable is True
                if readable is False and not walk.finished:  # other runners may claim: fail closed
                    walk.fail(RuntimeError(f"cannot read {claim_table.CLAIMS_TABLE}, so other runners' claimed keys "
                                           "cannot be kept out of: grant SELECT on it"))
        connections = _Connections(engine, claiming=any(w.claiming for w in phase))
        try:
            _drive(connections, phase, run_options, budget, on_batch, stop)
        finally:
            connections.close()
        for walk in phase:
            walk.finish(engine)


def _record_interrupted(engine: Engine, walks: list[_Walk]) -> None:
    """The ledger after an interrupt, best effort: the database may be what is failing."""
    for walk in walks:
        try:
            walk.interrupted(engine)
        except Exception:  # noqa: BLE001 - the ledger then says ``running``, as after a SIGKILL
            pass


def _prepare(walk: _Walk, engine: Engine) -> None:
    try:
        walk.prepare(engine)
    except Exception as exc:
        if (interrupt := interrupt_behind(exc)) is not None:
            raise interrupt from None
        walk.fail(exc)
