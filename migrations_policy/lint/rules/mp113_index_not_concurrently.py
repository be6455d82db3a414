"""CREATE INDEX without CONCURRENTLY on an existing PostgreSQL table.

## What it does
Flags ``create_index`` without ``postgresql_concurrently=True`` and raw ``CREATE INDEX``
without ``CONCURRENTLY`` on a table not created in the same script.  PostgreSQL only.

## Why is this bad
- **PostgreSQL**: a plain ``CREATE INDEX`` holds a ``SHARE`` lock for the whole build:
  every INSERT, UPDATE and DELETE on the table waits.
- **MySQL/MariaDB**: a plain index is built online (INPLACE, LOCK=NONE): not flagged
  (FULLTEXT is, see ``MP140``).
- **SQLite**: not flagged.

## Example
```python
def upgrade():
    op.create_index("ix_orders_created", "orders", ["created_at"])
```

## Use instead
```python
def upgrade():
    with op.get_context().autocommit_block():
        op.create_index("ix_orders_created", "orders", ["created_at"], postgresql_concurrently=True)
```
A failed concurrent build leaves an INVALID index: drop it and retry.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class IndexNotConcurrently(Rule):
    __doc__ = __doc__
    code, name = "MP113", "index-not-concurrently"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.CREATE_INDEX and not op.fulltext and verdict.effect.blocks_writes:
            return f"{op.describe()} without CONCURRENTLY"
        return None


RULE = IndexNotConcurrently()
