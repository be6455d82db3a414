"""The indexes and unique constraints of a column the split replaces by a copy.

A type change (or a widening that some configured dialect copies the table for) becomes a new
column ``<name>_new``, sync triggers and a copy, and contract drops the old column.  The models
keep their indexes and unique constraints on the column, so autogenerate reports none of them,
yet in the database they live on the old column: PostgreSQL drops them with it, MariaDB shrinks
a composite one to its other columns (a composite UNIQUE then guarantees something else), and
SQLite's batch rebuild re-creates them on a column that no longer exists ("no such column").
So each one moves to the new column (``moves``):

* an index: expand builds it on the new column (``CONCURRENTLY`` on PostgreSQL), under the name
  the models give it once the new column is mapped under the old key (the documented edit,
  ``sa.Column("x_new", ..., key="x")``: a naming convention's name follows the column); contract
  drops the old one before the column.  A name that does not follow the column (given
  explicitly) cannot exist twice: contract drops the old index, then builds the new one;
* a unique index or constraint: in contract, like any unique constraint added to an existing
  table: a ``duplicates`` data migration finds rows whose new values a row with a smaller key
  also has (a conversion can make two distinct old values equal), the gate waits until there is
  none, and contract builds it (PostgreSQL: ``CONCURRENTLY``, then ``USING INDEX``) *before* it
  drops the old one, so that no moment of contract runs without the guarantee (a name that does
  not follow the column: the old one first).  Not in expand: release N's writes reach the new
  column through the sync trigger, and a unique index there would fail release N's write where a
  conversion makes two of its values equal.  During the window the old column's constraint holds
  for both releases' writes (the triggers keep the pair equal);
* a unique constraint or index without a name (no naming convention): refused, as any new
  constraint on an existing table is: contract could name neither the old one nor the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import conv

INDEX, UNIQUE_INDEX, UNIQUE = "index", "unique_index", "unique"


@dataclass
class Moved:
    """One index or unique constraint of the replaced column, before and after."""

    kind: str  # INDEX | UNIQUE_INDEX | UNIQUE (a constraint)
    old_name: Any  # its name in the database; None: this revision adds it (not there yet)
    new_name: Any  # ``conv`` when a naming convention made it (rendered in ``op.f()``)
    old_columns: list[str]
    new_columns: list[str]

    @property
    def collides(self) -> bool:
        """Both names are one: the old must go before the new can be built."""
        return self.old_name is not None and str(self.old_name) == str(self.new_name)


def _kind(item: Any) -> str:
    if isinstance(item, sa.Index):
        return UNIQUE_INDEX if item.unique else INDEX
    return UNIQUE


def _new_name(model: sa.Table, item: Any, column: str, new_column: str) -> Any:
    """The name the models give *item* once *column* is mapped as *new_column* under its key."""
    name = item.name
    convention = model.metadata.naming_convention
    token = "ix" if isinstance(item, sa.Index) else "uq"
    if not isinstance(name, conv) or "constraint_name" in str(convention.get(token, "")):
        return name  # given explicitly (or from the name given): the models keep it
    copy = sa.Table(model.name, sa.MetaData(naming_convention=convention),
                    *[sa.Column(new_column if c.name == column else c.name, c.type, key=c.key)
                      for c in model.columns], schema=model.schema)
    members = [copy.c[c.key] for c in item.columns]
    if isinstance(item, sa.Index):
        made = sa.Index(None, *members, unique=item.unique)
    else:
        made = sa.UniqueConstraint(*members)
        copy.append_constraint(made)
    return made.name if made.name is not None else name


def moves(model: sa.Table | None, column: str, new_column: str, added: set[str]) -> tuple[list[Moved], list[str]]:
    """The indexes and unique constraints of *model* (the models' table) on *column*, moved to
    *new_column*; *added*: the names autogenerate reports as added by this revision (not in the
    database yet).  Returns the moves and the refusals (one line each)."""
    if model is None:
        return [], []
    out, refusals = [], []
    items = list(model.indexes) + [c for c in model.constraints if isinstance(c, sa.UniqueConstraint)]
    for item in sorted(items, key=lambda i: str(i.name)):
        names = [c.name for c in item.columns]
        if column not in names:
            continue
        if item.name is None:
            refusals.append(
                f"{model.name}.{column} changes type and is in an index or unique constraint without a name (the "
                "metadata has no naming_convention): name it, or set MetaData(naming_convention=...), so that "
                "contract can drop it on the old column and build it on the new one")
            continue
        new_columns = [new_column if n == column else n for n in names]
        old_name = None if str(item.name) in added else item.name
        out.append(Moved(_kind(item), old_name, _new_name(model, item, column, new_column), names, new_columns))
    return out, refusals
