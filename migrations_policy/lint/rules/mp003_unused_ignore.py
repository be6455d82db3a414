"""An inline ignore comment that matches no finding.

## What it does
Reports ``# migrations-policy: ignore[CODE] reason`` when no finding with that code is
reported on the comment's line or the line below it.

## Why is this bad
Stale ignores hide future problems: a later edit may introduce a real finding at that
very line, and it would be silenced without anyone deciding so.

## Example
```python
op.add_column("users", sa.Column("nick", sa.String(50)))  # migrations-policy: ignore[MP105] old
```

## Use instead
Remove the comment.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class UnusedIgnore(Rule):
    __doc__ = __doc__
    code, name, severity, phases = "MP003", "unused-ignore", "warning", BOTH_PHASES


RULE = UnusedIgnore()
