"""The script cannot be loaded or run at all.

## What it does
Reports a revision script that cannot be read (not UTF-8, binary, too large), parsed
(syntax error), imported (a missing module, an exception at import time), that has
no ``upgrade()``, whose ``upgrade()`` raises an error of its own, or that does not
finish within the time limit (``lint_timeout``, default 10 s of CPU time; a script
that blocks -- a sleep, a lock -- is stopped after six times that of wall-clock time)
or allocates more than the memory limit (``lint_memory_limit``, default 1024 MiB).  The linter exits
with status 2.

## Why is this bad
A script that cannot be loaded cannot be checked, and will not run in production either.
An exception raised by the script's own code (not by a database access that offline
mode cannot serve) is a bug that ``alembic upgrade`` would hit too.

## Example
```python
def upgrade():
    op.add_column("users", sa.Column("email", sa.String(255))  # missing ")"
```

## Use instead
Fix the script.  A script that needs a live database (reflection, reading rows)
is not an error: it is linted from source with warning ``MP001``, or run against a
scratch database with ``lint --url``.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class UnloadableScript(Rule):
    __doc__ = __doc__
    code, name, phases = "MP000", "unloadable-script", BOTH_PHASES


RULE = UnloadableScript()
