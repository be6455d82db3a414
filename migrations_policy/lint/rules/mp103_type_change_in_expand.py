"""Changing a column's type (or a table's character set) in an expand script.

## What it does
Flags ``alter_column(type_=...)``, ``ALTER COLUMN ... TYPE``, MySQL ``MODIFY`` / ``CHANGE``
and ``CONVERT TO CHARACTER SET``.  There is no "safe widening" exception: the old code
may validate the old length or type.

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

from ...policy import model as m
from .base import Rule


class TypeChangeInExpand(Rule):
    __doc__ = __doc__
    code, name = "MP103", "type-change-in-expand"

    def check(self, verdict):
        op = verdict.operation
        if op.kind in m.TYPE_CHANGES and not op.new_table:
            return f"{op.describe()} in an expand script"
        return None


RULE = TypeChangeInExpand()
