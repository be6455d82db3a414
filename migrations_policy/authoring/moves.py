"""Drops whose data nothing moves: the split never writes one silently (issue 23).

Autogenerate sees a table rename, a column moved to another table, a column split in two,
two merged into one, or a change of kind (``active`` Boolean -> ``status`` String) as a drop
and an add.  For every table or column the contract drops, the split either pairs it with
the data's new home (a type change or rename it sees as one: the copy and sync triggers;
an unambiguous drop + add of the same kind of type: a GUESSED rename, ``guessed_renames``)
or writes a ``move`` stub (``stubs.MOVE``) naming the data at stake, which fails closed
(loading the module raises) until the developer writes the move or deletes it.  The stub is
not listed in ``requires_data_migrations``: the gate (``gate.data_drops``) judges the data
itself when the contract runs, so a table or column that holds nothing goes, one that holds
data waits until a declared migration that reads it completes or ``drops_data`` names it.
"""

from __future__ import annotations

from typing import Any, Iterable

import sqlalchemy as sa
from alembic.operations import ops

from migrations_policy.authoring import stubs

#: Contract-script text when a move stub is written: where the author records a decision.
DROPS_DATA_HINT = (
    "# Data this contract may drop although no migration moved it: {'table.column' or 'table': 'why'}.\n"
    "# The gate refuses a contract that drops data (a row, a non-NULL value) that no declared data\n"
    "# migration reads and this does not name.\n"
    "# drops_data = {}")


def _affinity(column: sa.Column) -> Any:
    return column.type._type_affinity


def guessed_renames(added: list[ops.AddColumnOp], dropped: list[ops.DropColumnOp]) -> list[tuple[Any, Any]]:
    """(drop op, add op) pairs that look like a rename: the only dropped and the only added
    column (without a server default) of one kind of type on the table.  A split (one dropped,
    two added) or a merge (two dropped, one added) is not guessed: which goes where is the
    developer's to say (a move stub)."""
    pairs = []
    for drop in dropped:
        kind = _affinity(drop.to_column())
        drops = [d for d in dropped if _affinity(d.to_column()) is kind]
        adds = [a for a in added if _affinity(a.column) is kind and a.column.server_default is None]
        if len(drops) == 1 and len(adds) == 1:
            pairs.append((drop, adds[0]))
    return pairs


def column_stub(table: str, key: str, column: sa.Column, added: Iterable[ops.AddColumnOp],
                new_tables: Iterable[str]) -> stubs.Stub:
    """The fail-closed move stub for *table*.*column*, naming what this revision adds."""
    candidates = [f"{table}.{a.column.name}" for a in added] + sorted(new_tables)
    return stubs.Stub(stubs.MOVE, stubs.migration_name(table, column.name, "moved"), table, key, column.name,
                      types={column.name: column.type}, candidates=candidates)


def table_stub(drop: ops.DropTableOp, new_tables: dict[str, sa.Table | None]) -> stubs.Stub:
    """The fail-closed move stub for a dropped table; a new table with the same columns comes
    first among the candidates (a rename)."""
    table = drop.to_table()
    keys = list(table.primary_key.columns)
    key = keys[0].name if len(keys) == 1 else next(iter(table.columns)).name
    names = {c.name for c in table.columns}
    same = [n for n, t in new_tables.items() if t is not None and {c.name for c in t.columns} == names]
    candidates = [f"{n} (same columns: a rename?)" for n in same] + sorted(n for n in new_tables if n not in same)
    return stubs.Stub(stubs.MOVE, stubs.migration_name(drop.table_name, "moved"), drop.table_name, key, "",
                      child_columns=[c.name for c in table.columns],
                      types={c.name: c.type for c in table.columns}, candidates=candidates)
