"""The drop guard on the paths no SQLAlchemy event sees: the migration connection's DB-API driver.

A revision can reach the driver under SQLAlchemy:
``op.get_bind().connection.dbapi_connection.cursor().execute(...)``, the pool
proxy's ``cursor()``, psycopg's ``connection.execute``, sqlite3's
``executescript``, PyMySQL's ``query``.  For the length of a watched revision,
:func:`installed` puts one hook on the migration connection's driver that hands
each statement (or, on SQLite, each object the database is about to drop or
alter) to the drop guard's watch, which decides with the same rules as for
SQLAlchemy's statements (``drop_guard``) and refuses before the database acts:

* SQLite: ``set_authorizer``.  The database itself reports every drop and alter
  (``SQLITE_DROP_TABLE``, ``SQLITE_ALTER_TABLE`` with the column for a DROP COLUMN),
  and, to a watch that sets ``watches_rows`` (a downgrade's), every ``DELETE``/``UPDATE``
  while it prepares a statement, whatever sent it: ``execute``, ``executescript``,
  any cursor.  A watch that sets ``keeps_transaction`` (a downgrade's), or any watch inside
  ``transaction_kept`` (an upgrade's: ``gate.runtime``), is also told of a
  COMMIT or ROLLBACK not sent by SQLAlchemy (sqlite3's ``executescript`` COMMITs the
  revision's transaction before its script), which is refused: the revision stays one
  transaction, applied whole or not at all.  A RENAME (table or column) and an ADD COLUMN name no column: they
  count as changing the whole table.
* psycopg 3: the connection's ``cursor_factory`` becomes a subclass of it that
  judges ``execute``/``executemany``/``stream`` (``connection.execute`` makes its
  cursor there too).  A cursor class built directly (``psycopg.ClientCursor(conn)``)
  or libpq itself (``conn.pgconn.exec_``) is not seen: the check after ``upgrade()``
  refuses those, and the revision's transaction rolls them back.
* PyMySQL: the connection's ``query`` (every cursor class sends through it, and
  it is public API).  Its private ``_execute_command`` is not seen: the check after
  ``upgrade()`` refuses the revision, but the DDL has committed.

SQLAlchemy's own statements reach the driver too; they were judged at
``before_cursor_execute``, so the hooks let them through while SQLAlchemy executes
them (the dialect's ``do_execute`` events, :func:`through_sqlalchemy`).

Everything installed is removed when the revision ends, on error too (SQLite's
authorizer is reset to none: sqlite3 cannot tell which one was set before).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any, Callable, Iterator, Protocol

from sqlalchemy import event
from sqlalchemy.engine import Connection


#: The column of what a watch that sets ``watches_rows`` is told a statement changes when it deletes
#: or updates rows of a table (SQLite's authorizer: ``SQLITE_DELETE``, ``SQLITE_UPDATE``).
ROWS = "<rows it deletes or rewrites>"
#: The column of what such a watch is told when a statement runs a trigger of the application (SQLite's
#: authorizer: a write whose inner-most trigger is not one of the framework's): its table is the trigger.
FIRED = "<a trigger of the application it fires>"


class Watch(Protocol):
    def passing(self) -> bool:
        """True while a statement SQLAlchemy sent (already judged) or the guard's own probe runs."""

    def judge_statement(self, statement: str) -> None:
        """Raise the refusal when *statement* drops what an unfinished migration reads."""

    def judge_gone(self, gone: list[tuple[str, str | None]]) -> bool:
        """True (refused; the watch keeps why) when *gone* is what an unfinished migration reads."""

    sqlalchemy_depth: int


@contextlib.contextmanager
def installed(connection: Connection, watch: Watch) -> Iterator[None]:
    """The hook for *connection*'s driver, and the scope marking SQLAlchemy's own statements."""
    with through_sqlalchemy(connection, watch), _driver_hook(connection, watch):
        yield


@contextlib.contextmanager
def through_sqlalchemy(connection: Connection, watch: Watch) -> Iterator[None]:
    """While SQLAlchemy executes a statement on *connection* (``do_execute`` and its siblings),
    ``watch.sqlalchemy_depth`` is above 0; a failing statement leaves it as it was."""
    def scoped(method: str, arguments: int) -> Callable[..., bool]:
        def listener(*args: Any) -> bool:
            context = args[arguments - 1]
            if context is None or context.root_connection is not connection:
                return False  # another connection of the engine: the dialect executes it
            watch.sqlalchemy_depth += 1
            try:
                getattr(context.dialect, method)(*args)
            finally:
                watch.sqlalchemy_depth -= 1
            return True

        return listener

    engine = connection.engine
    listeners = [("do_execute", scoped("do_execute", 4)), ("do_executemany", scoped("do_executemany", 4)),
                 ("do_execute_no_params", scoped("do_execute_no_params", 3))]
    for name, listener in listeners:
        event.listen(engine, name, listener)
    try:
        yield
    finally:
        for name, listener in listeners:
            event.remove(engine, name, listener)


def _driver_hook(connection: Connection, watch: Watch) -> contextlib.AbstractContextManager[None]:
    driver = connection.connection.dbapi_connection
    if isinstance(driver, sqlite3.Connection):
        return _sqlite_authorizer(driver, watch)
    if hasattr(driver, "cursor_factory") and hasattr(driver, "pgconn"):
        return _psycopg_cursor_factory(driver, watch)
    if type(driver).__module__.startswith("pymysql"):
        return _pymysql_query(driver, watch)
    return contextlib.nullcontext()  # another driver: the check after upgrade() alone


def _after(watch: Watch) -> None:
    """A judged driver statement has run (or failed): a watch that holds a lock for the statement's
    length (a downgrade's ``LOCK TABLES`` on MariaDB) releases it now."""
    after = getattr(watch, "after_statement", None)
    if after is not None:
        after()


def statement_text(query: Any, context: Any = None) -> str:
    """The SQL text of what a driver was asked to run: str, bytes, or psycopg's ``sql.Composable``."""
    if isinstance(query, str):
        return query
    if isinstance(query, (bytes, bytearray, memoryview)):
        return bytes(query).decode("utf-8", errors="replace")
    as_string = getattr(query, "as_string", None)
    return as_string(context) if as_string is not None else str(query)


# -- SQLite ---------------------------------------------------------------------------
#: ``connection.info``: the keeper of the revision's transaction while ``transaction_kept`` runs.
_KEEPER = "migrations_policy.transaction_keeper"


class _Keeper:
    """A watch that judges no statement and only keeps the transaction (``transaction_kept``)."""

    keeps_transaction = True
    watches_rows = False

    def __init__(self, connection: Connection):
        self.connection = connection
        self.ends: list[str] = []

    def passing(self) -> bool:
        return True

    def refuse_transaction_end(self, verb: str) -> None:
        self.ends.append(verb)


@contextlib.contextmanager
def transaction_kept(connection: Connection) -> Iterator[list[str]]:
    """SQLite (sqlite3): while the block runs a revision, a COMMIT or ROLLBACK SQLAlchemy did not
    send is refused (sqlite3's ``executescript`` COMMITs the open transaction before its script):
    the revision stays one transaction.  Yields the list of the verbs refused (empty: none).  A
    watch installed inside the block (the drop guard's) keeps it too: its authorizer replaces this
    one, and refuses for this keeper.  Other dialects: nothing (yields an empty list)."""
    driver = getattr(connection.connection, "driver_connection", None)
    if connection.dialect.name != "sqlite" or not hasattr(driver, "set_authorizer"):
        yield []
        return
    keeper = _Keeper(connection)
    connection.info[_KEEPER] = keeper
    try:
        with _sqlite_authorizer(driver, keeper):
            yield keeper.ends
    finally:
        connection.info.pop(_KEEPER, None)


@contextlib.contextmanager
def _sqlite_authorizer(driver: sqlite3.Connection, watch: Watch) -> Iterator[None]:
    rows_watched = getattr(watch, "watches_rows", False)
    connection = getattr(watch, "connection", None)
    keeper = connection.info.get(_KEEPER) if connection is not None else None
    keeps_transaction = getattr(watch, "keeps_transaction", False) or keeper is not None
    refuse_end = watch.refuse_transaction_end if getattr(watch, "keeps_transaction", False) \
        else getattr(keeper, "refuse_transaction_end", None)
    ending = []  # SQLAlchemy's own COMMIT/ROLLBACK of the revision's transaction, about to be prepared

    from migrations_policy.data.remaining.completion import TRIGGER_PREFIX
    from migrations_policy.window.sync_triggers import PREFIX

    framework = (PREFIX, TRIGGER_PREFIX)  # their names only: no query may run inside the authorizer

    def authorize(action: int, first: str | None, second: str | None, third: str | None, inner: Any) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and keeps_transaction and first in ("COMMIT", "ROLLBACK"):
            # sqlite3's executescript COMMITs the open transaction before its script, and a script may
            # say COMMIT or ROLLBACK itself: the revision's transaction would end part-way, and a
            # failure after it would leave the revision partly applied where SQLite keeps no journal.
            # Only SQLAlchemy's own end of the transaction (its commit/rollback events) passes.
            if ending:
                ending.pop()
                return sqlite3.SQLITE_OK
            refuse_end(first)
            return sqlite3.SQLITE_DENY
        if watch.passing():
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_DROP_TABLE, sqlite3.SQLITE_DROP_TEMP_TABLE) and first:
            gone = [(first, None)]
        elif action == sqlite3.SQLITE_ALTER_TABLE and second:
            gone = [(second, third)]  # (database, table, the dropped column or None)
        elif rows_watched and inner and action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_DELETE, sqlite3.SQLITE_UPDATE) \
                and not inner.lower().startswith(framework):
            gone = [(inner, FIRED)]  # code of the application a write fires (``fired``): no count can follow it
        elif action in (sqlite3.SQLITE_DELETE, sqlite3.SQLITE_UPDATE) and first and rows_watched \
                and not first.lower().startswith("sqlite_"):
            gone = [(first, ROWS)]  # a DELETE or UPDATE of the table's rows (a downgrade's watch only)
        else:
            return sqlite3.SQLITE_OK
        try:
            return sqlite3.SQLITE_DENY if watch.judge_gone(gone) else sqlite3.SQLITE_OK
        except Exception:  # noqa: BLE001 - cannot judge: fail closed
            return sqlite3.SQLITE_DENY

    def sqlalchemy_ends(conn: Any) -> None:
        if driver.in_transaction:  # sqlite3 prepares a COMMIT/ROLLBACK only then
            ending[:] = [True]

    listening = keeps_transaction and connection is not None
    if listening:
        event.listen(connection, "commit", sqlalchemy_ends)
        event.listen(connection, "rollback", sqlalchemy_ends)
    driver.set_authorizer(authorize)
    try:
        yield
    finally:
        driver.set_authorizer(None)
        if listening:
            event.remove(connection, "commit", sqlalchemy_ends)
            event.remove(connection, "rollback", sqlalchemy_ends)


# -- psycopg 3 ------------------------------------------------------------------------
@contextlib.contextmanager
def _psycopg_cursor_factory(driver: Any, watch: Watch) -> Iterator[None]:
    original = driver.cursor_factory

    class JudgedCursor(original):  # type: ignore[misc, valid-type]
        def _judge(self, query: Any) -> bool:
            if watch.passing():
                return False
            watch.judge_statement(statement_text(query, self))
            return True

        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            judged = self._judge(query)
            try:
                return super().execute(query, *args, **kwargs)
            finally:
                if judged:
                    _after(watch)

        def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            judged = self._judge(query)
            try:
                return super().executemany(query, *args, **kwargs)
            finally:
                if judged:
                    _after(watch)

        def stream(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            self._judge(query)
            return super().stream(query, *args, **kwargs)

    driver.cursor_factory = JudgedCursor
    try:
        yield
    finally:
        driver.cursor_factory = original


# -- PyMySQL --------------------------------------------------------------------------
@contextlib.contextmanager
def _pymysql_query(driver: Any, watch: Watch) -> Iterator[None]:
    own = vars(driver).get("query")  # normally the class's method
    send = driver.query

    def query(sql: Any, unbuffered: bool = False) -> Any:
        if watch.passing():
            return send(sql, unbuffered)
        watch.judge_statement(statement_text(sql))
        try:
            return send(sql, unbuffered)
        finally:
            _after(watch)

    driver.query = query
    try:
        yield
    finally:
        vars(driver).pop("query", None)  # the revision may have replaced or removed it
        if own is not None:
            driver.query = own
