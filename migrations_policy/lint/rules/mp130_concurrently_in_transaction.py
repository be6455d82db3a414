"""CONCURRENTLY inside the migration's transaction.

## What it does
Flags ``CREATE INDEX CONCURRENTLY`` / ``DROP INDEX CONCURRENTLY`` / ``REINDEX ... CONCURRENTLY``
(``postgresql_concurrently=True`` or raw SQL) that is not inside
``op.get_context().autocommit_block()`` (or after an explicit ``COMMIT``).  Any phase.

## Why is this bad
- **PostgreSQL**: refused with "cannot run inside a transaction block": the migration
  fails.  alembic runs each migration in a transaction on PostgreSQL.
- **MySQL/MariaDB**, **SQLite**: there is no CONCURRENTLY; not flagged.

## Example
```python
def upgrade():
    op.create_index("ix_a", "t", ["a"], postgresql_concurrently=True)
```

## Use instead
```python
def upgrade():
    with op.get_context().autocommit_block():
        op.create_index("ix_a", "t", ["a"], postgresql_concurrently=True)
```
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class ConcurrentlyInTransaction(Rule):
    __doc__ = __doc__
    code, name, phases = "MP130", "concurrently-in-transaction", BOTH_PHASES

    def check(self, verdict):
        if verdict.effect.no_transaction:
            return f"{verdict.operation.describe()} CONCURRENTLY inside a transaction"
        return None


RULE = ConcurrentlyInTransaction()
