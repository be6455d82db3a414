"""PostgreSQL native ENUM values: compared (alembic's comparator does not) and placed safely.

A value added to an ``sa.Enum(..., name=...)`` is a change of the type, not of a column, and
autogenerate says nothing about it: release N+1's writes of the new value would fail after
expand.  ``compare_enums`` (a ``schema`` comparator of the plugin, PostgreSQL only) compares
each native enum type of the models with the database's and emits one ``EnumValuesOp``:

* values added: expand, ``ALTER TYPE ... ADD VALUE IF NOT EXISTS ... AFTER/BEFORE ...`` (the
  models' order) in an autocommit block (a value added in a transaction cannot be used in it,
  and the statement is its own short lock);
* values removed: PostgreSQL cannot drop a value; the split refuses, saying how (a new type
  and an expand/contract cycle for the column), as it does for a key column's type.
"""

from __future__ import annotations

from typing import Any, Iterable

import sqlalchemy as sa
from alembic.operations import ops
from alembic.util import PriorityDispatchResult
from sqlalchemy.dialects import postgresql


class EnumValuesOp(ops.MigrateOperation):
    def __init__(self, name: str, database: list[str], model: list[str]):
        self.name, self.database, self.model = name, list(database), list(model)

    @property
    def added(self) -> list[str]:
        return [v for v in self.model if v not in self.database]

    @property
    def removed(self) -> list[str]:
        return [v for v in self.database if v not in self.model]

    def reverse(self) -> None:  # PostgreSQL drops no enum value
        return None

    def to_diff_tuple(self) -> tuple:
        return ("enum_values", self.name, tuple(self.database), tuple(self.model))


def _model_enums(metadata: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for md in metadata if isinstance(metadata, (list, tuple)) else [metadata]:
        for table in getattr(md, "tables", {}).values():
            for column in table.columns:
                type_ = column.type
                if isinstance(type_, sa.Enum) and type_.native_enum and type_.name and type_.schema is None:
                    found.setdefault(type_.name, list(type_.enums))
    return found


def compare_enums(autogen_context: Any, upgrade_ops: ops.UpgradeOps, schemas: Iterable[Any]) -> Any:
    connection = autogen_context.connection
    if connection is None or connection.dialect.name != "postgresql" or autogen_context.metadata is None:
        return PriorityDispatchResult.CONTINUE
    database = {e["name"]: list(e["labels"]) for e in sa.inspect(connection).get_enums() if e.get("visible", True)}
    for name, values in sorted(_model_enums(autogen_context.metadata).items()):
        if name in database and database[name] != values and set(database[name]) != set(values):
            upgrade_ops.ops.append(EnumValuesOp(name, database[name], values))
    return PriorityDispatchResult.CONTINUE


def add_value_statements(op: EnumValuesOp) -> list[str]:
    """``ALTER TYPE "name" ADD VALUE IF NOT EXISTS 'v' AFTER 'prev'`` per added value (names
    quoted and values rendered as literals by PostgreSQL's dialect)."""
    dialect = postgresql.dialect()
    quote = dialect.identifier_preparer.quote

    def literal(value: str) -> str:
        return str(sa.literal(value, sa.String()).compile(dialect=dialect, compile_kwargs={"literal_binds": True}))

    out = []
    for value in op.added:
        index = op.model.index(value)
        where = (f"AFTER {literal(op.model[index - 1])}" if index > 0
                 else f"BEFORE {literal(op.database[0])}" if op.database else "")
        out.append(f"ALTER TYPE {quote(op.name)} ADD VALUE IF NOT EXISTS {literal(value)} {where}".rstrip())
    return out


def refusal(op: EnumValuesOp) -> str:
    return (f"enum type {op.name}: value(s) {', '.join(map(repr, op.removed))} removed: PostgreSQL cannot drop a "
            "value from an enum type, so the split does not write it; do it by hand: a new type with the values "
            "kept, a new column of that type filled by sync triggers (an expand/contract cycle), the old type "
            "dropped in contract (docs/authoring.rst, 'PostgreSQL ENUM')")
