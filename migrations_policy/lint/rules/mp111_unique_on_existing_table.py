"""Adding a unique constraint (or UNIQUE / PRIMARY KEY column) to an existing table.

## What it does
Flags ``create_unique_constraint``, ``ADD UNIQUE`` / ``ADD CONSTRAINT ... UNIQUE`` and
``add_column`` of a ``unique=True`` column on a table that already exists, unless the
constraint is attached to an index built beforehand (``ADD CONSTRAINT ... UNIQUE USING INDEX``).

## Why is this bad
The old code does not know about the constraint and may write duplicates, which now
fail.  And:

- **PostgreSQL**: the unique index is built under ``ACCESS EXCLUSIVE``: reads and writes
  wait for the whole build.
- **MySQL/MariaDB**: the index is built online (INPLACE), but the first duplicate written
  by old code aborts the ALTER or the old code's transaction.
- **SQLite**: ``ALTER TABLE`` cannot add constraints (see ``MP150`` / ``MP151``).

## Example
```python
def upgrade():
    op.create_unique_constraint("uq_users_email", "users", ["email"])
```

## Use instead
PostgreSQL: ``CREATE UNIQUE INDEX CONCURRENTLY`` in an autocommit block, then
``ALTER TABLE ... ADD CONSTRAINT ... UNIQUE USING INDEX`` -- once the code that writes
the column guarantees uniqueness (usually contract).
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class UniqueOnExistingTable(Rule):
    __doc__ = __doc__
    code, name = "MP111", "unique-on-existing-table"

    def check(self, verdict):
        op = verdict.operation
        unique = op.kind == m.ADD_UNIQUE or (op.kind == m.ADD_COLUMN and op.unique)
        if unique and not op.new_table and not op.using_index and not verdict.effect.fails:
            return f"{op.describe()}: unique constraint added to an existing table"
        return None


RULE = UniqueOnExistingTable()
