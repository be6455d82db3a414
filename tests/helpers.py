"""Shared test helpers: a copy of the example app in a temporary directory."""

from __future__ import annotations

import shutil
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "inventory"


def copy_example(tmp_path: Path) -> Path:
    """Copy the inventory example (alembic env + package) to *tmp_path*; return its alembic.ini."""
    target = tmp_path / "inventory_app"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__", "*.db"))
    return target / "alembic.ini"


def forget_example_modules() -> None:
    """Drop imported ``inventory`` modules so the next test imports its own copy."""
    for name in [m for m in sys.modules if m == "inventory" or m.startswith("inventory.")]:
        del sys.modules[name]


def set_ini_option(ini: Path, section: str, key: str, value: str) -> None:
    """Set ``key = value`` in ``[section]`` of an ini file, keeping everything else."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keep key case
    parser.read(ini)
    parser.set(section, key, value)
    with open(ini, "w") as fh:
        parser.write(fh)


def write_data_project(directory: Path, module: str, source: str) -> Path:
    """A project in *directory*: *module*.py holding *source*, and an alembic.ini naming it as data_migrations."""
    import textwrap

    (directory / f"{module}.py").write_text(textwrap.dedent(source))
    (directory / "alembic.ini").write_text(textwrap.dedent(f"""\
        [alembic]
        script_location = %(here)s/migrations
        prepend_sys_path = %(here)s
        path_separator = os

        [migrations_policy]
        data_migrations = {module}
        """))
    return directory


def hold_lock(engine: sa.Engine, *statements: str, release: threading.Event | None = None,
              seconds: float | None = None, isolation_level: str | None = None,
              results: list | None = None) -> threading.Thread:
    """An application transaction on its own thread: it runs *statements* (keeping the locks they
    take) and holds them until *release* is set or *seconds* have passed, then rolls back.
    Returns once the locks are held; each statement's scalar result goes to *results*."""
    ready = threading.Event()

    def hold():
        connection = engine.connect()
        if isolation_level:
            connection = connection.execution_options(isolation_level=isolation_level)
        with connection as conn:
            for statement in statements:
                result = conn.execute(sa.text(statement))
                value = result.scalar() if result.returns_rows else None
                if results is not None:
                    results.append(value)
            ready.set()
            if release is not None:
                release.wait(60)
            else:
                time.sleep(seconds or 0)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert ready.wait(10)
    return thread


def wait_until(engine: sa.Engine, query: str, done=lambda rows: bool(rows and rows[0][0]),
               seconds: float = 60.0, interval: float = 0.01) -> bool:
    """Poll *query* every *interval* seconds on a connection of its own until ``done(rows)``
    (default: a non-zero first value); False if *seconds* pass first.  For waiting on an observable
    server state (a session waiting for a lock) instead of sleeping for a guessed time."""
    deadline = time.monotonic() + seconds
    with engine.connect() as conn:
        while True:
            rows = conn.execute(sa.text(query)).all()
            conn.rollback()  # no snapshot kept between polls
            if done(rows):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(interval)


@contextmanager
def database_user(engine: sa.Engine, grants: dict[str | None, str], *, may_create: bool = True) -> Iterator[sa.Engine]:
    """An engine of a new login user of *engine*'s database holding only *grants*: privileges
    (``"SELECT, INSERT"``) by table name, ``None`` for every table there is now.  ``may_create=False``
    also takes PostgreSQL's CREATE on ``public`` from everyone (MariaDB: no grant, no CREATE).
    SQLite has no users: *engine* itself.  The user is dropped on exit."""
    backend = engine.dialect.name
    if backend == "sqlite":
        yield engine
        return
    user, password = f"u_{uuid.uuid4().hex[:12]}", f"pw-{uuid.uuid4().hex}"
    quote = engine.dialect.identifier_preparer.quote
    who = user if backend == "postgresql" else f"'{user}'@'127.0.0.1'"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if backend == "postgresql":
            conn.exec_driver_sql(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
            if not may_create:
                conn.exec_driver_sql("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        else:
            conn.exec_driver_sql(f"CREATE USER {who} IDENTIFIED BY '{password}'")
        for table, privileges in grants.items():
            if backend == "postgresql":
                target = "ALL TABLES IN SCHEMA public" if table is None else quote(table)
            else:
                target = f"{quote(engine.url.database)}.{'*' if table is None else quote(table)}"
            conn.exec_driver_sql(f"GRANT {privileges} ON {target} TO {who}")
    user_engine = sa.create_engine(engine.url.set(username=user, password=password))
    try:
        yield user_engine
    finally:
        user_engine.dispose()
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if backend == "postgresql":
                conn.exec_driver_sql(f"DROP OWNED BY {user}")
                conn.exec_driver_sql(f"DROP ROLE {user}")
            else:
                conn.exec_driver_sql(f"DROP USER {who}")


def console_script(name: str) -> str:
    """The installed console script *name* beside the interpreter running the tests (found in an
    unactivated virtual environment too, where PATH does not hold it)."""
    return str(Path(sys.executable).with_name(name))
