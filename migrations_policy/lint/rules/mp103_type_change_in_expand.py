"""Changing a column's type (or a table's character set) in an expand script.

## What it does
Flags ``alter_column(type_=...)``, ``ALTER COLUMN ... TYPE``, MySQL ``MODIFY`` / ``CHANGE``
and ``CONVERT TO CHARACTER SET``.  One exception: ``alter_column`` widening a ``VARCHAR``
(``existing_type=sa.String(n)``, ``type_=sa.String(m)``, ``m > n``, same collation) is
flagged only on a dialect where it copies the table.  Both releases' values fit the wider
column, and PostgreSQL widens in the catalog only (no rewrite, indexes kept); MariaDB/MySQL
do it INPLACE unless the column's values may be 128-255 bytes long and the new maximum
passes 255 bytes (the stored length then needs a second byte: ``ALGORITHM=COPY``; with
no character set named on the type, latin1, utf8mb3 and utf8mb4 must all stay inside).
``VARCHAR`` -> ``TEXT`` (``type_=sa.Text()``) likewise: binary-coercible on PostgreSQL
(catalog only), a copy on MariaDB/MySQL.  Raw SQL states no old length: always flagged.

## Why is this bad
- **PostgreSQL**: ``ACCESS EXCLUSIVE``; most changes (shrinking, ``int`` -> ``bigint``)
  rewrite the table and its indexes while reads and writes wait.
- **MySQL/MariaDB**: most changes (shrink, ``varchar`` -> ``text``, crossing 255 bytes,
  ``int`` -> ``bigint``, charset conversion) use ``ALGORITHM=COPY``: writes blocked for the
  whole copy.
- **SQLite**: not supported by ``ALTER TABLE``; batch mode recreates the table.

## Example
```python
def upgrade():
    op.alter_column("orders", "id", type_=sa.BigInteger())
```

## Use instead
Add a new column of the new type in expand, backfill it in an online data migration
(new code writes both), switch reads, drop the old column in contract.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class TypeChangeInExpand(Rule):
    __doc__ = __doc__
    code, name = "MP103", "type-change-in-expand"

    def check(self, verdict):
        op = verdict.operation
        if op.kind in m.TYPE_CHANGES and not op.new_table:
            return f"{op.describe()} in an expand script"
        if op.kind == m.WIDEN_VARCHAR and not op.new_table and verdict.effect.rewrite:
            return (f"{op.describe()} to {f'varchar({op.length_to})' if op.length_to else 'text'} in an expand script "
                    "copies the table on "
                    f"{verdict.dialect}")
        return None


RULE = TypeChangeInExpand()
