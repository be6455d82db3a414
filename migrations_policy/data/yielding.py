"""A batch that yields to live traffic: the runner, never the application, gives way on a row lock.

An application transaction that locks several rows while a batch migrates their neighbours
can form a lock cycle with the batch.  The database then aborts one of the two: PostgreSQL
whichever ran its deadlock check first (after ``deadlock_timeout``), InnoDB the "lighter"
transaction, which is always the application's (the batch has changed thousands of rows).
So the batch must never be part of a cycle, or leave it first:

* **PostgreSQL**: the batch waits at most ``LOCK_WAIT_MS`` for a row lock (``lock_timeout``,
  local to the batch's transaction, set just before its statement); that is
  far below ``deadlock_timeout`` (1 s by default), so a cycle is broken by the batch giving up
  before any session runs its deadlock check.
* **MariaDB/MySQL**, set-based form: the batch first locks its pending rows in key order
  with ``SELECT ... ORDER BY key FOR UPDATE NOWAIT`` and then updates exactly those keys, so
  it never waits for a lock at all, and a transaction that never waits is in no cycle.
  (The function form runs the project's statements: it gets the database's default waits.)

A batch that gave way (lock not available, deadlock, lock timeout) rolled back entirely; the
runner counts it (``MigrationReport.yielded``, in the report and its JSON), halves the next
batch, backs off a few milliseconds and tries again, at most ``MAX_YIELDS`` times in a row.
"""

from __future__ import annotations

import random
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.data.declare import Batch, DataMigration

#: PostgreSQL: the longest a batch waits for a row lock (well below deadlock_timeout, 1 s by default).
LOCK_WAIT_MS = 100
#: Consecutive yields after which the migration fails (the rows are locked all the time).
MAX_YIELDS = 500
#: PostgreSQL SQLSTATEs of a batch that gave way: lock_not_available, deadlock_detected,
#: serialization_failure.  MySQL/MariaDB error numbers: lock wait timeout, deadlock, NOWAIT.
_PG_STATES = {"55P03", "40P01", "40001"}
_MYSQL_CODES = {1205, 1213, 3572}


def gave_way(exc: BaseException) -> bool:
    """Whether *exc* is a batch giving way on a lock (rolled back: to be retried)."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_STATES:
        return True
    args = getattr(orig, "args", ())
    return bool(args) and isinstance(args[0], int) and args[0] in _MYSQL_CODES


def backoff(consecutive: int) -> None:
    """A short random pause, growing with the consecutive yields (at most ~0.2 s)."""
    time.sleep(random.uniform(0, min(0.2, 0.005 * 2 ** min(consecutive, 6))))


def update(conn: Connection, migration: DataMigration, batch: Batch) -> int:
    """The set-based batch statement, taking its locks so that it is the one that yields; the
    rows it updated."""
    where = sa.and_(batch.where, sa.not_(migration.unmigratable))
    dialect = conn.dialect.name
    if dialect in ("mysql", "mariadb"):
        key = migration.key_column
        keys = conn.execute(sa.select(key).where(where).order_by(key).with_for_update(nowait=True)).scalars().all()
        if not keys:
            return 0
        return conn.execute(sa.update(migration.table).where(key.in_(keys)).values(dict(migration.values))).rowcount
    statement = sa.update(migration.table).where(where).values(dict(migration.values))
    if dialect != "postgresql":
        return conn.execute(statement).rowcount
    with short_lock_wait(conn):
        return conn.execute(statement).rowcount


class short_lock_wait:
    """PostgreSQL, inside the batch's transaction: ``lock_timeout`` of ``LOCK_WAIT_MS`` for the
    rest of that transaction (``set_config(..., true)``: the next transaction has the session's
    own value again).  One statement per batch: the bookkeeping after the batch's statement
    waits at most as long too, and a timeout there is a batch that gave way like any other.
    Other dialects: nothing."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def __enter__(self) -> None:
        if self.conn.dialect.name == "postgresql":
            self.conn.execute(_SET_LOCK_WAIT)

    def __exit__(self, *exc: Any) -> None:
        return None


_SET_LOCK_WAIT = sa.select(sa.func.set_config("lock_timeout", f"{LOCK_WAIT_MS}ms", True))
