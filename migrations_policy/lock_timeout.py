"""Bounded lock waits for every DDL statement dbsync runs, with retries and backoff.

A DDL statement that waits for a lock (behind a long transaction elsewhere)
makes every later reader of that table queue behind it: on PostgreSQL the
ALTER's ACCESS EXCLUSIVE request blocks plain SELECTs; on MariaDB the metadata
lock does the same, and the server's default ``lock_wait_timeout`` is one day.
So the session gets a short lock timeout, and a statement that hits it is
retried after a backoff instead of failing the upgrade:

* PostgreSQL: ``lock_timeout`` (``set_config``, bound parameter);
  inside a migration's transaction each statement runs under a SAVEPOINT so a
  timed-out statement can be retried without losing the statements before it.
* MariaDB/MySQL: ``lock_wait_timeout`` (metadata locks) and
  ``innodb_lock_wait_timeout`` (row locks); DDL is not transactional there, so
  the timed-out statement alone is retried.
* SQLite: nothing to do (one writer; ``busy_timeout`` is the driver's).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .lock_holders import lock_wait_context

log = logging.getLogger(__name__)

#: MariaDB/MySQL: ER_LOCK_WAIT_TIMEOUT (row and metadata lock waits).
_MYSQL_LOCK_WAIT_TIMEOUT = 1205
#: PostgreSQL SQLSTATE lock_not_available.
_PG_LOCK_NOT_AVAILABLE = "55P03"


def set_session_lock_timeout(connection: Connection, seconds: float) -> None:
    """Bound every lock wait of this session to *seconds*."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.execute(sa.select(sa.func.set_config("lock_timeout", f"{int(seconds * 1000)}ms", False)))
    elif dialect in ("mysql", "mariadb"):
        whole = max(1, math.ceil(seconds))  # both variables take whole seconds
        connection.execute(sa.text("SET SESSION lock_wait_timeout = :s"), {"s": whole})
        connection.execute(sa.text("SET SESSION innodb_lock_wait_timeout = :s"), {"s": whole})
    if connection.in_transaction():
        connection.commit()


def is_lock_timeout(exc: BaseException) -> bool:
    """Whether *exc* (a SQLAlchemy DBAPIError) means "gave up waiting for a lock"."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return False
    if getattr(orig, "sqlstate", None) == _PG_LOCK_NOT_AVAILABLE:
        return True
    args = getattr(orig, "args", ())
    return bool(args) and args[0] == _MYSQL_LOCK_WAIT_TIMEOUT


def backoff_delays(retries: int, first: float = 0.5, cap: float = 10.0) -> list[float]:
    """Exponential backoff: 0.5, 1, 2, 4 ... seconds, capped."""
    return [min(cap, first * 2**attempt) for attempt in range(retries)]


class LockRetryStats:
    """What the retries did (reported by dbsync upgrade)."""

    def __init__(self) -> None:
        self.timeouts = 0

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"LockRetryStats(timeouts={self.timeouts})"


def _in_real_transaction(connection: Connection) -> bool:
    """PostgreSQL inside a transaction (not alembic's autocommit_block): a SAVEPOINT can guard a statement."""
    return (connection.dialect.name == "postgresql" and connection.in_transaction()
            and connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT")


def _retrying(execute: Callable[..., Any], connection: Connection, retries: int,
              stats: LockRetryStats, sleep: Callable[[float], None]) -> Callable[..., Any]:
    delays = backoff_delays(retries)

    def run(*args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            savepoint = connection.begin_nested() if _in_real_transaction(connection) else None
            try:
                result = execute(*args, **kwargs)
            except sa.exc.DBAPIError as exc:
                if savepoint is not None and savepoint.is_active:
                    savepoint.rollback()
                if not is_lock_timeout(exc) or attempt >= len(delays):
                    raise
                stats.timeouts += 1
                log.warning("DDL gave up waiting for a lock%s; retry %d/%d in %.1f s",
                            lock_wait_context(connection, args[0] if args else None),
                            attempt + 1, len(delays), delays[attempt])
                sleep(delays[attempt])
                attempt += 1
                continue
            if savepoint is not None and savepoint.is_active:
                savepoint.commit()
            return result

    return run


def install_statement_retries(migration_context: Any, retries: int,
                              sleep: Callable[[float], None] = time.sleep) -> LockRetryStats:
    """Retry each statement alembic executes on *migration_context* when it times out on a lock.

    Wraps the context's DDL implementation ``_exec`` for this migration context
    only (alembic has no public per-statement hook); the context lives for one
    alembic command.
    """
    stats = LockRetryStats()
    connection = migration_context.connection
    if connection is not None and connection.dialect.name in ("postgresql", "mysql", "mariadb"):
        impl = migration_context.impl
        impl._exec = _retrying(impl._exec, connection, retries, stats, sleep)
    return stats
