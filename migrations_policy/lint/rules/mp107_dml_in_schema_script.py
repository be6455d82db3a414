"""UPDATE or DELETE of existing rows in a schema migration.

## What it does
Flags ``UPDATE`` / ``DELETE`` (``op.execute`` strings, ``sa.text``, Core ``update()`` /
``delete()``, and statements sent through ``op.get_bind().execute(...)``) on tables not
created in the same script.  Seeding a new table with INSERT is fine.

## Why is this bad
A schema script runs in one transaction with DDL locks held: a large UPDATE holds them
for its whole duration (PostgreSQL keeps the ``ACCESS EXCLUSIVE`` of earlier DDL;
MySQL/MariaDB holds row locks and bloats the undo log; SQLite blocks every writer).
It cannot be batched, throttled, resumed, or run while both releases are live.

## Example
```python
def upgrade():
    op.execute("UPDATE users SET email_lower = lower(email)")
```

## Use instead
Declare an online data migration (batched, resumable, tracked), and require it before
the contract phase.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class DmlInSchemaScript(Rule):
    __doc__ = __doc__
    code, name, phases = "MP107", "dml-in-schema-script", BOTH_PHASES

    def check(self, verdict):
        op = verdict.operation
        if op.kind in (m.UPDATE, m.DELETE) and not op.new_table:
            return f"{op.kind.upper()} {op.table or ''} in a schema script: data changes belong in online data migrations".replace("  ", " ")
        return None


RULE = DmlInSchemaScript()
