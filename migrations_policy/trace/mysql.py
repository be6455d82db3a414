"""MariaDB / MySQL: DDL is not transactional, so the revisions run on a copy of the schema.

A scratch database on the same server gets every table of the live one, from
the server's own ``SHOW CREATE TABLE`` (structure only, no rows).  Each pending
revision then runs there statement by statement; an ``ALTER TABLE`` (or
``CREATE INDEX``) is first issued with ``ALGORITHM=INSTANT``, then with
``ALGORITHM=INPLACE, LOCK=NONE``, and only if both are refused as written:
the report says which the server accepted.  The scratch database is dropped.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.expand.lock_timeout import set_session_lock_timeout
from migrations_policy.core.project import _one_line
from migrations_policy.trace.capture import run_revision
from migrations_policy.trace.report import StatementTrace

_ALTER_CLAUSES = (("ALGORITHM=INSTANT", ", ALGORITHM=INSTANT"),
                  ("ALGORITHM=INPLACE, LOCK=NONE", ", ALGORITHM=INPLACE, LOCK=NONE"))
_INDEX_CLAUSES = (("ALGORITHM=INPLACE, LOCK=NONE", " ALGORITHM=INPLACE LOCK=NONE"),)


def _clauses(sql: str) -> tuple:
    words = sql.upper().split()
    if words[:2] == ["ALTER", "TABLE"]:
        return _ALTER_CLAUSES
    if words[:1] == ["CREATE"] and "INDEX" in words[1:3]:
        return _INDEX_CLAUSES
    return ()


class _Observer:
    def __init__(self, conn: Connection, revision: str, found: list[StatementTrace]):
        self.conn, self.revision, self.found = conn, revision, found

    def __call__(self, sql: str, execute, autocommit: bool):
        trace = StatementTrace(self.revision, sql)
        self.found.append(trace)
        for clause, suffix in _clauses(sql):
            try:
                # Probing the server's online DDL: a fixed clause appended to the compiled statement.
                self.conn.exec_driver_sql(sql + suffix)
            except sa.exc.DBAPIError as exc:
                trace.algorithms.append((clause, f"refused ({_one_line(exc)})"))
                continue
            trace.algorithms.append((clause, "accepted"))
            return None
        try:
            result = execute()
        except sa.exc.DBAPIError as exc:
            trace.error = _one_line(exc)
            return None
        if trace.algorithms:
            trace.algorithms.append(("as written", "accepted: it copies the table or blocks writes"))
        return result


def trace_revisions(conn: Connection, revisions: list, lock_timeout: float) -> list[StatementTrace]:
    """Run *revisions* on a structural copy of *conn*'s database; the copy is dropped afterwards."""
    preparer = conn.dialect.identifier_preparer
    live = conn.execute(sa.select(sa.func.database())).scalar()
    scratch = f"mp_trace_{uuid.uuid4().hex[:12]}"
    tables = sa.inspect(conn).get_table_names()
    creates = [conn.exec_driver_sql(f"SHOW CREATE TABLE {preparer.quote(live)}.{preparer.quote(t)}").one()[1]
               for t in tables]
    conn.exec_driver_sql(f"CREATE DATABASE {preparer.quote(scratch)}")
    found: list[StatementTrace] = []
    engine = sa.create_engine(conn.engine.url.set(database=scratch), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as copy:
            copy = copy.execution_options(isolation_level="AUTOCOMMIT")
            copy.exec_driver_sql("SET foreign_key_checks = 0")
            for create in creates:
                copy.exec_driver_sql(create)  # the server's own DDL for the table
            copy.exec_driver_sql("SET foreign_key_checks = 1")
            set_session_lock_timeout(copy, lock_timeout)
            for revision in revisions:
                try:
                    run_revision(copy, revision, _Observer(copy, revision.revision, found))
                except Exception as exc:
                    found.append(StatementTrace(revision.revision, "(upgrade() raised)", error=_one_line(exc)))
                    break
    finally:
        engine.dispose()
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {preparer.quote(scratch)}")
    return found
