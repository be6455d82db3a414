"""The database ``lint --replay`` upgrades the history on: given, or created for the run and dropped after.

``Target`` says which: ``url`` (``--url``): an existing database, which must be empty
-- one with tables or views is refused before anything runs (``UsageError``, exit 2), so
a replay never writes into a database that holds anything; ``server`` (``--scratch-server``):
a PostgreSQL or MySQL/MariaDB server URL on which a throwaway database ``mp_replay_<hex>``
is created and dropped at the end, also after an error, Ctrl-C or SIGTERM; neither: a
SQLite file in a temporary directory, removed at the end.

``scratch_database(target)`` is that context manager (it yields the URL to replay on);
``target_dialect(target)`` the dialect the findings are judged for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from migrations_policy.core.engines import _first_line, connection_error, open_engine
from migrations_policy.core.urls import mask_text, mask_url, parse_url
from migrations_policy.core.errors import DatabaseError, UsageError

#: Schemas of the server itself: their tables do not make a PostgreSQL database "not empty".
_SYSTEM_SCHEMAS = ("information_schema", "pg_catalog", "pg_toast")


@dataclass(frozen=True)
class Target:
    url: str | None = None
    server: str | None = None


def _dialect(url) -> str:
    name = url.get_backend_name()
    return "mysql" if name == "mariadb" else name


def target_dialect(target: Target) -> str:
    """The dialect of *target*'s database (the URL is parsed, not connected to); bad combinations are refused."""
    if target.url and target.server:
        raise UsageError("lint --replay: give --url (an empty database) or --scratch-server (a server), not both")
    if target.server:
        dialect = _dialect(parse_url(target.server))
        if dialect == "sqlite":
            raise UsageError("lint --replay: --scratch-server is a PostgreSQL or MySQL/MariaDB server URL "
                             "(SQLite needs none: --replay alone replays on a temporary file)")
        return dialect
    if target.url:
        parsed = parse_url(target.url)
        if _dialect(parsed) == "sqlite" and (not parsed.database or parsed.database == ":memory:"
                                             or parsed.query.get("mode") == "memory"):
            raise UsageError("lint --replay: an in-memory SQLite database cannot be replayed on (each script runs "
                             "in its own process); give a file, or no --url for a temporary one")
        return _dialect(parsed)
    return "sqlite"


@contextlib.contextmanager
def scratch_database(target: Target) -> Iterator[str]:
    """The URL (password included: it goes to the worker through a pipe, never into a message) to replay on."""
    if target.url:
        _require_empty(target.url)
        yield target.url
    elif target.server:
        with _throwaway_database(target.server) as url:
            yield url
    else:
        with tempfile.TemporaryDirectory(prefix="mp-replay-") as directory:
            yield f"sqlite:///{os.path.join(directory, 'replay.db')}"


def _require_empty(url: str) -> None:
    """Refuse a database that holds a table or a view (in any of its schemas on PostgreSQL)."""
    import sqlalchemy as sa

    parsed = parse_url(url)
    engine = open_engine(parsed, "replay database")
    try:
        with _connect(engine, parsed, "replay database") as conn:
            inspector = sa.inspect(conn)
            schemas = [None]
            if conn.dialect.name == "postgresql":
                schemas = [s for s in inspector.get_schema_names()
                           if s not in _SYSTEM_SCHEMAS and not s.startswith("pg_")]
            found = [name if schema in (None, inspector.default_schema_name) else f"{schema}.{name}"
                     for schema in schemas
                     for name in [*inspector.get_table_names(schema), *inspector.get_view_names(schema)]]
    finally:
        engine.dispose()
    if found:
        shown = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
        raise UsageError(f"lint --replay: {mask_url(parsed)} is not empty ({len(found)} table(s)/view(s): {shown}); "
                         "the replay upgrades the history from base and needs an empty database "
                         "(or --scratch-server SERVER_URL to create a throwaway one)")


def _database_ddl():
    """``CREATE DATABASE`` / ``DROP DATABASE`` as SQLAlchemy DDL elements (names quoted by the dialect)."""
    from sqlalchemy.ext.compiler import compiles
    from sqlalchemy.sql.ddl import DDLElement

    class CreateDatabase(DDLElement):
        inherit_cache = False

        def __init__(self, name: str):
            self.name = name

    class DropDatabase(CreateDatabase):
        pass

    @compiles(CreateDatabase)
    def _create(element: Any, compiler: Any, **kw: Any) -> str:
        return f"CREATE DATABASE {compiler.preparer.quote(element.name)}"

    @compiles(DropDatabase)
    def _drop(element: Any, compiler: Any, **kw: Any) -> str:
        force = " WITH (FORCE)" if compiler.dialect.name == "postgresql" else ""
        return f"DROP DATABASE IF EXISTS {compiler.preparer.quote(element.name)}{force}"

    return CreateDatabase, DropDatabase


@contextlib.contextmanager
def _throwaway_database(server: str) -> Iterator[str]:
    parsed = parse_url(server)
    create, drop = _database_ddl()
    name = f"mp_replay_{uuid.uuid4().hex[:12]}"
    admin = open_engine(parsed, "scratch server", isolation_level="AUTOCOMMIT")
    try:
        with _connect(admin, parsed, "scratch server") as conn:
            _admin(conn, create(name), f"cannot create a scratch database on {mask_url(parsed)}")
        with _sigterm_interrupts():
            try:
                yield parsed.set(database=name).render_as_string(hide_password=False)
            finally:
                with admin.connect() as conn:
                    _admin(conn, drop(name), f"cannot drop the scratch database {name} on {mask_url(parsed)}")
    finally:
        admin.dispose()


def _connect(engine, parsed, what: str):
    try:
        return engine.connect()
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises while connecting: one line
        raise connection_error(exc, parsed, what) from None


def _admin(conn, statement, failure: str) -> None:
    from sqlalchemy.exc import DBAPIError

    try:
        conn.execute(statement)
    except DBAPIError as exc:
        raise DatabaseError(f"{failure}: {mask_text(_first_line(exc))}") from None


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt meanwhile (its default would end the process before the drop)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
