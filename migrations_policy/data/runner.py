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
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from migrations_policy.core import project_code
from migrations_policy.core.urls import mask_text
from migrations_policy.core.errors import UsageError
from migrations_policy.core.project import _one_line
from migrations_policy.data import claims, completion, ledger, locks, yielding
from migrations_policy.data import pending as probes
from migrations_policy.data.declare import Batch, DataMigration, Registry, key_bound
from migrations_policy.data.pending import (count_pending,
    cursor_value,
    index_lookups,
    missing_columns,
    null_keyed,
    one_row_plans,
    remaining)
from migrations_policy.data.drive import LIMITS, _Budget, _Connections, _drive, validate  # noqa: F401 (LIMITS: re-exported)
from migrations_policy.data.report import EXIT_USAGE, MigrationReport, RunReport
from migrations_policy.data.sizing import BatchSizer, next_batch_size  # noqa: F401 (re-exported)

#: Range stepping is used when at least this share of the pending key range is pending.
DENSE_THRESHOLD = 0.5
#: With a batch time target, a batch grows to at most this many times ``--batch-size``.
MAX_GROWTH = 10
#: A runner alone on a migration claims up to this many batches at a time.
CLAIM_BATCHES = 16
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
class Chunk(NamedTuple):
    """What remains of a claim: ``low < key <= high`` (no lower bound when None); *own*: this
    walk's next keys (False: a dead runner's claim, taken over); *holder*: the token of the
    session that holds it (a walk's steps may run on any worker thread's connection)."""

    low: Any
    high: Any
    own: bool
    holder: int


class _Walk:
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
        self.integer_keys = False  # the pending keys fit a claim's bounds (claims.usable_key)
        self.claiming = False  # batches on claimed key ranges, beside other runners (claims.py)
        self.keep_out = False  # taking turns, but keeping out of other runners' live claims
        self.waiting_since: float | None = None  # when the walk began waiting for other runners' claims
        self.chunk: Chunk | None = None  # the part of this runner's claim still to walk
        self.claim_batches = 1  # batches the next claim covers
        self.peers = False  # other runners held live claims at the last claim
        self._ledger_read = ledger.last_key_query(migration.name)  # its last_key, read under the lock
        self.yields_in_a_row = 0  # batches in a row that gave way to application transactions
        self.sizer = BatchSizer(run.batch_seconds, run.batch_size * MAX_GROWTH) if run.batch_seconds else None
        self.migrating_seconds = 0.0  # the last batch's time in its migrating statements

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

    def prepare(self, engine: Engine) -> None:
        """Count what is pending, choose range stepping or keyset, mark the ledger."""
        m, report = self.migration, self.report
        with engine.connect() as conn:
            missing = missing_columns(conn, m)
            if missing:
                report.state, self.finished = ledger.INAPPLICABLE, True
                report.strategy_note = (f"{', '.join(missing)} does not exist "
                                        "(not created yet, or dropped by a contract): skipped")
                return
            state, self.ledger_key = ledger.position(conn, m.name)
            if state == ledger.RETIRED:  # a forced contract downgrade re-created its source empty
                report.state, self.finished = ledger.INAPPLICABLE, True
                report.strategy_note = ("retired: a contract that dropped what it reads was reverted (forced); its "
                                        "source came back empty, and copying it again would overwrite what it copied")
                return
            conn.rollback()
            completion.install(engine, m)  # before any batch: what this run leaves is then remembered
            resume = cursor_value(conn, m, self.ledger_key) if state in ledger.RESUMABLE else None
            with index_lookups(conn), one_row_plans(conn):
                low, high, density, resumed = self._survey(conn, resume)
                count, estimated = (0, False) if low is None else \
                    remaining(conn, m, self.ledger_key, self.run.exact)
            conn.rollback()
            ledger.record_start(conn, m.name)
        report.remaining_before, report.remaining_before_estimated = count, estimated
        report.state = ledger.RUNNING
        if low is None:
            self.finished = self.walked_to_end = True
            return
        self.first_key = low
        self.integer_keys = claims.usable_key(low, high)
        if resumed:
            self.resumed_from = resume
            report.strategy_note = f"resumed after {m.key} {resume} (where the last run stopped)"
        if density is not None:
            if density >= DENSE_THRESHOLD and self.integer_keys:  # steps stay within BIGINT
                report.strategy, self.cursor, self.high = "range", low - 1, high
                return
            why = (f"batches follow the pending rows one after another: few are pending "
                   f"({density:.1%} of {m.key} {low}..{min(high, low + probes.PROBE_WINDOW - 1)})")
        else:
            why = f"batches follow the pending rows in {m.key} order ({m.table_name}.{m.key} is not a number)"
        self.note(why)
        report.strategy = "keyset"
        self.cursor = resume if resumed else None

    def _survey(self, conn: Connection, resume: Any) -> tuple[Any, Any, float | None, bool]:
        """The first and last pending keys, the density of pending keys in the first window
        (None: not integer keys), and whether the walk resumes past *resume*.

        No count of the table: the ends are read in key order (one index lookup each where
        rows are pending there), the density from the first ``PROBE_WINDOW`` keys.  A walk
        that the last run left midway (``ledger.RESUMABLE``) resumes past its cursor *resume*,
        so a ``--max-count`` loop does not read again what earlier runs finished; rows behind
        the cursor are walked once it reaches the end (``_walk_behind``)."""
        m = self.migration
        key = m.key_column
        low = None if resume is None else self._first_pending(conn, key > key_bound(resume))
        resumed = low is not None
        if low is None:
            low = self._first_pending(conn)  # nothing past the cursor: from the start
        if low is None:
            return None, None, None, False  # verified: nothing is pending
        high = conn.execute(sa.select(key).where(key.is_not(None), m.pending).order_by(key.desc()).limit(1)).scalar()
        if high is None:  # migrated by another runner since the first read (no snapshot across reads)
            high = low
        if not isinstance(low, int) or isinstance(low, bool):
            return low, high, None, resumed
        edge = min(high, low + probes.PROBE_WINDOW - 1)
        sample = conn.execute(sa.select(sa.func.count()).select_from(m.table).where(
            key >= key_bound(low), key <= key_bound(edge), m.pending)).scalar()
        return low, high, sample / (edge - low + 1), resumed

    def _first_pending(self, conn: Connection, *where: Any) -> Any:
        """The smallest pending key (and *where*), in key order: one index lookup where it is near.
        Rows with a NULL key (first in SQLite's and MariaDB's order) are left to ``finish``."""
        m = self.migration
        key = m.key_column
        return conn.execute(sa.select(key).where(*where, key.is_not(None), m.pending).order_by(key).limit(1)).scalar()

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
                        live = [c for c in claims.others(conn, self.migration.name, 0) if not c.free]
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
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the batch rolled back (or dies with the session)
            connections.discard()
            self.finished, self.chunk = True, None
            raise
        except (Exception, SystemExit, GeneratorExit) as exc:  # one migration's failure (its function's
            if yielding.gave_way(exc) and self._gave_way(conn, width):  # sys.exit() too) must not stop the others
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

    def _rehome(self, conn: Connection, chunk: Chunk, token: int) -> bool:
        """First in a batch's transaction, when this step runs on another worker thread's
        connection than the one that claimed *chunk*: make the claim this session's, so that it
        lives and dies with the connection migrating it (the row stays locked until the batch
        commits: a runner that found the old session gone waits, then sees the new holder).
        False: the old session died and another runner took the claim over: leave it to them."""
        held = claims.Claim(chunk.low, chunk.high, chunk.holder, False)
        if claims.take_over(conn, self.migration.name, held, token):
            return True
        self.chunk = None
        return False

    def _run_batch(self, conn: Connection, batch: Batch, chunk: Chunk | None = None) -> tuple[int, int, int]:
        """Inside the batch's transaction: migrate, move the claim's start past the batch (claiming),
        record it in the ledger."""
        name = self.migration.name
        completion.quiet(conn, self.migration)
        began = time.perf_counter()
        processed, migrated, stuck = self._migrate(conn, batch)
        self.migrating_seconds = time.perf_counter() - began
        if chunk is not None:
            claims.advance(conn, name, chunk.high, chunk.holder, batch.upper)
        ledger.record_batch(conn, name, migrated, stuck, batch.upper if chunk is None else None)
        if self.stop is not None and self.stop.is_set():
            raise KeyboardInterrupt  # another thread was interrupted: roll this batch back
        return processed, migrated, stuck

    def _claim(self, conn: Connection, width: int, token: int) -> bool:
        """Under the migration's lock, claim the next key range for this runner (``self.chunk``);
        False: nothing left to claim.

        The range is a dead runner's claim when there is one (its batch rolled back: its keys
        are walked again), else the walk's next ``claim_batches`` batches, stopping short of the
        first claim it would overlap, or starting past it.  A runner alone claims more batches at
        a time (1, 2, 4 ... ``CLAIM_BATCHES``), so that claiming costs one short transaction per
        several batches; with other runners about, or a ``--max-count``, one batch at a time."""
        name = self.migration.name
        with locks.batch_transaction(conn, name, self._ledger_read) as current:
            self._follow_other_runner(current)
            held = claims.others(conn, name, token)
            self.peers = any(not c.free for c in held)
            dead = next((c for c in held if c.free), None)
            if dead is not None:
                if claims.take_over(conn, name, dead, token):
                    self.chunk = Chunk(dead.low, dead.high, own=False, holder=token)
                    self._took_over(self.chunk)
                    return True
                self.peers = True  # a batch is migrating it right now (its walk moved it to another session)
            wanted = width * self.claim_batches
            alone = not self.peers and self.run.max_count is None
            self.claim_batches = min(2 * self.claim_batches, CLAIM_BATCHES) if alone else 1
            batch = self._outside(conn, held, width, wanted)
            if batch is None:
                return False
            claims.record(conn, name, batch.lower, batch.upper, token)
            ledger.record_claim(conn, name, batch.upper)
            self.ledger_key = ledger.as_key_text(batch.upper)
            self.chunk = Chunk(batch.lower, batch.upper, own=True, holder=token)
            return True

    def _outside(self, conn: Connection, held: list[claims.Claim], width: int, wanted: int) -> Batch | None:
        """The walk's next batch of about *wanted* keys, kept out of the claims *held*: it stops
        short of the first one it would overlap, or starts past it (None: nothing left)."""
        while True:
            batch = self._next_batch(conn, wanted)
            if batch is None:
                return None
            if self.report.strategy == "range" and wanted > width:  # not past the last pending key
                batch = Batch(self.migration, batch.lower, min(batch.upper, max(self.high, batch.lower + width)),
                              self.options)
            hit = claims.first_overlap(held, batch.lower, batch.upper)
            if hit is None:
                return batch
            if hit.low is not None and (batch.lower is None or hit.low > batch.lower):
                return Batch(self.migration, batch.lower, hit.low, self.options)
            self.cursor = hit.high  # past the other runner's keys

    def _batch_in(self, chunk: Chunk, conn: Connection, width: int) -> tuple[Batch, bool]:
        """The next batch of the claimed *chunk*: *width* keys (range stepping) or pending keys
        (keyset) past its start, and whether it has that many (the chunk's last batch may be
        cut short: its time does not size the next batch)."""
        m = self.migration
        if self.report.strategy == "range" and chunk.low is not None:
            upper = chunk.low + width
            return Batch(m, chunk.low, min(upper, chunk.high), self.options), upper <= chunk.high
        key = m.key_column
        after = () if chunk.low is None else (key > key_bound(chunk.low),)
        keys = sa.select(key.label("k")).where(*after, key <= key_bound(chunk.high), m.pending) \
            .order_by(key).limit(width).subquery()
        last, found = conn.execute(sa.select(sa.func.max(keys.c.k), sa.func.count())).one()
        return Batch(m, chunk.low, chunk.high if found < width else last, self.options), found >= width

    def _took_over(self, chunk: Chunk) -> None:
        """A dead runner's claim is this walk's: ``finish`` counts its stuck rows with this walk's."""
        low = "" if chunk.low is None else f"{chunk.low} < "
        note = f"walked again {low}{self.migration.key} <= {chunk.high}: its runner died mid-batch"
        self.note(note)
        if self.first_key is not None:
            self.first_key = None if chunk.low is None else min(self.first_key, chunk.low + 1)
        self.walked_to = chunk.high if self.walked_to is None else max(self.walked_to, chunk.high)

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
        with yielding.short_lock_wait(conn):  # every statement that migrates gives way to live traffic
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

    def finish(self, engine: Engine) -> None:
        """Count what remains (live) and record the final state."""
        report = self.report
        walked = self.walked_to
        try:
            with engine.connect() as conn:
                stuck = 0
                if report.state != ledger.INAPPLICABLE:
                    proof = completion.read(conn, self.migration)  # before the probe
                    report.remaining_after, report.remaining_after_estimated = remaining(
                        conn, self.migration, self.ledger_key, self.run.exact)
                    if report.remaining_after == 0:
                        completion.remember(engine, self.migration, proof)
                    nulls = null_keyed(conn, self.migration)
                    if nulls and report.state != ledger.ERROR:
                        m = self.migration
                        self.fail(RuntimeError(
                            f"{nulls} pending row{'s' if nulls > 1 else ''} of {m.table_name} "
                            f"{'have' if nulls > 1 else 'has'} a NULL {m.key}, which no batch can reach: "
                            "a data migration walks its rows by key, which must be unique and NOT NULL"))
                    if self.migration.unmigratable is not None and walked is not None and report.remaining_after:
                        key = self.migration.key_column  # the rows this run walked
                        since = () if self.first_key is None else (key >= key_bound(self.first_key),)
                        stuck = count_pending(conn, self.migration, sa.and_(
                            *since, key <= key_bound(walked), self.migration.pending, self.migration.unmigratable))
                        report.stuck += stuck
                    conn.rollback()
                if report.state not in (ledger.ERROR, ledger.INAPPLICABLE, ledger.WAITING):
                    report.state = (ledger.STUCK if report.stuck else
                                    ledger.COMPLETE if report.remaining_after == 0 else
                                    ledger.CAUGHT_UP if self.walked_to_end else ledger.INCOMPLETE)
                ledger.record_finish(conn, self.migration.name, report.state, report.error, stuck=stuck)
        except Exception as exc:
            self.fail(exc)
        self.finalized = True

    def interrupted(self, engine: Engine) -> None:
        """After Ctrl-C / SIGTERM: record ``interrupted`` (an error or inapplicable stays what it is),
        without counting what remains (the operator asked us to stop)."""
        if self.finalized:
            return
        if self.walked_to_end and self.report.state == ledger.RUNNING:
            self.finish(engine)  # its walk had ended before the stop: what it is, not "interrupted"
            return
        self.finalized = True
        report = self.report
        if report.state not in (ledger.ERROR, ledger.INAPPLICABLE):
            report.state = ledger.INTERRUPTED
        if report.state == ledger.INAPPLICABLE or report.remaining_before is None and not report.error:
            return  # never started: nothing of it to record
        with engine.connect() as conn:
            ledger.record_finish(conn, self.migration.name, report.state, report.error)


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
        _run_phases(engine, walks, run_options, budget, on_batch, stop, claims.unavailable(engine))
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
        readable = claims.readable(engine) if no_claims else None
        for walk in phase:
            _prepare(walk, engine)
            walk.claiming = no_claims is None and walk.integer_keys
            if no_claims and walk.integer_keys and engine.dialect.name in claims.DIALECTS:
                walk.note(f"runners take turns: {no_claims}")
                walk.keep_out = readable is True
                if readable is False and not walk.finished:  # other runners may claim: fail closed
                    walk.fail(RuntimeError(f"cannot read {claims.CLAIMS_TABLE}, so other runners' claimed keys "
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
        walk.fail(exc)
