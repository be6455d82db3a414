"""An ALTER that SQLite rejects.

## What it does
Flags, on SQLite, ``add_column`` forms that ``ALTER TABLE ADD COLUMN`` rejects (NOT NULL
without a default, a non-constant default such as ``CURRENT_TIMESTAMP`` or an
expression, UNIQUE / PRIMARY KEY, STORED generated columns) and alembic ops that SQLite
can only do in batch mode (type changes, NOT NULL changes, defaults, constraints) when
issued outside ``batch_alter_table``.  Any phase.

## Why is this bad
- **SQLite**: the migration fails with a syntax or "Cannot add a ... column" error.
- **PostgreSQL**, **MySQL/MariaDB**: not applicable.

## Example
```python
def upgrade():
    op.add_column("users", sa.Column("created", sa.DateTime, server_default=sa.func.now()))
```

## Use instead
A nullable column or a constant default, backfilled online; for other changes
``batch_alter_table`` (which recreates the table, see ``MP151``).
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class SqliteUnsupportedAlter(Rule):
    __doc__ = __doc__
    code, name, phases = "MP150", "sqlite-unsupported-alter", BOTH_PHASES

    def check(self, verdict):
        if verdict.dialect == "sqlite" and verdict.effect.fails:
            return f"{verdict.operation.describe()} fails on SQLite"
        return None


RULE = SqliteUnsupportedAlter()
