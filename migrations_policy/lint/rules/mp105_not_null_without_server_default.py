"""Adding a NOT NULL column without a server default to an existing table.

## What it does
Flags ``add_column`` of a ``nullable=False`` column that has no ``server_default`` in an
expand script -- including columns that only have a Python-side ``default=``, which the
database never sees.

## Why is this bad
The old code does not know the column: its INSERTs omit it and fail.

- **PostgreSQL**: the ``ALTER`` itself fails on a non-empty table (existing rows would be NULL).
- **MySQL/MariaDB**: existing rows silently get an implicit ``''`` / ``0``; old INSERTs fail
  in strict mode.
- **SQLite**: ``ALTER TABLE`` rejects it (see ``MP150``, which reports it on SQLite).

## Example
```python
def upgrade():
    op.add_column("users", sa.Column("active", sa.Boolean(), nullable=False, default=True))
```

## Use instead
```python
op.add_column("users", sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()))
```
or add it nullable, backfill online, and set NOT NULL in contract.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class NotNullWithoutServerDefault(Rule):
    __doc__ = __doc__
    code, name = "MP105", "not-null-without-server-default"

    def check(self, verdict):
        op = verdict.operation
        if (op.kind != m.ADD_COLUMN or op.new_table or op.nullable is not False or verdict.dialect == "sqlite"
                or op.default_kind != m.DEFAULT_NONE or op.generated or op.primary_key):
            return None
        hint = " (default= is Python-side only: the database and the old code never see it)" if op.python_default else ""
        return f"{op.describe()} is NOT NULL without a server_default{hint}"


RULE = NotNullWithoutServerDefault()
