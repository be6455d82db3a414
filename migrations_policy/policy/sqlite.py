"""SQLite: what ALTER TABLE accepts, and the cost of batch "move and copy".

SQLite locks the whole database for writing during any schema change; the
ALTERs it supports natively are instant.  Everything else needs
``batch_alter_table``, which recreates the table (copies every row) while
holding the database-wide write lock.  ``effect(op, ctx) -> (Effect, alternative)``.
"""

from __future__ import annotations

from migrations_policy.policy import model as m
from migrations_policy.policy.model import Effect

DIALECT = "sqlite"

_BATCH = "use op.batch_alter_table(...) (it recreates the table: do it in a maintenance window)"
#: Operations SQLite's ALTER TABLE cannot do: they need batch mode.
NEEDS_BATCH = frozenset({m.ALTER_TYPE, m.WIDEN_VARCHAR, m.SET_NOT_NULL, m.DROP_NOT_NULL, m.SET_DEFAULT, m.DROP_DEFAULT,
                         m.ADD_FK, m.ADD_UNIQUE, m.ADD_CHECK, m.ADD_PK, m.DROP_CONSTRAINT})


def add_column_rejected(op: m.Operation) -> str:
    """Why SQLite's ALTER TABLE ADD COLUMN rejects *op* ("" when it accepts it)."""
    if op.nullable is False and op.default_kind == m.DEFAULT_NONE and not op.primary_key:
        return "SQLite rejects ADD COLUMN ... NOT NULL without a default"
    if op.default_kind in (m.DEFAULT_STABLE, m.DEFAULT_VOLATILE, m.DEFAULT_EXPRESSION):
        return f"SQLite rejects ADD COLUMN with a non-constant default ({op.server_default})"
    if op.unique or op.primary_key:
        return "SQLite rejects ADD COLUMN ... UNIQUE / PRIMARY KEY"
    if op.generated == "stored":
        return "SQLite rejects ADD COLUMN ... GENERATED ALWAYS ... STORED"
    return ""


def batch_needs_recreate(ops: list[m.Operation]) -> bool:
    """Whether ``batch_alter_table(recreate="auto")`` with *ops* recreates the table on SQLite."""
    for op in ops:
        if op.kind == m.ADD_COLUMN:
            if op.default_kind in (m.DEFAULT_STABLE, m.DEFAULT_VOLATILE, m.DEFAULT_EXPRESSION) or op.generated == "stored":
                return True
        elif op.kind not in (m.CREATE_INDEX, m.DROP_INDEX):
            return True
    return False


def effect(op: m.Operation, ctx: m.Context) -> tuple[Effect, str]:
    kind = op.kind
    if kind == m.ADD_COLUMN and not op.in_batch:
        reason = add_column_rejected(op)
        if reason:
            return Effect(fails=reason, note=reason), "add it nullable or with a constant server_default; backfill online"
    if kind in NEEDS_BATCH and not op.in_batch and op.source != "sql":
        return Effect(fails="SQLite's ALTER TABLE cannot do this",
                      note=f"SQLite's ALTER TABLE cannot {kind.replace('_', ' ')} outside batch mode"), _BATCH
    if kind == m.BATCH_RECREATE and not op.new_table:
        return Effect(lock="database write lock", blocks_writes=True, rewrite=True,
                      note="batch mode recreates the table (move and copy) holding the database-wide write lock"), \
            "add columns with plain op.add_column (no table copy); leave other changes to contract / a maintenance window"
    if kind == m.DROP_COLUMN and not op.in_batch and not op.new_table:
        return Effect(lock="database write lock", rewrite=True,
                      note="DROP COLUMN rewrites the table (and fails on an indexed column)"), ""
    return m.QUIET, ""
