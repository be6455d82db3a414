"""Who holds the lock a DDL statement gave up waiting for: for the retry message of
``lock_timeout`` ("ALTER TABLE nodes (revision r1 -> r2) gave up waiting for a lock held by
pid 4242, in a transaction since 12:00:01: SELECT count(*) FROM nodes").

* PostgreSQL: the sessions holding a granted lock on the statement's table (``pg_locks``
  joined to ``pg_stat_activity``): pid, transaction start, their current query.  By the time
  the retry is reported our statement no longer waits, so ``pg_blocking_pids`` of our own pid
  would be empty; the lock table says who still holds the table.
* MariaDB / MySQL: the other threads with an open InnoDB transaction (``information_schema.
  INNODB_TRX``): thread id, transaction start, current query (a metadata lock is held by an open
  transaction that touched the table).

Best effort: a failure to look (no privilege, another dialect) gives "".  Queries are built with
SQLAlchemy Core.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

_TABLE = re.compile(r"^\s*(?:ALTER\s+TABLE|DROP\s+TABLE|TRUNCATE(?:\s+TABLE)?|LOCK\s+TABLE|"
                    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON)"
                    r"\s+(?:ONLY\s+)?(?:IF\s+EXISTS\s+)?(?P<table>(?:[\"`]?[\w$]+[\"`]?\.)?[\"`]?[\w$]+[\"`]?)",
                    re.IGNORECASE)
_MAX_HOLDERS = 3

_pg_locks = sa.table("pg_locks", sa.column("pid"), sa.column("relation"), sa.column("granted"))
_pg_activity = sa.table("pg_stat_activity", sa.column("pid"), sa.column("xact_start"), sa.column("query"),
                        sa.column("state"))
_innodb_trx = sa.table("INNODB_TRX", sa.column("trx_mysql_thread_id"), sa.column("trx_started"),
                       sa.column("trx_query"), schema="information_schema")


def table_of(statement: Any, dialect: Any = None) -> str | None:
    """The table a DDL statement (SQL text or a SQLAlchemy construct) works on, if it says."""
    try:
        text = str(statement.compile(dialect=dialect)) if hasattr(statement, "compile") else str(statement)
    except Exception:  # noqa: BLE001 - a construct that does not compile alone: no name, no harm
        return None
    match = _TABLE.match(text)
    return match.group("table").replace('"', "").replace("`", "") if match else None


def _short(query: Any, width: int = 80) -> str:
    text = " ".join(str(query or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _postgresql(connection: Connection, table: str) -> list[str]:
    query = (sa.select(_pg_activity.c.pid, _pg_activity.c.xact_start, _pg_activity.c.state, _pg_activity.c.query)
             .select_from(_pg_locks.join(_pg_activity, _pg_locks.c.pid == _pg_activity.c.pid))
             .where(_pg_locks.c.relation == sa.func.to_regclass(sa.cast(table, sa.Text)))
             .where(_pg_locks.c.granted.is_(True))
             .where(_pg_locks.c.pid != sa.func.pg_backend_pid())
             .distinct().limit(_MAX_HOLDERS))
    return [f"pid {pid} ({state or 'unknown'}, transaction since {start:%Y-%m-%d %H:%M:%S}"
            f"{': ' + _short(sql) if sql else ''})" if start else f"pid {pid} ({state or 'unknown'})"
            for pid, start, state, sql in connection.execute(query)]


def _mysql(connection: Connection) -> list[str]:
    query = (sa.select(_innodb_trx.c.trx_mysql_thread_id, _innodb_trx.c.trx_started, _innodb_trx.c.trx_query)
             .where(_innodb_trx.c.trx_mysql_thread_id != sa.func.connection_id())
             .order_by(_innodb_trx.c.trx_started).limit(_MAX_HOLDERS))
    return [f"thread {thread} (transaction since {start:%Y-%m-%d %H:%M:%S}"
            f"{': ' + _short(sql) if sql else ''})" for thread, start, sql in connection.execute(query)]


def describe_lock_holders(connection: Connection, statement: Any) -> str:
    """"on nodes, held by pid 4242 (...)" for a statement that gave up waiting for a lock; "" if unknown."""
    dialect = connection.dialect
    table = table_of(statement, dialect)
    was_in_transaction = connection.in_transaction()
    try:
        with connection.begin_nested() if was_in_transaction else _no_transaction():
            if dialect.name == "postgresql" and table:
                holders = _postgresql(connection, table)
            elif dialect.name in ("mysql", "mariadb"):
                holders = _mysql(connection)
            else:
                holders = []
    except Exception:  # noqa: BLE001 - best effort: the retry goes on whatever this lookup says
        holders = []
    if not was_in_transaction and connection.in_transaction():
        connection.rollback()  # the transaction our lookup began, nothing else
    where = f"on {table}" if table else ""
    if not holders:
        return where
    held = "held by " + ", ".join(holders)
    return f"{where}, {held}" if where else held


class _no_transaction:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def lock_wait_context(connection: Connection, statement: Any) -> str:
    """" (revision A -> B, on nodes, held by pid 4242 ...)" for the lock-retry message, or ""."""
    from migrations_policy.core.progress import active

    watched = active()
    parts = [part for part in (watched.describe() if watched is not None else "",
                               describe_lock_holders(connection, statement)) if part]
    return f" ({', '.join(parts)})" if parts else ""
