"""Dropping a table, column, index or constraint in an expand script.

## What it does
Flags ``drop_table``, ``drop_column``, ``drop_index``, ``drop_constraint`` and raw
``DROP ...`` / ``ALTER TABLE ... DROP ...`` statements in an expand script (objects
created earlier in the same script excepted).

## Why is this bad
Expand runs while the old release still serves traffic.  The old code still reads and
writes what is dropped: its queries fail at once, on every dialect.  Dropping also takes
an exclusive lock:

- **PostgreSQL**: ``ACCESS EXCLUSIVE`` on the table (and, for a table with FKs, on the
  parent too); brief, but it queues behind every open transaction.
- **MySQL/MariaDB**: ``DROP COLUMN`` is instant/in-place, but the old code breaks all the same.
- **SQLite**: ``DROP COLUMN`` rewrites the table under the database-wide write lock.

## Example
```python
def upgrade():
    op.drop_column("users", "fax_number")
```

## Use instead
Stop using the object in code, release that code, then drop it in a **contract** script.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class DropInExpand(Rule):
    __doc__ = __doc__
    code, name = "MP101", "drop-in-expand"

    def check(self, verdict):
        op = verdict.operation
        if op.kind in m.DROPS and not op.new_table:
            return f"{op.describe()} in an expand script: the old code still uses it"
        return None


RULE = DropInExpand()
