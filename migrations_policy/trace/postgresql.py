"""PostgreSQL: every pending expand revision in one transaction, observed statement by statement, rolled back.

For each statement (under a SAVEPOINT, so a refused one does not end the trace):

* the relation locks it took: ``pg_locks`` of our backend, new since the
  statement before (locks are held to the end of the transaction, so the
  difference is exactly what this statement added);
* rewrites: ``pg_class.relfilenode`` of every user relation, before and after;
* scans: ``pg_stat_xact_user_tables.seq_tup_read`` (this transaction's own counters).

The session gets the project's ``lock_timeout`` so the trace never queues
behind a long transaction (it reports that instead), and everything is rolled back.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.expand.lock_timeout import is_lock_timeout, set_session_lock_timeout
from migrations_policy.core.project import _one_line
from migrations_policy.trace.capture import run_revision
from migrations_policy.trace.report import StatementTrace

_USER_RELATIONS = sa.text(
    "SELECT c.oid, c.relname, c.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'i', 'p', 'm', 't') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg_toast%'")
_OWN_LOCKS = sa.text(
    "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema')")
_SCANS = sa.text("SELECT relname, seq_tup_read FROM pg_stat_xact_user_tables")


def _relations(conn: Connection) -> dict[int, tuple[str, int]]:
    return {oid: (name, node) for oid, name, node in conn.execute(_USER_RELATIONS)}


def _locks(conn: Connection) -> set[tuple[str, str]]:
    return {(name, mode) for name, mode in conn.execute(_OWN_LOCKS)}


def _scans(conn: Connection) -> dict[str, int]:
    return {name: int(rows or 0) for name, rows in conn.execute(_SCANS)}


class _Observer:
    def __init__(self, conn: Connection, revision: str, found: list[StatementTrace]):
        self.conn, self.revision, self.found = conn, revision, found

    def __call__(self, sql: str, execute: Any, autocommit: bool) -> Any:
        trace = StatementTrace(self.revision, sql)
        self.found.append(trace)
        if autocommit:
            trace.not_run = "in an autocommit block (CONCURRENTLY): cannot run inside the trace's transaction"
            return None
        before = (_locks(self.conn), _relations(self.conn), _scans(self.conn))
        savepoint = self.conn.begin_nested()
        try:
            result = execute()
        except sa.exc.DBAPIError as exc:
            savepoint.rollback()
            trace.error = ("gave up waiting for a lock (lock_timeout): " if is_lock_timeout(exc) else "") \
                + _one_line(exc)
            return None
        savepoint.commit()
        locks, relations, scans = _locks(self.conn), _relations(self.conn), _scans(self.conn)
        trace.locks = sorted(locks - before[0])
        trace.rewritten = sorted(name for oid, (name, node) in relations.items()
                                 if oid in before[1] and before[1][oid][1] != node)
        trace.created = sorted(name for oid, (name, _) in relations.items() if oid not in before[1])
        trace.scanned = {name: rows - before[2].get(name, 0) for name, rows in scans.items()
                         if rows > before[2].get(name, 0)}
        return result


def trace_revisions(conn: Connection, revisions: list, lock_timeout: float) -> list[StatementTrace]:
    """Trace *revisions* (alembic Scripts, oldest first) in one transaction, then roll it back."""
    set_session_lock_timeout(conn, lock_timeout)
    found: list[StatementTrace] = []
    transaction = conn.begin()
    try:
        for revision in revisions:
            try:
                run_revision(conn, revision, _Observer(conn, revision.revision, found))
            except Exception as exc:  # the revision's own Python failed (after a refused statement, say)
                found.append(StatementTrace(revision.revision, "(upgrade() raised)", error=_one_line(exc)))
                break
    finally:
        transaction.rollback()
    return found
