"""The database refused the script when the history was replayed.

## What it does
With ``lint --replay``, the history is upgraded from base on a scratch database, each
script at its own ``down_revision``.  When the database refuses a statement of the
script (a table or column that does not exist there, one that already exists, a type
or syntax the dialect does not accept, a constraint the data breaks), the script's
transaction is rolled back and this finding names the script's line and the database's
first line of text.  What the script executed before the error is linted as usual.
Its descendants are not replayed: each gets ``MP000`` naming this script.

## Why is this bad
``alembic upgrade`` would stop at the same statement on a database with the same history:
the script does not apply on this dialect, or the history is out of order (a script that
uses a table before the revision that creates it).  MySQL and MariaDB commit DDL as it
runs, so there the statements before the error stay applied.

## Example
```python
def upgrade():
    op.add_column("acount", sa.Column("email", sa.String(255)))  # the table is "account"
```

## Use instead
Fix the script (or its ``down_revision``) so that it applies on top of its parent.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class ReplayDatabaseError(Rule):
    __doc__ = __doc__
    code, name, phases = "MP004", "replay-database-error", BOTH_PHASES


RULE = ReplayDatabaseError()
