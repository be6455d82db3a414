"""Bounded lock waits for every DDL statement dbsync runs, with retries and backoff.

A DDL statement that waits for a lock (behind a long transaction elsewhere)
makes every later reader of that table queue behind it: on PostgreSQL the
ALTER's ACCESS EXCLUSIVE request blocks plain SELECTs; on MariaDB the metadata
lock does the same, and the server's default ``lock_wait_timeout`` is one day.
So the session gets a short lock timeout, and a statement that hits it is
retried after a backoff instead of failing the upgrade:

* PostgreSQL: ``lock_timeout`` (``set_config``, bound parameter).  Inside a
  revision's transaction a lost lock wait rolls back to a SAVEPOINT taken at the
  start of that transaction, releasing every lock it took, and the revision runs
  again, resuming from the statement journal (``retry_segments``); statements
  outside a transaction (``autocommit_block``) are retried one by one.
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

import functools
import logging
import math
import time
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import AddConstraint, CreateTable
from sqlalchemy.sql.ddl import DDLElement

from migrations_policy.policy.model import CREATE_INDEX, DROP_INDEX
from migrations_policy.policy.sql import from_sql
from migrations_policy.expand.lock_holders import lock_wait_context
from migrations_policy.core.sqltext import statement_text

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
    """What the retries did (reported by dbsync upgrade), and the retry policy of one run."""

    def __init__(self, retries: int = 0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.timeouts = 0
        self.retries, self.sleep = retries, sleep
        #: Set while ``retry_segments`` runs a revision: PostgreSQL statements inside the
        #: transaction then run under one SAVEPOINT per segment (``segment``) instead of one each.
        self.by_segment = False
        self.segment: Any = None
        #: Tables to lock first (ACCESS EXCLUSIVE) when a segment starts: each one a statement of
        #: this revision lost a lock wait on, most recent first (see ``retry_segments``).
        self.prelock: list[str] = []
        #: The tables the statement that lost may have waited for (``_tables_waited_for``).
        self.lost_on: list[str] = []
        self.lost_statement: Any = None  # the statement that lost, for the retry message

    def lost(self, exc: BaseException, attempt: int, delays: list[float], context: str = "") -> None:
        """Count and log a lost lock wait (*context*: the table, revision and lock holder), then back off."""
        self.timeouts += 1
        log.warning("DDL %s%s; retry %d/%d in %.1f s",
                    "was chosen as a deadlock victim" if is_deadlock(exc) else "gave up waiting for a lock",
                    context, attempt + 1, len(delays), delays[attempt])
        self.sleep(delays[attempt])

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"LockRetryStats(timeouts={self.timeouts})"


def in_real_transaction(connection: Connection) -> bool:
    """PostgreSQL inside a transaction (not alembic's autocommit_block): a SAVEPOINT can guard a statement."""
    return (connection.dialect.name == "postgresql" and connection.in_transaction()
            and connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT")


def _retrying(execute: Callable[..., Any], connection: Connection, stats: LockRetryStats) -> Callable[..., Any]:
    delays = backoff_delays(stats.retries)

    def run(*args: Any, **kwargs: Any) -> Any:
        construct = args[0] if args else kwargs.get("construct")
        if stats.by_segment and in_real_transaction(connection):
            if stats.segment is None or not stats.segment.is_active:
                stats.segment = connection.begin_nested()  # the first statement since the transaction began
                for name in stats.prelock:
                    connection.execute(_LockTable(_table_named(name), "ACCESS EXCLUSIVE"))
            try:
                lock_parent_first(connection, construct)
                return execute(*args, **kwargs)
            except sa.exc.DBAPIError as exc:  # a lost lock wait: retry_segments retries the whole segment
                if is_retryable(exc):
                    stats.lost_on, stats.lost_statement = _tables_waited_for(connection, construct), construct
                raise
        attempt = 0
        while True:
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
                stats.lost(exc, attempt, delays, lock_wait_context(connection, args[0] if args else None))
                attempt += 1
                continue
            if savepoint is not None and savepoint.is_active:
                savepoint.commit()
            return result

    return run


def retry_segments(migration_fn: Callable[..., Any], stats: LockRetryStats) -> Callable[..., Any]:
    """Run a revision so that, on PostgreSQL, a lost lock wait inside its transaction releases *every*
    lock the transaction took since it began (or since its last ``autocommit_block``), not only the
    failed statement's, then runs the revision again after a backoff.

    Retrying the statement alone would keep the locks of the statements before it: an application
    transaction waiting for one of them while holding what the statement needs would stay in the
    cycle, be picked by the deadlock detector, or starve the revision.  And rerunning in the same
    order would lose the same way while the application keeps writing in its order: so the rerun
    first locks (ACCESS EXCLUSIVE, for the moment the segment takes) each table a statement lost
    on, most recent first — the application's order, learnt.  The rerun must skip what committed
    before the segment: only journaled (upgrade) steps are run through here.
    """
    delays = backoff_delays(stats.retries)

    @functools.wraps(migration_fn)  # alembic names the step after the function ("upgrade")
    def migrate(**kw: Any) -> Any:
        attempt, stats.prelock = 0, []
        while True:
            stats.by_segment, stats.segment, stats.lost_on = True, None, []
            try:
                return migration_fn(**kw)
            except sa.exc.DBAPIError as exc:
                segment = stats.segment
                if not is_retryable(exc) or segment is None or not segment.is_active or attempt >= len(delays):
                    raise
                segment.rollback()
                # learnt after the rollback: only tables that exist without the segment (one the
                # revision creates did not hold the lock the statement waited for)
                for name in reversed(stats.lost_on):
                    if name not in stats.prelock and _exists(segment.connection, name):
                        stats.prelock.insert(0, name)
                stats.lost(exc, attempt, delays, lock_wait_context(segment.connection, stats.lost_statement))
                attempt += 1
            finally:
                stats.by_segment, stats.segment = False, None

    return migrate


def _concurrent_index_name(connection: Connection, construct: Any, kinds: tuple[str, ...] = (CREATE_INDEX,)
                           ) -> str | None:
    """The index a ``CREATE INDEX CONCURRENTLY`` statement builds (with DROP_INDEX in *kinds*: or a
    ``DROP INDEX CONCURRENTLY`` drops), or None for any other statement."""
    text = statement_text(construct, connection)
    if "CONCURRENTLY" not in text.upper():
        return None
    for operation in from_sql(text):
        if operation.kind in kinds and operation.concurrently and operation.name:
            return operation.name
    return None


def _is_invalid(connection: Connection, name: str) -> bool:
    return connection.execute(
        sa.select(_pg_class.c.oid)
        .select_from(_pg_class.join(_pg_index, _pg_index.c.indexrelid == _pg_class.c.oid))
        .where(_pg_class.c.relname == name, sa.func.pg_table_is_visible(_pg_class.c.oid),
               sa.not_(_pg_index.c.indisvalid))).first() is not None


def left_invalid_index(connection: Connection, construct: Any) -> bool:
    """PostgreSQL: whether a ``CREATE`` or ``DROP INDEX CONCURRENTLY`` that failed left its index
    INVALID: the statement is then neither applied nor not (``journal.py`` keeps it *running*)."""
    if connection.dialect.name != "postgresql" or construct is None:
        return False
    name = _concurrent_index_name(connection, construct, (CREATE_INDEX, DROP_INDEX))
    return name is not None and _is_invalid(connection, name)


def drop_invalid_index(connection: Connection, construct: Any) -> bool:
    """PostgreSQL, outside a transaction: before building an index concurrently, drop an INVALID
    index of the same name (left by an earlier attempt that gave up); True if one was dropped."""
    if connection.dialect.name != "postgresql" or construct is None:
        return False
    name = _concurrent_index_name(connection, construct)
    if name is None or not _is_invalid(connection, name):
        return False
    log.warning("dropping the INVALID index %s left by an earlier CREATE INDEX CONCURRENTLY, then building it again",
                name)
    connection.execute(sa.schema.DropIndex(sa.Index(name, postgresql_concurrently=True), if_exists=True))
    return True


class _LockTable(DDLElement):
    """PostgreSQL ``LOCK TABLE t IN <mode> MODE``."""

    inherit_cache = False
    _MODES = ("SHARE ROW EXCLUSIVE", "ACCESS EXCLUSIVE")

    def __init__(self, table: sa.Table, mode: str = "SHARE ROW EXCLUSIVE"):
        if mode not in self._MODES:
            raise ValueError(f"lock mode {mode!r}")
        self.table, self.mode = table, mode


@compiles(_LockTable, "postgresql")
def _compile_lock_table(element: _LockTable, compiler: Any, **kw: Any) -> str:
    return f"LOCK TABLE {compiler.preparer.format_table(element.table)} IN {element.mode} MODE"


def _table_named(name: str) -> sa.Table:
    schema, _, table = name.rpartition(".")
    return sa.Table(table, sa.MetaData(), schema=schema or None)


def _tables_waited_for(connection: Connection, construct: Any) -> list[str]:
    """The tables whose locks a statement that lost a lock wait may have waited for, in the order
    it takes them: a ``CREATE TABLE`` waits for the tables its foreign keys reference (the new one
    is not there yet), an ``ADD FOREIGN KEY`` for the referenced table, then its own
    (``lock_parent_first``); any other statement for the table it changes."""
    if isinstance(construct, CreateTable):  # the names as written: no reference needs resolving
        new = _name_of(construct.element)
        return [name for name in dict.fromkeys(fk.target_fullname.rpartition(".")[0]
                                               for fk in construct.element.foreign_keys) if name != new]
    if isinstance(construct, AddConstraint) and isinstance(construct.element, sa.ForeignKeyConstraint) \
            and construct.element.table is not None:
        try:
            return list(dict.fromkeys([_name_of(construct.element.referred_table),
                                       _name_of(construct.element.table)]))
        except Exception:  # noqa: BLE001 - a reference alembic did not resolve: the statement's SQL says
            pass
    target = _target_table(connection, construct)
    return [target] if target else []


def _name_of(table: Any) -> str:
    return f"{table.schema}.{table.name}" if table.schema else table.name


def _exists(connection: Connection, name: str) -> bool:
    schema, _, table = name.rpartition(".")
    return sa.inspect(connection).has_table(table, schema=schema or None)


def _target_table(connection: Connection, construct: Any) -> str | None:
    """The table a DDL statement changes (``schema.table`` or ``table``), if it can be read from its SQL."""
    try:
        operations = from_sql(statement_text(construct, connection))
    except Exception:  # noqa: BLE001 - unknown statement: nothing learnt
        return None
    return next((o.table for o in operations if o.table), None)


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
    stats = LockRetryStats(retries, sleep)
    connection = migration_context.connection
    if connection is not None and connection.dialect.name in ("postgresql", "mysql", "mariadb"):
        impl = migration_context.impl
        impl._exec = _retrying(impl._exec, connection, stats)
    return stats
