"""TRUNCATE in a schema migration.

## What it does
Flags ``TRUNCATE`` of an existing table in an expand or contract script.

## Why is this bad
It removes every row the running code relies on, and takes ``ACCESS EXCLUSIVE`` on
PostgreSQL (drop-and-recreate with a metadata lock on MySQL/MariaDB).  Data changes do not
belong in schema scripts at all: they cannot be throttled, resumed or skipped.

## Example
```python
def upgrade():
    op.execute("TRUNCATE TABLE sessions")
```

## Use instead
Delete rows in batches in an online data migration, or drop the table in contract.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class Truncate(Rule):
    __doc__ = __doc__
    code, name, phases = "MP106", "truncate-in-schema-script", BOTH_PHASES

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.TRUNCATE and not op.new_table:
            return f"TRUNCATE {op.table or ''} in a schema script".rstrip()
        return None


RULE = Truncate()
