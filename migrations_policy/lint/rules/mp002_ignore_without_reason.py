"""An inline ignore comment without a reason.

## What it does
Reports ``# migrations-policy: ignore[CODE]`` with no text after the brackets.  Such a
comment suppresses nothing.

## Why is this bad
An ignored finding is a decision someone made about a live database (an orphan check
that exists elsewhere, a table known to be tiny).  Without the reason, the next
reader cannot tell a considered exception from a silenced warning.

## Example
```python
op.drop_column("users", "legacy")  # migrations-policy: ignore[MP101]
```

## Use instead
```python
# migrations-policy: ignore[MP101] column was never used by any released version
op.drop_column("users", "legacy")
```
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class IgnoreWithoutReason(Rule):
    __doc__ = __doc__
    code, name, phases = "MP002", "ignore-without-reason", BOTH_PHASES


RULE = IgnoreWithoutReason()
