"""Migration sessions on MariaDB/MySQL run with a strict ``sql_mode``.

Under a non-strict mode (``sql_mode=''``, the server's or the session's) MariaDB
truncates or coerces a value that does not fit a column's new type with a warning,
and the statement succeeds: ``ALTER TABLE nodes MODIFY extra VARCHAR(9)`` cut 201 of
300 unmigrated values and exited 0.  ``STRICT_ALL_TABLES`` is added to the session's
own mode (nothing else of it changes), so such a statement is an error and the
database rolls it back (an ``ALTER TABLE`` copies into a new table and keeps the old
one on error).  Other dialects: nothing to do (PostgreSQL and SQLite never truncate
silently on a type change: PostgreSQL refuses, SQLite keeps the value).
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from alembic.util import CommandError
from sqlalchemy.engine import Connection

STRICT = "STRICT_ALL_TABLES"
#: Statements that store values (and so could truncate one under a non-strict mode), after any
#: leading comments; MariaDB's ``SET STATEMENT var=... FOR <statement>`` overrides the mode for one.
_STORES = re.compile(r"\A(?:\s+|/\*.*?\*/|--[^\n]*(?:\n|\Z)|#[^\n]*(?:\n|\Z))*"
                     r"(ALTER|UPDATE|INSERT|REPLACE|CREATE|LOAD|SET\s+STATEMENT)\b", re.I | re.S)
_SQL_MODE = re.compile(r"sql_mode", re.I)
#: Constant SQL (no input reaches it): the session's mode, with STRICT_ALL_TABLES added if missing.
_RESTRICT = ("SET SESSION sql_mode = IF(FIND_IN_SET('STRICT_ALL_TABLES', @@SESSION.sql_mode), "
             "@@SESSION.sql_mode, CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES'))")


class NonStrictStatement(CommandError):
    """A migration statement that sets its own ``sql_mode`` for itself (``SET STATEMENT sql_mode=...
    FOR ...``): a non-strict mode would let it truncate values silently."""

    exit_code = 2


def make_strict(connection: Connection) -> None:
    """Add ``STRICT_ALL_TABLES`` to this MariaDB/MySQL session's ``sql_mode``."""
    if connection.dialect.name not in ("mysql", "mariadb"):
        return
    connection.execute(sa.text("SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), :strict)"),
                       {"strict": STRICT})
    if connection.in_transaction():
        connection.commit()


def session_mode(connection: Connection) -> str:
    return str(connection.execute(sa.text("SELECT @@SESSION.sql_mode")).scalar() or "")


def keep_strict(connection: Connection, steps: list) -> None:
    """MariaDB/MySQL: for the length of each revision, the session is made strict again right before
    every statement that stores values, whatever sent it: a script can set its own session's
    ``sql_mode`` (``SET SESSION sql_mode = ''``, through a variable, a procedure, a prepared
    statement, the driver) after :func:`make_strict` ran, and its ``MODIFY`` then cut every value
    (300 of 300 uuids).  The judgement is made on the path every statement takes, the DB-API
    driver's ``query`` (SQLAlchemy's cursors, ``exec_driver_sql`` and a script's own driver calls
    alike), as it is about to run; it costs one round trip per such statement.  A statement that
    sets ``sql_mode`` for itself (``SET STATEMENT sql_mode=... FOR``) is refused before it runs."""
    if connection.dialect.name not in ("mysql", "mariadb"):
        return
    for step in steps:
        if hasattr(step, "migration_fn"):
            step.migration_fn = _strict_step(connection, step.migration_fn)


def _strict_step(connection: Connection, migration_fn: Callable) -> Callable:
    @functools.wraps(migration_fn)
    def migrate(**kw: Any) -> Any:
        with _strict_driver(connection):
            return migration_fn(**kw)

    return migrate


@contextlib.contextmanager
def _strict_driver(connection: Connection) -> Iterator[None]:
    driver = connection.connection.dbapi_connection
    if not type(driver).__module__.startswith("pymysql"):
        yield  # another driver: the session's mode as make_strict left it
        return
    own = vars(driver).get("query")
    send = driver.query

    def query(sql: Any, unbuffered: bool = False) -> Any:
        text = sql if isinstance(sql, str) else bytes(sql).decode("utf-8", errors="replace")
        found = _STORES.match(text)
        if found:
            if found.group(1).upper().startswith("SET") and _SQL_MODE.search(text):
                raise NonStrictStatement(
                    "a migration statement sets its own sql_mode (SET STATEMENT sql_mode=... FOR ...); migration "
                    f"sessions stay strict so that no value is truncated silently: {' '.join(text.split())[:120]}")
            send(_RESTRICT)
        return send(sql, unbuffered)

    driver.query = query
    try:
        yield
    finally:
        vars(driver).pop("query", None)
        if own is not None:
            driver.query = own
