"""upgrade() could not run offline; the script was linted from its source.

## What it does
When ``upgrade()`` needs a live database (rows read through ``bind.execute()`` or an
ORM session, helpers that refuse offline mode), or inspects it (offline,
``sa.inspect(op.get_bind())`` answers as an empty database, so a branch such as
``if "x" in columns:`` would be skipped), the linter reads the source instead: it
follows helper functions defined in the script or in the project's own modules it
imports (their operations are reported at the calling line), ``with`` blocks, loops over
literal lists and dialect branches, evaluates every ``op.*`` call it can, reads the
names of the others from their literal arguments (positional or keyword, such as
``table_name=``), and counts ORM session and ``table.update()`` / ``.delete()`` calls
as DML.  This warning says what could not be executed and why.

A script that refuses a dialect itself -- a ``raise NotImplementedError(...)`` statement of
the script (in ``upgrade()`` or a function of its own) reached when it runs for that
dialect, such as ``raise NotImplementedError(f"Unsupported engine: {engine_name}")`` in a
project that supports MySQL and SQLite only -- is linted for the dialects it runs on, and
this warning names each dialect it refuses (``not linted for postgresql``).  Refusing every
dialect linted is ``MP000``, as is any other exception; a ``NotImplementedError`` raised
elsewhere (alembic, SQLAlchemy, a helper module), or after the script inspected the (empty,
offline) database, is not taken for a refusal: its source is read, as above.

## Why is this bad
Operations that depend on what the live database contains (``if "x" in columns:``)
are checked as if every branch ran; values computed from the database are unknown.
Findings may be missing or too many.

## Example
```python
def upgrade():
    columns = [c["name"] for c in sa.inspect(op.get_bind()).get_columns("users")]
    if "email" not in columns:
        op.add_column("users", sa.Column("email", sa.String(255)))
```

## Use instead
Run ``migrations-policy lint --url URL`` against a scratch database at the script's
``down_revision``: ``upgrade()`` then runs for real in a transaction that is rolled
back (MySQL/MariaDB cannot roll back DDL: use a throwaway database).  Or run
``migrations-policy lint --replay``: the whole history is upgraded from base on a scratch
database, each script at its own ``down_revision``, and what really ran is linted.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class NotExecutedOffline(Rule):
    __doc__ = __doc__
    code, name, severity, phases = "MP001", "not-executed-offline", "warning", BOTH_PHASES


RULE = NotExecutedOffline()
