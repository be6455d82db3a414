"""Engines and connections for a URL a person typed: the one place that turns "this URL cannot be
used" (unknown dialect or driver, options the driver chokes on, server unreachable) into one
``DatabaseError`` line with the password masked.  No alembic import (``lint --url`` uses it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError

from migrations_policy.core import urls as _urls
from migrations_policy.core.errors import DatabaseError


#: The package extra that installs each dialect's default driver (setup.cfg).
_EXTRAS = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql"}


def _first_line(exc: BaseException) -> str:
    """The first meaningful line of a driver's error, without SQLAlchemy's background link."""
    import configparser

    if isinstance(exc, configparser.Error):
        from migrations_policy.core.config import describe_config_error

        return describe_config_error(exc)
    text = str(getattr(exc, "orig", None) or exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("(Background on this error"):
            return line
    return type(exc).__name__


def open_engine(url: str | URL, what: str = "database", **options: Any) -> Engine:
    """``create_engine`` for *url*; an unknown dialect or driver (or a bad option) is one line."""
    parsed = url if isinstance(url, URL) else _urls.parse_url(url)
    try:
        return interrupts_keep_sqlite_sessions(create_engine(parsed, **options))
    except (SQLAlchemyError, ImportError, ValueError, TypeError) as exc:
        extra = _EXTRAS.get(parsed.get_backend_name()) if isinstance(exc, ImportError) else None
        hint = f" (the driver is an extra: pip install \"migrations_policy[{extra}]\")" if extra else ""
        raise DatabaseError(f"cannot use {what} {_urls.mask_url(parsed)}: {_urls.mask_text(_first_line(exc))}"
                            f"{hint}") from None


def connection_error(exc: BaseException, url: str | URL, what: str = "database") -> DatabaseError:
    """The one-line error for a failed ``engine.connect()``.  Anything a driver raises while
    connecting counts: PyMySQL fails ``?charset=bogus`` with AttributeError, ``?ssl_ca=/nonexistent``
    with FileNotFoundError."""
    detail = _urls.mask_text(_first_line(exc))
    if not isinstance(exc, SQLAlchemyError):
        detail = f"the driver refused the URL's options: {type(exc).__name__}: {detail}"
    return DatabaseError(f"cannot connect to {what} {_urls.mask_url(url)}: {detail}")


def interrupts_keep_sqlite_sessions(engine: Engine) -> Engine:
    """On SQLite, an interrupt (Ctrl-C, or the SIGTERM ``dbsync`` turns into one) raised inside a
    statement's execution is not a disconnect: the statement's cursor is closed and the
    connection's transaction rolled back on the spot, and the connection stays usable.
    Idempotent; returns *engine*.

    SQLAlchemy treats an interrupt inside an execution as a disconnect and closes the DBAPI
    connection.  CPython's ``sqlite3`` runs a statement to the end of its C call before a signal
    handler runs, so the connection is sound; but closing it while the interrupted cursor is still
    referenced (the interrupt's traceback holds it) leaves a zombie that keeps its transaction and
    the database's write lock until the cursor is freed: the runner's own bookkeeping after the
    interrupt then failed with "database is locked" (stop 32's CI).  Other dialects: unchanged (a
    server ends the closed session's transaction)."""
    listener = _sqlite_interrupt_is_no_disconnect
    if engine.dialect.name == "sqlite" and not event.contains(engine, "handle_error", listener):
        event.listen(engine, "handle_error", listener)
    return engine


def _sqlite_interrupt_is_no_disconnect(context: Any) -> None:
    if context.is_disconnect and isinstance(context.original_exception, (KeyboardInterrupt, SystemExit)):
        context.is_disconnect = False  # SQLAlchemy then closes the cursor and keeps the connection
        if context.connection is not None and not context.connection.invalidated:
            dbapi = context.connection.connection.dbapi_connection
            if dbapi is not None and dbapi.in_transaction:
                dbapi.rollback()  # what closing it would have done
