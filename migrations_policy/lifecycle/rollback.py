"""``dbsync rollback``: back to the last completed release, before its contract has run.

Until the contract runs, release N's schema is still whole: the expand revisions
applied since the last contract only added to it.  A rollback reverts exactly those
(newest first, through alembic's ``downgrade`` and the project's env.py, so under the
same lock timeouts and retries as an upgrade), then forgets the ledger entries of the
data migrations whose table or columns went with them.

Which revisions: ``migrations_policy_revision_history`` (written by the env.py hook
for every revision applied, reverted or stamped, with the run it was part of) gives
the order.  A release is complete at the end of a run that applied a contract
revision or that started on an empty version table (an install).  The candidates are
the expand revisions still applied whose last entry comes after the last such run.
None left: the release's contract has run, and the rollback is refused.  No history at
all: refused too (it cannot tell).

What would be lost: each candidate's ``downgrade()`` is run offline to see the tables
and columns it drops (``offline_run.py``).  A dropped column's row is *at risk* when it
holds a value that cannot be derived again from what stays: NOT NULL and different
(NULL-safe) from the value a set-based data migration of the project computes for that
column (e.g. ``display_name`` written by release N+1 beyond what ``name`` can hold);
for a column no data migration fills, every NOT NULL value; for a dropped table,
every row.  Any row at risk refuses the rollback unless ``--force``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from migrations_policy.core.errors import PolicyError
from migrations_policy.core.framework_tables import revision_history_table
from migrations_policy.expand.journal import PartlyAppliedRefusal, refuse_while_partly_applied
from migrations_policy.core.offline_run import dropping_operations
from migrations_policy.core.revisions import CONTRACT, EXPAND, applied_revisions, phase_of

#: Exit code when the rollback is refused (a contract ran, or rows would be lost without --force).
EXIT_REFUSED = 4


@dataclass
class AtRisk:
    table: str
    column: str | None  # None: the whole table is dropped
    rows: int
    why: str

    def describe(self) -> str:
        where = f"{self.table}.{self.column}" if self.column else f"table {self.table}"
        return f"{where}: {self.rows:,} row(s) ({self.why})"


@dataclass
class RollbackPlan:
    revisions: list[str] = field(default_factory=list)  # newest first
    target: str | None = None  # alembic's downgrade target
    dropped_tables: list[str] = field(default_factory=list)
    dropped_columns: list[tuple[str, str]] = field(default_factory=list)
    at_risk: list[AtRisk] = field(default_factory=list)
    #: Revisions whose downgrade() could not be run offline to see what it drops: why.
    unknown: list[str] = field(default_factory=list)

    @property
    def rows_at_risk(self) -> int:
        return sum(r.rows for r in self.at_risk)

    def to_dict(self) -> dict[str, Any]:
        return {"revisions": self.revisions, "target": self.target, "dropped_tables": self.dropped_tables,
                "dropped_columns": [f"{t}.{c}" for t, c in self.dropped_columns],
                "at_risk": [{"table": r.table, "column": r.column, "rows": r.rows, "why": r.why}
                            for r in self.at_risk],
                "rows_at_risk": self.rows_at_risk, "unknown": self.unknown}

    def lines(self) -> list[str]:
        lines = [f"revert {', '.join(self.revisions)} (newest first), down to {self.target}"]
        if self.dropped_tables:
            lines.append(f"  drops tables: {', '.join(self.dropped_tables)}")
        if self.dropped_columns:
            lines.append(f"  drops columns: {', '.join(f'{t}.{c}' for t, c in self.dropped_columns)}")
        lines += [f"  at risk: {r.describe()}" for r in self.at_risk]
        lines += [f"  cannot see what it drops: {u}" for u in self.unknown]
        return lines


# -- which revisions ------------------------------------------------------------------
def _history(connection: Connection) -> list[Any]:
    if not sa.inspect(connection).has_table(revision_history_table.name):
        return []
    return list(connection.execute(sa.select(revision_history_table).order_by(revision_history_table.c.id)))


def revisions_to_revert(connection: Connection, script: ScriptDirectory, heads: Any) -> list[str]:
    """The expand revisions applied since the last contract, newest first (refusals as PolicyError)."""
    try:  # the same refusal as the env.py hook's for any downgrade (journal.py decides)
        refuse_while_partly_applied(connection, "dbsync upgrade --expand")
    except PartlyAppliedRefusal as exc:
        raise PolicyError(str(exc), exit_code=EXIT_REFUSED) from None
    history = _history(connection)
    if not history:
        raise PolicyError("cannot roll back: no revision history is recorded (migrations_policy_revision_history "
                          "is written by the env.py hook from the first upgrade on)")
    applied = applied_revisions(script, heads)
    last_event = {row.revision: row for row in history}
    # A release is complete once its contract ran, or when it was installed on an empty database:
    # the rollback stops at the end of the last run that did either.
    completing_runs = {row.run for row in history
                       if row.from_base or (row.action in ("upgrade", "stamp") and row.phase == CONTRACT)}
    last_contract = max((row.id for row in history if row.run in completing_runs), default=0)
    candidates = [rev for rev, row in last_event.items()
                  if rev in applied and row.action in ("upgrade", "stamp") and row.phase == EXPAND
                  and row.id > last_contract]
    if not candidates:
        ran = next((row for row in reversed(history) if row.id == last_contract), None)
        since = f" (revision {ran.revision} {'installed' if ran.from_base else 'applied'} at " \
                f"{ran.at:%Y-%m-%d %H:%M:%S} UTC)" if ran else ""
        raise PolicyError(f"nothing to roll back: no expand revision was applied since the last completed "
                          f"release{since}; a rollback is possible only before the release's contract runs",
                          exit_code=EXIT_REFUSED)
    for rev in applied:
        script_rev = script.get_revision(rev)
        if phase_of(script_rev) == CONTRACT and applied_revisions(script, [rev]) & set(candidates):
            raise PolicyError(f"cannot roll back: contract revision {rev} depends on "
                              f"{', '.join(sorted(applied_revisions(script, [rev]) & set(candidates)))}, "
                              "which would be reverted", exit_code=EXIT_REFUSED)
    return sorted(candidates, key=lambda rev: last_event[rev].id, reverse=True)


def _downgrade_target(script: ScriptDirectory, revisions: list[str]) -> str:
    oldest = script.get_revision(revisions[-1])
    down = oldest.down_revision
    if isinstance(down, str) or down is None:
        return down or "base"
    return f"{EXPAND}@-{len(revisions)}"


# -- what would be lost -----------------------------------------------------------------
def _derivable_value(registry: Any, table: str, column: str) -> tuple[Any, ColumnElement] | None:
    """(the migration's table, the value) of a set-based data migration that computes *table.column*."""
    for migration in registry:
        values = migration.values or {}
        if migration.table.name == table and column in values and column in migration.table.c:
            value = values[column]
            return migration.table, value if isinstance(value, ColumnElement) else sa.literal(value)
    return None


def _count(connection: Connection, table: sa.TableClause, where: ColumnElement | None) -> int:
    query = sa.select(sa.func.count()).select_from(table)
    return int(connection.execute(query if where is None else query.where(where)).scalar_one())


def plan(connection: Connection, script: ScriptDirectory, heads: Any, registry: Any) -> RollbackPlan:
    """What a rollback would revert, drop and lose (reads only)."""
    from alembic.operations import ops

    result = RollbackPlan(revisions=revisions_to_revert(connection, script, heads))
    result.target = _downgrade_target(script, result.revisions)
    dialect = connection.dialect.name
    for ident in result.revisions:
        downgrade = script.get_revision(ident).module.downgrade
        recorded, problem = dropping_operations(downgrade, dialect)
        if problem:
            result.unknown.append(f"{ident}: {problem}")
        for op in recorded:
            if isinstance(op, ops.DropTableOp) and op.table_name not in result.dropped_tables:
                result.dropped_tables.append(op.table_name)
            elif isinstance(op, ops.DropColumnOp) and (op.table_name, op.column_name) not in result.dropped_columns:
                result.dropped_columns.append((op.table_name, op.column_name))
    inspector = sa.inspect(connection)
    existing = set(inspector.get_table_names())
    for name in result.dropped_tables:
        if name in existing:
            rows = _count(connection, sa.table(name), None)
            if rows:
                result.at_risk.append(AtRisk(name, None, rows, "the table is dropped"))
    for table_name, column_name in result.dropped_columns:
        if table_name in result.dropped_tables or table_name not in existing or column_name not in {
                c["name"] for c in inspector.get_columns(table_name)}:
            continue
        derivable = _derivable_value(registry, table_name, column_name)
        if derivable is None:
            table = sa.table(table_name, sa.column(column_name))
            column = table.c[column_name]
            where, why = column.is_not(None), "values no data migration derives from what stays"
        else:
            table, value = derivable
            column = table.c[column_name]
            where, why = sa.and_(column.is_not(None), column.is_distinct_from(value)), \
                "values that differ from what the data migration derives from what stays"
        rows = _count(connection, table, where)
        if rows:
            result.at_risk.append(AtRisk(table_name, column_name, rows, why))
    if connection.in_transaction():
        connection.rollback()
    return result


def forget_ledger_entries(connection: Connection, registry: Any) -> list[str]:
    """Delete the ledger rows of data migrations whose table or columns no longer exist."""
    from migrations_policy.data import ledger
    from migrations_policy.data.runner import missing_columns

    if not ledger.exists(connection):
        return []
    known = ledger.read(connection)
    gone = [m.name for m in registry if m.name in known and missing_columns(connection, m)]
    if gone:
        with connection.begin_nested() if connection.in_transaction() else connection.begin():
            connection.execute(sa.delete(ledger.ledger).where(ledger.ledger.c.name.in_(gone)))
    if connection.in_transaction():
        connection.commit()
    return gone
