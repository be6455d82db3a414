"""batch_alter_table recreating ("move and copy") an existing table.

## What it does
Flags a ``batch_alter_table`` block that recreates its table: on SQLite whenever it
contains anything but plain ``add_column`` / indexes (``recreate="auto"``), on every
dialect with ``recreate="always"``.  Tables created in the same script are fine.

## Why is this bad
- **SQLite**: the copy holds the database-wide write lock: every writer of every table
  waits until the whole table is copied.
- **PostgreSQL**, **MySQL/MariaDB**: ``recreate="always"`` copies the table under an
  exclusive lock; with ``"auto"`` batch ops are plain ALTERs and are judged one by one.

## Example
```python
def upgrade():
    with op.batch_alter_table("users") as batch_op:
        batch_op.alter_column("name", type_=sa.String(200))
```

## Use instead
Keep expand to plain ``op.add_column`` (instant on SQLite); do table recreations in
contract or a maintenance window.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class BatchRecreate(Rule):
    __doc__ = __doc__
    code, name = "MP151", "batch-recreate"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.BATCH_RECREATE and verdict.effect.rewrite:
            return f"batch_alter_table({op.table!r}) recreates the table"
        return None


RULE = BatchRecreate()
