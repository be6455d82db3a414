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

Deadlock victims (PostgreSQL 40P01, MariaDB/MySQL 1213) are retried the same
way.  On PostgreSQL the session's lock timeout is kept below half the server's
``deadlock_timeout``: a DDL statement caught in a lock cycle with application
transactions then gives up (and is retried) before the deadlock detector runs,
so the application's transaction is never the one chosen as the victim.

``ADD FOREIGN KEY`` takes its locks in the order applications do (referenced
table first, then the referencing one), so it forms no lock cycle with
transactions that insert a parent row and then its children.

A ``CREATE INDEX CONCURRENTLY`` that gave up leaves an INVALID index behind; before
each attempt (a retry, or the first attempt of a later rerun) an invalid index of
that name is dropped concurrently, so the build starts afresh.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import AddConstraint
from sqlalchemy.sql.ddl import DDLElement

from .policy.model import CREATE_INDEX
from .policy.sql import from_sql
from .sqltext import statement_text

log = logging.getLogger(__name__)

#: MariaDB/MySQL: ER_LOCK_WAIT_TIMEOUT (row and metadata lock waits).
_MYSQL_LOCK_WAIT_TIMEOUT = 1205
#: MariaDB/MySQL: ER_LOCK_DEADLOCK (row and metadata lock deadlocks).
_MYSQL_DEADLOCK = 1213
#: PostgreSQL SQLSTATE lock_not_available, deadlock_detected.
_PG_LOCK_NOT_AVAILABLE, _PG_DEADLOCK = "55P03", "40P01"

_pg_settings = sa.table("pg_settings", sa.column("name"), sa.column("setting"))
_pg_index = sa.table("pg_index", sa.column("indexrelid"), sa.column("indisvalid"))
_pg_class = sa.table("pg_class", sa.column("oid"), sa.column("relname"))


def pg_milliseconds(seconds: float) -> int:
    """*seconds* as PostgreSQL's whole milliseconds; never 0, which PostgreSQL reads as "no timeout"."""
    if not math.isfinite(seconds) or round(seconds * 1000) < 1:
        raise ValueError(f"lock timeout {seconds!r} s is not a positive number of milliseconds")
    return int(round(seconds * 1000))


def _pg_lock_timeout_ms(connection: Connection, seconds: float) -> int:
    """The lock timeout to set: *seconds*, capped at half the server's deadlock_timeout."""
    wanted = pg_milliseconds(seconds)
    deadlock_ms = connection.execute(
        sa.select(_pg_settings.c.setting).where(_pg_settings.c.name == "deadlock_timeout")).scalar()
    cap = max(1, int(deadlock_ms) // 2) if deadlock_ms else wanted
    if wanted > cap:
        log.info("lock_timeout %d ms lowered to %d ms (half of deadlock_timeout) so that DDL gives up "
                 "before the deadlock detector could pick an application transaction", wanted, cap)
    return min(wanted, cap)


def set_session_lock_timeout(connection: Connection, seconds: float) -> None:
    """Bound every lock wait of this session to *seconds*."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        ms = _pg_lock_timeout_ms(connection, seconds)
        connection.execute(sa.select(sa.func.set_config("lock_timeout", f"{ms}ms", False)))
    elif dialect in ("mysql", "mariadb"):
        whole = max(1, math.ceil(seconds))  # both variables take whole seconds
        connection.execute(sa.text("SET SESSION lock_wait_timeout = :s"), {"s": whole})
        connection.execute(sa.text("SET SESSION innodb_lock_wait_timeout = :s"), {"s": whole})
    if connection.in_transaction():
        connection.commit()


def error_code(exc: BaseException) -> object:
    """The error number (MariaDB/MySQL) or SQLSTATE (PostgreSQL) of a SQLAlchemy DBAPIError."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return None
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL: (errno, message); its sqlstate is often just HY000
        return args[0]
    return getattr(orig, "sqlstate", None)


def is_lock_timeout(exc: BaseException) -> bool:
    """Whether *exc* (a SQLAlchemy DBAPIError) means "gave up waiting for a lock"."""
    return error_code(exc) in (_PG_LOCK_NOT_AVAILABLE, _MYSQL_LOCK_WAIT_TIMEOUT)


def is_deadlock(exc: BaseException) -> bool:
    """Whether *exc* means "chosen as a deadlock victim"."""
    return error_code(exc) in (_PG_DEADLOCK, _MYSQL_DEADLOCK)


def is_retryable(exc: BaseException) -> bool:
    """A lock wait this statement lost: retrying it later can succeed."""
    return is_lock_timeout(exc) or is_deadlock(exc)


def backoff_delays(retries: int, first: float = 0.5, cap: float = 10.0) -> list[float]:
    """Exponential backoff: 0.5, 1, 2, 4 ... seconds, capped."""
    return [min(cap, first * 2**attempt) for attempt in range(retries)]


class LockRetryStats:
    """What the retries did (reported by dbsync upgrade)."""

    def __init__(self) -> None:
        self.timeouts = 0

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"LockRetryStats(timeouts={self.timeouts})"


def in_real_transaction(connection: Connection) -> bool:
    """PostgreSQL inside a transaction (not alembic's autocommit_block): a SAVEPOINT can guard a statement."""
    return (connection.dialect.name == "postgresql" and connection.in_transaction()
            and connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT")


def _retrying(execute: Callable[..., Any], connection: Connection, retries: int,
              stats: LockRetryStats, sleep: Callable[[float], None]) -> Callable[..., Any]:
    delays = backoff_delays(retries)

    def run(*args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            construct = args[0] if args else kwargs.get("construct")
            savepoint = connection.begin_nested() if in_real_transaction(connection) else None
            try:
                if savepoint is None:
                    drop_invalid_index(connection, construct)
                else:
                    lock_parent_first(connection, construct)
                result = execute(*args, **kwargs)
            except sa.exc.DBAPIError as exc:
                if savepoint is not None and savepoint.is_active:
                    savepoint.rollback()
                if not is_retryable(exc) or attempt >= len(delays):
                    raise
                stats.timeouts += 1
                log.warning("DDL %s; retry %d/%d in %.1f s",
                            "was chosen as a deadlock victim" if is_deadlock(exc) else "gave up waiting for a lock",
                            attempt + 1, len(delays), delays[attempt])
                sleep(delays[attempt])
                attempt += 1
                continue
            if savepoint is not None and savepoint.is_active:
                savepoint.commit()
            return result

    return run


def _concurrent_index_name(connection: Connection, construct: Any) -> str | None:
    """The index a ``CREATE INDEX CONCURRENTLY`` statement builds, or None for any other statement."""
    text = statement_text(construct, connection)
    if "CONCURRENTLY" not in text.upper():
        return None
    for operation in from_sql(text):
        if operation.kind == CREATE_INDEX and operation.concurrently and operation.name:
            return operation.name
    return None


def drop_invalid_index(connection: Connection, construct: Any) -> bool:
    """PostgreSQL, outside a transaction: before building an index concurrently, drop an INVALID
    index of the same name (left by an earlier attempt that gave up); True if one was dropped."""
    if connection.dialect.name != "postgresql" or construct is None:
        return False
    name = _concurrent_index_name(connection, construct)
    if name is None:
        return False
    invalid = connection.execute(
        sa.select(_pg_class.c.oid)
        .select_from(_pg_class.join(_pg_index, _pg_index.c.indexrelid == _pg_class.c.oid))
        .where(_pg_class.c.relname == name, sa.func.pg_table_is_visible(_pg_class.c.oid),
               sa.not_(_pg_index.c.indisvalid))).first()
    if invalid is None:
        return False
    log.warning("dropping the INVALID index %s left by an earlier CREATE INDEX CONCURRENTLY, then building it again",
                name)
    connection.execute(sa.schema.DropIndex(sa.Index(name, postgresql_concurrently=True), if_exists=True))
    return True


class _LockTable(DDLElement):
    """PostgreSQL ``LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE`` (what ADD FOREIGN KEY takes on both tables)."""

    inherit_cache = False

    def __init__(self, table: sa.Table):
        self.table = table


@compiles(_LockTable, "postgresql")
def _compile_lock_table(element: _LockTable, compiler: Any, **kw: Any) -> str:
    return f"LOCK TABLE {compiler.preparer.format_table(element.table)} IN SHARE ROW EXCLUSIVE MODE"


def lock_parent_first(connection: Connection, construct: Any) -> bool:
    """PostgreSQL ADD FOREIGN KEY inside a transaction: lock the referenced table, then the referencing one.

    ``ALTER TABLE child ADD FOREIGN KEY`` locks the child, then the parent: the
    opposite of an application that inserts a parent row, then its children, in
    one transaction, which deadlocks.  Taking both locks in the application's
    order first (parent, then child) leaves no cycle: the statement waits for the
    writers in flight, and writers that come later wait (briefly) for it.
    """
    if connection.dialect.name != "postgresql" or not isinstance(construct, AddConstraint):
        return False
    constraint = construct.element
    if not isinstance(constraint, sa.ForeignKeyConstraint) or constraint.table is None:
        return False
    try:
        parent = constraint.referred_table
    except Exception:  # noqa: BLE001 - a string reference alembic did not resolve: leave the order alone
        return False
    if parent is constraint.table:
        return False
    for table in (parent, constraint.table):
        connection.execute(_LockTable(table))
    return True


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
