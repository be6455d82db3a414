"""A revision never drops data that nothing moved and nobody let go (issue 23).

Autogenerate writes a drop and an add for a table rename, a column moved to another
table, split, merged or changed in kind; a hand-written contract may drop anything.  The
drop guard (``drop_guard``) protects what an *unfinished* data migration reads; this
module closes the rest of the class: for every table or column a revision's ``upgrade()``
(run offline) drops (or a table it truncates), the gate refuses the revision while that table has a
row, or that column a non-NULL value, unless

* a declared data migration reads it (it moved the data: the gate already waits for it to
  complete, ``verdict.unfinished`` / ``drop_guard.unfinished_readers``), or
* the revision records the author's decision to let it go, a module-level mapping::

      drops_data = {"nodes.legacy": "superseded by nodes.meta, nobody reads it",
                    "scratch": "a cache"}

  (a table name covers its columns).  ``decisions`` lists them for ``dbsync status`` and the
  release notes.

A refusal is a defect of the script (``--force`` does not override it): the fix is an edit
of the script, the move or the recorded decision.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.gate.drops.drop_guard import Destroyed, describe, destroyed, readers
from migrations_policy.policy import model as m

ATTRIBUTE = "drops_data"
_DROPS = (m.DROP_TABLE, m.DROP_COLUMN, m.TRUNCATE)


def decisions(rev: Any) -> tuple[dict[str, str], str | None]:
    """*rev*'s ``drops_data`` ({"table" or "table.column": reason}) and a defect line when it is
    not such a mapping of names to non-empty reasons."""
    module = getattr(rev, "module", None)
    value = getattr(module, ATTRIBUTE, None) if module is not None else None
    if value is None:
        return {}, None
    where = f"{rev.path}: {ATTRIBUTE}"
    if not isinstance(value, dict) or not all(isinstance(k, str) and k and isinstance(v, str) and v.strip()
                                              for k, v in value.items()):
        return {}, (f"{where} must be a dict of 'table' or 'table.column' to the reason the data may go "
                    f"(a non-empty string each), not {value!r:.80}")
    return dict(value), None


def _let_go(item: Destroyed, decided: dict[str, str]) -> bool:
    table, column = item
    lowered = {k.lower() for k in decided}
    return table.lower() in lowered or (column is not None and f"{table}.{column}".lower() in lowered)


def _holds_data(connection: Connection, item: Destroyed) -> bool:
    """The table has a row (column None) or the column a non-NULL value; False when either is
    not there (nothing to lose yet)."""
    from migrations_policy.core.reflect import column_names

    table, column = item
    names = column_names(sa.inspect(connection), table)
    if not names or (column is not None and column.lower() not in names):
        return False
    column = names[column.lower()] if column is not None else None
    clause = sa.table(table, *([sa.column(column)] if column else []))
    query = sa.select(sa.literal(1)).select_from(clause)
    if column is not None:
        query = query.where(clause.c[column].is_not(None))
    return connection.execute(query.limit(1)).first() is not None


def dropped_by(rev: Any, dialect_name: str) -> list[Destroyed]:
    """The tables and columns *rev*'s ``upgrade()``, run offline, drops or truncates (nothing when
    it cannot run offline: the drop guard's watch judges those statements as they run)."""
    from migrations_policy.core.offline_run import dropping_operations
    from migrations_policy.policy.alembic_ops import from_alembic

    recorded, _ = dropping_operations(rev.module.upgrade, dialect_name)
    # drops only: a rename or a type change in place keeps the data (the drop guard and the
    # linter judge those), and a table's rows are lost to DROP TABLE and TRUNCATE alike
    return destroyed(o for op in recorded for o in from_alembic(op) if o.kind in _DROPS)


def refusals(connection: Connection, rev: Any, registry: Any) -> list[str]:
    """One line per table or column *rev* would drop with data nothing moves (see the module)."""
    decided, defect = decisions(rev)
    if defect:
        return [defect]
    out = []
    for item in dropped_by(rev, connection.dialect.name):
        if _let_go(item, decided) or readers(registry, [item]) or not _holds_data(connection, item):
            continue
        what = describe(item)
        out.append(f"{rev.path}: revision {rev.revision} drops {what}, which holds data that no data migration "
                   f"moves: write the move (the '{what}' move stub `dbsync revision` wrote), or record why it may "
                   f"go in the script: {ATTRIBUTE} = {{{what!r}: 'why'}}")
    return out


def decided_lines(revisions: list[Any]) -> list[str]:
    """One line per recorded decision of the pending *revisions* (``dbsync status``)."""
    out = []
    for rev in revisions:
        decided, _ = decisions(rev)
        out.extend(f"revision {rev.revision} drops {what} with its data, by decision: {reason}"
                   for what, reason in decided.items())
    return out
