"""A per-row default that gives every existing row the same value.

## What it does
Flags ``add_column`` with a ``(rand())``-style default on MySQL/MariaDB.  Any phase.

## Why is this bad
- **MySQL/MariaDB**: ``ADD COLUMN ... DEFAULT (rand())`` is applied INSTANTly: the
  expression is evaluated once and every existing row gets the same "random" value,
  while new rows get fresh values.  Code relying on randomness (sharding keys,
  tokens) silently misbehaves for old rows.
- **PostgreSQL**: a volatile default is evaluated per row (it rewrites instead, ``MP114``).
- **SQLite**: non-constant defaults are rejected (``MP150``).

## Example
```python
op.add_column("users", sa.Column("shard", sa.Float, server_default=sa.text("(rand())")))
```

## Use instead
Add the column without a default and fill per-row values in an online data migration.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class DefaultSameValue(Rule):
    __doc__ = __doc__
    code, name, phases = "MP141", "default-same-value", BOTH_PHASES

    def check(self, verdict):
        if verdict.effect.same_value:
            return f"{verdict.operation.describe()}: non-deterministic default"
        return None


RULE = DefaultSameValue()
