"""``migrations-policy trace``: what the pending expand revisions really do to a live database.

* PostgreSQL: every statement runs inside one transaction (under a SAVEPOINT
  each) that is rolled back at the end; per statement the relation locks it
  took (``pg_locks``), the relations it rewrote (``relfilenode``) and the rows
  it scanned (``pg_stat_xact_user_tables``).  Statements in an autocommit block
  (CONCURRENTLY) cannot run in a transaction and are reported as not run.
* MariaDB / MySQL: the revisions run on a structural copy of the database,
  each ALTER first with ALGORITHM=INSTANT, then INPLACE, LOCK=NONE: the report
  says which the server accepted.

Each statement is cross-checked with the policy knowledge base; a statement
that did more than the policy says is a finding (exit code 1).  This catches
what static analysis cannot.  It takes real locks on PostgreSQL (bounded by the
``lock_timeout`` setting): point it at a staging copy rather than production.
"""

from __future__ import annotations

from typing import Sequence

from migrations_policy.core.errors import UsageError
from migrations_policy.core.project import Project
from migrations_policy.core.revisions import CONTRACT, EXPAND, branch_statuses, current_heads
from migrations_policy.trace.crosscheck import cross_check, named_lock
from migrations_policy.trace.report import EXIT_CLEAN, EXIT_FINDINGS, StatementTrace, TraceResult

__all__ = ["trace", "TraceResult", "StatementTrace", "cross_check", "named_lock", "EXIT_CLEAN", "EXIT_FINDINGS"]


def _revisions(project: Project, conn, chosen: Sequence[str], contract: bool) -> list:
    script = project.script
    if chosen:
        found = []
        for ident in chosen:
            try:
                found.extend(r for r in script.get_revisions(ident) if r is not None)
            except Exception:
                raise UsageError(f"trace: unknown revision {ident!r}") from None
        return found
    statuses = branch_statuses(script, current_heads(conn))
    names = statuses[EXPAND].pending + (statuses[CONTRACT].pending if contract else [])
    return [script.get_revision(name) for name in names]


def trace(project: Project, revisions: Sequence[str] = (), contract: bool = False) -> TraceResult:
    """Trace the pending expand revisions (or *revisions*; with *contract*, pending contract ones after them)."""
    with project.connect() as conn:
        dialect = conn.dialect.name
        if dialect not in ("postgresql", "mysql"):
            raise UsageError(f"trace needs PostgreSQL or MariaDB/MySQL, not {dialect} "
                             "(SQLite has one writer and no lock modes to trace)")
        chosen = _revisions(project, conn, revisions, contract)
        if conn.in_transaction():
            conn.rollback()
        result = TraceResult(dialect=dialect, revisions=[r.revision for r in chosen])
        if not chosen:
            return result.finish()
        if dialect == "postgresql":
            from migrations_policy.trace.postgresql import trace_revisions
        else:
            from migrations_policy.trace.mysql import trace_revisions
            result.notes.append("MariaDB: traced on a structural copy (no rows), dropped afterwards")
        result.statements = trace_revisions(conn, chosen, project.settings.lock_timeout)
    for statement in result.statements:
        cross_check(statement, dialect)
    return result.finish()


def run(args) -> TraceResult:
    return trace(Project(args.config, url=args.url), revisions=args.revision, contract=args.contract)
