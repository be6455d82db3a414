"""``lint --url``: run ``upgrade()`` for real on a scratch database, then roll back.

Used only for scripts that cannot run offline (they reflect the live schema or read
rows).  The URL must point at a scratch database at the script's ``down_revision``:
on PostgreSQL and SQLite the DDL is rolled back with the transaction; MySQL/MariaDB
commit DDL implicitly, so there it must be a throwaway database.  When the database refuses
the script (it is not at the script's ``down_revision``), the script gets ``MP000`` saying so
and pointing at ``lint --replay``.  ``refused`` / ``describe_refusal`` tell a database's
answer from a script's own bug, for ``--replay`` too.
"""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from migrations_policy.core.engines import _first_line, connection_error, open_engine
from migrations_policy.core.urls import mask_text, mask_url, parse_url
from migrations_policy.core.errors import DatabaseError
from migrations_policy.lint.offline.loader import LoadError, line_in
from migrations_policy.lint.offline.recorder import record_online

#: Exceptions (by class name) of SQLAlchemy that are the database's answer, not the script's own bug.
_DATABASE_ANSWERS = ("NoSuchTableError", "NoReferencedTableError", "NoReferencedColumnError")


def refused(exc: BaseException) -> bool:
    """Whether *exc* is the database refusing what a script did (an error of the database, a table that
    reflection cannot find), not a bug of the script's own code."""
    return isinstance(exc, DBAPIError) or (isinstance(exc, SQLAlchemyError) and type(exc).__name__ in _DATABASE_ANSWERS)


def describe_refusal(exc: BaseException) -> str:
    """The database's first line of text, with the driver's error class, password masked."""
    orig = getattr(exc, "orig", None)
    return mask_text(f"{type(orig if orig is not None else exc).__name__}: {_first_line(exc)}")


def scratch_engine(url: str):
    """An engine on *url* whose transactions cover DDL on SQLite too (DDL rolls back with them)."""
    engine = open_engine(url, "scratch database")
    if engine.dialect.name == "sqlite":  # pysqlite commits before DDL unless told to BEGIN itself
        @event.listens_for(engine, "connect")
        def _no_implicit_transactions(dbapi_connection, record):
            dbapi_connection.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN")
    return engine


def record_on_scratch_database(upgrade, url: str, filename: str) -> list:
    engine = scratch_engine(url)
    try:
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                return record_online(upgrade, conn, filename).ops
            finally:
                trans.rollback()
    except SQLAlchemyError as exc:
        if getattr(exc, "connection_invalidated", False) or "connect" in type(exc).__name__.lower():
            raise DatabaseError(f"cannot use scratch database {mask_url(url)}: {mask_text(str(exc).splitlines()[0])}") from None
        if refused(exc):  # the database as it stands, not at the script's down_revision: the script's verdict
            raise LoadError(f"the scratch database refused upgrade(): {describe_refusal(exc)} (it ran on the "
                            "database as it stands; lint --replay upgrades the history from base, each script "
                            "at its own down_revision)", line_in(exc, filename)) from None
        raise
    finally:
        engine.dispose()


def check_scratch_database(url: str) -> str:
    """Connect once (a clear one-line error now rather than per file); the URL's dialect name."""
    parsed = parse_url(url)
    engine = open_engine(parsed, "scratch database")
    try:
        with engine.connect():
            pass
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises while connecting: one line
        raise connection_error(exc, parsed, "scratch database") from None
    finally:
        engine.dispose()
    name = parsed.get_backend_name()
    return "mysql" if name == "mariadb" else name
