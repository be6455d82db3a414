"""Making an existing column NOT NULL in an expand script.

## What it does
Flags ``alter_column(nullable=False)`` and ``ALTER COLUMN ... SET NOT NULL`` on an existing table.

## Why is this bad
The old code may still insert rows without the column: those inserts fail.  And:

- **PostgreSQL**: a full table scan under ``ACCESS EXCLUSIVE`` (reads and writes wait),
  unless a validated ``CHECK (col IS NOT NULL)`` already exists.
- **MySQL/MariaDB**: an in-place table rebuild.
- **SQLite**: not supported by ``ALTER TABLE``; batch mode recreates the table.

## Example
```python
def upgrade():
    op.alter_column("users", "email", nullable=False, existing_type=sa.String(255))
```

## Use instead
Backfill in an online data migration, then set NOT NULL in **contract** (on PostgreSQL
after ``ADD CHECK (email IS NOT NULL) NOT VALID`` + ``VALIDATE CONSTRAINT``).
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class SetNotNullInExpand(Rule):
    __doc__ = __doc__
    code, name = "MP104", "set-not-null-in-expand"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.SET_NOT_NULL and not op.new_table:
            return f"{op.describe()} made NOT NULL in an expand script: old code may insert NULLs"
        return None


RULE = SetNotNullInExpand()
