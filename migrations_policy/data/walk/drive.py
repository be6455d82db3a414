"""Driving a run of data migrations: one batch connection per worker thread, the ``--max-count``
budget shared between the migrations still working, the round robin of their batches (inline or
in a thread pool), and the run options' bounds.  What a batch does is ``runner._Walk.step``'s."""

from __future__ import annotations

import math
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from sqlalchemy.engine import Connection, Engine

from migrations_policy.core.errors import UsageError
from migrations_policy.data.walk import claim_table, locks
from migrations_policy.data.remaining import completion
from migrations_policy.data.walk.report import EXIT_USAGE


class _Connections:
    """One batch connection per worker thread, kept for the whole run.  Claiming, each
    connection's session holds the lock of a runner token of its own (``claim_table.hold``) for
    as long as it lives: its claims die with it."""

    def __init__(self, engine: Engine, claiming: bool = False):
        self.engine = engine
        self.claiming = claiming
        self.local = threading.local()
        self.opened: dict[Connection, int | None] = {}
        self.lock = threading.Lock()

    def get(self) -> Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = locks.batch_connection(self.engine)
            token = None
            if self.claiming:
                try:
                    token = claim_table.hold_new(conn)
                except BaseException:
                    conn.close()
                    raise
            self.local.conn, self.local.token = conn, token
            with self.lock:
                self.opened[conn] = token
        return conn

    def token(self) -> int:
        """The runner token of this thread's connection (claiming)."""
        return self.local.token

    def discard(self) -> None:
        """Drop this thread's connection after an error or an interrupt (it may be broken, or
        in the middle of a statement: closing it ends the session, which rolls back and
        releases its token: its claim, if any, is then another runner's to take over)."""
        conn = getattr(self.local, "conn", None)
        self.local.conn = self.local.token = None
        if conn is not None:
            with self.lock:
                self.opened.pop(conn, None)
            if not conn.invalidated:
                conn.invalidate()
            conn.close()

    def close(self) -> None:
        for conn, token in self.opened.items():
            try:
                if not conn.invalidated and not conn.closed:
                    completion.quiet(conn, None)  # back in the pool, its writes mark again
                    conn.commit()
                if token is not None and not conn.invalidated and not conn.closed:
                    claim_table.let_go(conn, token)
            except Exception:  # noqa: BLE001 - the session then ends with the connection
                conn.invalidate()
            conn.close()
        self.opened.clear()


class _Budget:
    """The ``--max-count`` rows left, shared out between the migrations still working."""

    def __init__(self, max_count: int | None):
        self.left = max_count

    @property
    def exhausted(self) -> bool:
        return self.left is not None and self.left <= 0

    def share(self, working: int) -> int | float:
        """Rows each of *working* migrations may take in this round (its batch size caps it too)."""
        if self.left is None:
            return float("inf")
        return max(1, -(-self.left // max(working, 1)))

    def take(self, rows: int) -> int:
        if self.left is None:
            return rows
        rows = min(rows, self.left)
        self.left -= rows
        return rows

    def refund(self, rows: int) -> None:
        if self.left is not None:
            self.left += rows


def _drive(connections: _Connections, walks: list[Any], run: Any, budget: _Budget,
           on_batch: Callable[[str], None], stop: threading.Event) -> None:
    """Round robin, *workers* batches at a time: in each round every migration still
    working gets one batch: its batch size, or less, its share of what is left of --max-count."""
    ready = deque(w for w in walks if not w.finished)
    if run.workers == 1:  # no thread hand-off per batch: the same turns, run inline
        while ready and not budget.exhausted:
            round_ = list(ready)
            ready.clear()
            share = budget.share(len(round_))
            for walk in round_:
                if budget.exhausted:
                    ready.append(walk)
                    continue
                width = budget.take(min(share, walk.batch_size))
                budget.refund(width - walk.step(connections, width))
                on_batch(walk.migration.name)
                if not walk.finished:
                    ready.append(walk)
        return
    with ThreadPoolExecutor(max_workers=run.workers, thread_name_prefix="data-migration") as pool:
        try:
            _drive_pool(pool, connections, ready, run, budget, on_batch)
        except BaseException:
            stop.set()  # the batches running in the workers roll back instead of committing
            raise


def _drive_pool(pool: ThreadPoolExecutor, connections: _Connections, ready: deque, run: Any,
                budget: _Budget, on_batch: Callable[[str], None]) -> None:
    running: dict[Future, tuple[Any, int]] = {}
    owed: set[Any] = set()  # migrations that have not had their turn in this round
    share = 0
    while ready or running:
        while ready and len(running) < run.workers and not budget.exhausted:
            if not owed:
                owed = {*ready, *(walk for walk, _ in running.values())}
                share = budget.share(len(owed))
            walk = ready.popleft()
            owed.discard(walk)
            width = budget.take(min(share, walk.batch_size))
            running[pool.submit(walk.step, connections, width)] = (walk, width)
        if not running:
            return  # --max-count reached
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            walk, width = running.pop(future)
            budget.refund(width - future.result())
            on_batch(walk.migration.name)
            if not walk.finished:
                ready.append(walk)


#: Upper bounds of the run's options (a bigger value is a typo, or makes no sense).
LIMITS = {"batch_size": 10_000_000, "batch_seconds": 3600.0, "sleep": 3600.0, "workers": 64}


def validate(options: Any) -> None:
    """A one-line usage error (exit 127) for an option out of range, before any work."""
    def bad(name: str, value: Any, low: float, strict: bool = True) -> bool:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return not number or not math.isfinite(value) or value < low or (strict and value == low) \
            or value > LIMITS.get(name, math.inf)

    checks = [("batch_size", options.batch_size, 1, False), ("workers", options.workers, 1, False),
              ("sleep", options.sleep, 0, False)]
    if options.batch_seconds is not None:
        checks.append(("batch_seconds", options.batch_seconds, 0, True))
    if options.max_count is not None:
        checks.append(("max_count", options.max_count, 1, False))
    for name, value, low, strict in checks:
        if bad(name, value, low, strict):
            high = LIMITS.get(name)
            bounds = f"{'>' if strict else '>='} {low}" + (f" and <= {high:g}" if high else "")
            raise UsageError(f"--{name.replace('_', '-')} {value!r}: must be a finite number {bounds}",
                             exit_code=EXIT_USAGE)
