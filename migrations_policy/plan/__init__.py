"""``dbsync plan``: before expand, what each pending statement will do to this database.

For each revision ``dbsync upgrade`` would apply (``statements``) and each statement in
it: the table it touches and that table's live size (``sizes``), the lock it takes and
whether it rewrites or scans the table (the policy knowledge base, ``migrations_policy.policy``,
the linter's), and for a blocking statement that scans or rewrites, how long it would hold
its lock, estimated from a read rate measured on this server (``rate``).  Nothing is run
and nothing is locked: the scripts are read offline, the sizes come from statistics
(SQLite: a count), the measurement is a bounded read.

With ``max_lock_seconds``, the exit code says whether any statement would hold a blocking
lock longer than that, or for a time the plan cannot estimate (the statement's table is
unknown, or a revision cannot be read offline): fail closed.
"""

from __future__ import annotations

import sqlalchemy as sa

from migrations_policy import policy
from migrations_policy.core.errors import PolicyError
from migrations_policy.expand.lock_timeout import is_lock_timeout, set_session_lock_timeout
from migrations_policy.policy import model as m
from migrations_policy.core.project import Project, _one_line
from migrations_policy.core.revisions import CONTRACT, branch_statuses, current_heads
from migrations_policy.plan import rate as rates
from migrations_policy.plan.report import EXIT_OK, EXIT_TOO_LONG, PlannedRevision, PlannedStatement, PlanResult
from migrations_policy.plan.sizes import TableSize, table_size
from migrations_policy.plan.statements import pending_revisions
from migrations_policy.plan.words import happens_on, statement_words

__all__ = ["plan", "PlanResult", "EXIT_OK", "EXIT_TOO_LONG"]

#: The size of a table created earlier in the plan: empty.
_NEW = TableSize(exists=True, rows=0, bytes=0)


def _policy_dialect(conn) -> str:
    return "mysql" if conn.dialect.name == "mariadb" else conn.dialect.name


def _context(conn) -> policy.Context:
    version = conn.dialect.server_version_info or (15,)
    if conn.dialect.name == "postgresql":
        return policy.Context(postgresql_version=int(version[0]))
    return policy.Context(mysql_flavor="mariadb" if getattr(conn.dialect, "is_mariadb", False) else "mysql")


def plan(project: Project, max_lock_seconds: float | None = None) -> PlanResult:
    """The plan of the pending revisions on *project*'s database (see the module docstring).

    Its reads wait for a table lock at most ``lock_timeout`` seconds (a table an ALTER holds
    right now): then, and on any other database error, one line (exit 2)."""
    try:
        return _plan(project, max_lock_seconds)
    except sa.exc.DBAPIError as exc:
        if is_lock_timeout(exc):
            raise PolicyError(f"plan: gave up after waiting {project.settings.lock_timeout:g} s (lock_timeout) for "
                              f"a lock another transaction holds: {_one_line(exc)}") from None
        raise PolicyError(f"plan: {project.masked_url}: {_one_line(exc)}") from None


def _plan(project: Project, max_lock_seconds: float | None) -> PlanResult:
    with project.connect() as conn:
        set_session_lock_timeout(conn, project.settings.lock_timeout)
        project.check_version_table(conn)
        dialect = _policy_dialect(conn)
        context = _context(conn)
        branches = branch_statuses(project.script, current_heads(conn))
        if conn.in_transaction():
            conn.rollback()
        result = PlanResult(database=project.masked_url, dialect=dialect, max_lock_seconds=max_lock_seconds,
                            method=rates.method(dialect))
        measured = rates.Rates(conn)
        sizes: dict[str, TableSize] = {}
        created: set[str] = set()
        for pending in pending_revisions(project.script, branches, dialect):
            revision = PlannedRevision(pending.revision, pending.phase, pending.path, unread=pending.unread)
            for operation, line in pending.operations:
                if not happens_on(operation, dialect):
                    continue
                statement = _plan_statement(conn, operation, line, dialect, context, sizes, created, measured)
                statement.exceeds = max_lock_seconds is not None and statement.blocking and (
                    statement.seconds is None or statement.seconds > max_lock_seconds)
                revision.statements.append(statement)
            result.revisions.append(revision)
        if conn.in_transaction():
            conn.rollback()
    result.rates = measured.measured()
    if branches[CONTRACT].pending:
        result.contract_note = ("contract revisions run only when the contract gate allows them (dbsync check); "
                                "their sizes are today's")
    result.exit_code = EXIT_TOO_LONG if result.exceeding else EXIT_OK
    return result


def _size(conn, table: str, sizes: dict[str, TableSize], created: set[str]) -> TableSize:
    key = table.lower()
    if key in created:
        return _NEW
    if key not in sizes:
        sizes[key] = table_size(conn, table)
        if conn.in_transaction():
            conn.rollback()
    return sizes[key]


def _plan_statement(conn, operation: m.Operation, line: int, dialect: str, context: policy.Context,
                    sizes: dict[str, TableSize], created: set[str], measured: rates.Rates) -> PlannedStatement:
    effect = policy.classify(operation, dialect, context).effect
    table = operation.table
    size = None
    if table:
        size = _NEW if operation.new_table or operation.kind == m.CREATE_TABLE else _size(conn, table, sizes, created)
        if operation.kind == m.CREATE_TABLE:
            created.add(table.lower())
        elif operation.kind == m.DROP_TABLE:
            created.discard(table.lower())
    statement = PlannedStatement(
        line=line, operation=statement_words(operation), kind=operation.kind, table=table, size=size,
        lock=effect.lock or "brief", blocks_reads=effect.blocks_reads, blocks_writes=effect.blocks_writes,
        rewrite=effect.rewrite, scan=effect.scan, note=effect.note, fails=effect.fails,
        sql=operation.text if operation.source == "sql" else "")
    if not statement.blocking:
        return statement
    statement.work = rates.work_of(operation.kind, effect, dialect)
    if statement.work is None:  # blocking, but for a catalog change only (TRUNCATE, inline UNIQUE ...)
        return statement
    _estimate(conn, statement, dialect, measured)
    return statement


def _estimate(conn, statement: PlannedStatement, dialect: str, measured: rates.Rates) -> None:
    size = statement.size
    if size is None or not size.exists:
        statement.seconds = None
        statement.unknown = "no table named" if size is None else f"table {statement.table} does not exist"
        return
    if size.rows == 0 and size is _NEW:
        statement.seconds = 0.0
        return
    rate = measured.of(statement.table)
    rows = rate.rows if rate.whole else size.rows
    if rows is None:
        statement.seconds, statement.unknown = None, "the database gives no row count"
        return
    statement.seconds = rates.seconds_for(rows, rate, statement.work, dialect)
    if statement.seconds is None:
        statement.unknown = "no read rate could be measured"
