"""A batch that yields to live traffic: the runner, never the application, gives way on a row lock.

An application transaction that locks several rows while a batch migrates their neighbours
can form a lock cycle with the batch.  The database then aborts one of the two: PostgreSQL
whichever ran its deadlock check first (after ``deadlock_timeout``), InnoDB the "lighter"
transaction, which is always the application's (the batch has changed thousands of rows).
So the batch must never be part of a cycle, or leave it first:

* **PostgreSQL**: the batch waits at most ``LOCK_WAIT_MS`` for a row lock (``lock_timeout``,
  local to the batch's transaction, set just before its statement -- by the set-based batch's
  UPDATE itself, as the first condition of its WHERE); that is
  far below ``deadlock_timeout`` (1 s by default), so a cycle is broken by the batch giving up
  before any session runs its deadlock check.
* **MariaDB/MySQL**: while the batch migrates (the set-based UPDATE, or every statement the
  project's function runs), its session's ``innodb_lock_wait_timeout`` is 0: a row lock held
  by someone else fails the statement at once instead of waiting, so the batch never waits
  for a lock, and a transaction that never waits is in no cycle, whatever order it locks in.
  The statements the runner writes itself (the set-based UPDATE, a prune's) carry that setting
  on MariaDB (``SET STATEMENT innodb_lock_wait_timeout = 0 FOR ...``, ``execute``): no session
  ``SET`` before and after each batch.

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

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.visitors import InternalTraversal

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
    """The set-based batch statement (run inside ``short_lock_wait(conn, carried=True,
    folded=True)``); the rows it updated.  It carries its own lock wait: on PostgreSQL as the
    first condition of its WHERE (``_LOCK_WAIT_FIRST``, see ``short_lock_wait``), on MariaDB as
    ``SET STATEMENT ... FOR`` (``execute``)."""
    where = sa.and_(batch.where, sa.not_(migration.unmigratable))
    if conn.dialect.name == "postgresql":
        where = sa.and_(_LOCK_WAIT_FIRST, where)
    return execute(conn, sa.update(migration.table).where(where).values(dict(migration.values))).rowcount


def execute(conn: Connection, statement: Any) -> Any:
    """Run one of the migrating statements a batch of the runner writes itself (inside a
    ``short_lock_wait(conn, carried=True)``): on MariaDB the statement carries its lock wait of 0
    itself (``SET STATEMENT ... FOR``), elsewhere the block's setting applies."""
    return conn.execute(_WithoutWaiting(statement) if _carries(conn) else statement)


def _carries(conn: Connection) -> bool:
    """MariaDB (10.1.2+) runs ``SET STATEMENT var = value FOR statement``; MySQL does not."""
    return conn.dialect.name in ("mysql", "mariadb") and bool(getattr(conn.dialect, "is_mariadb", False))


class _WithoutWaiting(sa.sql.expression.Executable, sa.sql.ClauseElement):
    """*statement* with ``innodb_lock_wait_timeout`` 0 for itself only (MariaDB)."""

    inherit_cache = True
    _traverse_internals = [("statement", InternalTraversal.dp_clauseelement)]
    _inline = False  # read by the compiler of an UPDATE
    _return_defaults = False

    def __init__(self, statement: Any):
        self.statement = statement


@compiles(_WithoutWaiting)
def _render_without_waiting(element: _WithoutWaiting, compiler: Any, **kw: Any) -> str:
    return "SET STATEMENT innodb_lock_wait_timeout = 0 FOR " + compiler.process(element.statement, **kw)


class short_lock_wait:
    """The batch's migrating statements (the set-based UPDATE, or whatever the project's function
    runs) wait for a row lock at most briefly, so that in any lock cycle with an application
    transaction the batch is the one that gives way:

    * PostgreSQL: ``lock_timeout`` of ``LOCK_WAIT_MS`` for the rest of the batch's transaction
      (``set_config(..., true)``: the next transaction has the session's own value again), below
      ``deadlock_timeout``; one statement per batch, and the bookkeeping after the batch's
      statement waits at most as long too (a timeout there is a batch that gave way like any other).
    * MariaDB/MySQL: ``innodb_lock_wait_timeout = 0`` for the session while the block runs, then
      the session's own value again (read once per connection): a statement that meets a row lock
      fails at once (1205) instead of waiting, and a transaction that never waits is in no
      deadlock cycle, whatever order its statements lock rows in.  (InnoDB would otherwise pick
      the application as the victim: the lighter transaction.)  The bookkeeping after the block
      waits as usual: it only meets other runners.  MySQL's minimum is 1 s (a lock wait of at
      most 1 s; a cycle is then still judged by InnoDB).
    * SQLite: nothing (one writer at a time).

    *carried*: every migrating statement goes through ``execute`` (the runner's own statements):
    on MariaDB each carries the setting, and the session's is left alone.  *folded*: the block's
    one migrating statement is the set-based ``update``, which on PostgreSQL sets ``lock_timeout``
    itself (``_LOCK_WAIT_FIRST``: an uncorrelated sub-select, so an InitPlan run once before the
    scan, before any row is locked or waited for): no statement of its own before it."""

    def __init__(self, conn: Connection, carried: bool = False, folded: bool = False):
        self.conn = conn
        self.carried = carried
        self.folded = folded
        self.restore: Any = None

    def __enter__(self) -> None:
        conn = self.conn
        dialect = conn.dialect.name
        if dialect == "postgresql":
            if not self.folded:
                conn.execute(_SET_LOCK_WAIT)
        elif dialect in ("mysql", "mariadb") and not (self.carried and _carries(conn)):
            info = conn.connection.info
            if _SAVED not in info:
                info[_SAVED] = conn.execute(_READ_INNODB_WAIT).scalar()
            self.restore = info[_SAVED]
            conn.execute(_SET_INNODB_WAIT, {"seconds": 0})

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self.restore is None or self.conn.invalidated:
            return None
        try:
            self.conn.execute(_SET_INNODB_WAIT, {"seconds": self.restore})
        except Exception:  # noqa: BLE001 - never hide the batch's own error; the next block sets it again
            if exc_type is None:
                raise
            self.conn.connection.info.pop(_SAVED, None)
        return None


_SET_LOCK_WAIT = sa.select(sa.func.set_config("lock_timeout", f"{LOCK_WAIT_MS}ms", True))
#: The same setting as the first condition of the set-based UPDATE (PostgreSQL): true, once set.
_LOCK_WAIT_FIRST = _SET_LOCK_WAIT.scalar_subquery().is_not(None)
_SAVED = "migrations_policy.innodb_lock_wait_timeout"
_READ_INNODB_WAIT = sa.text("SELECT @@SESSION.innodb_lock_wait_timeout")
_SET_INNODB_WAIT = sa.text("SET SESSION innodb_lock_wait_timeout = :seconds")
