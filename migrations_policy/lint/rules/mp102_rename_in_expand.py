"""Renaming a table or column in an expand script.

## What it does
Flags ``rename_table``, ``alter_column(new_column_name=...)``, ``ALTER TABLE ... RENAME``,
MySQL's ``RENAME TABLE`` and ``CHANGE old new``.

## Why is this bad
Every query of the old code that names the table or column fails the moment the
rename commits, on every dialect.  The rename itself is cheap (a catalog change under
a brief exclusive lock on PostgreSQL, instant on MySQL/MariaDB and SQLite) -- the
breakage is the problem, not the lock.

## Example
```python
def upgrade():
    op.alter_column("users", "name", new_column_name="full_name")
```

## Use instead
Add the new column (or table) in expand, copy the data in an online data migration
while new code writes both, switch reads, and drop the old one in contract.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class RenameInExpand(Rule):
    __doc__ = __doc__
    code, name = "MP102", "rename-in-expand"

    def check(self, verdict):
        op = verdict.operation
        if op.kind in m.RENAMES and not op.new_table:
            return f"{op.describe()} in an expand script: the old code still uses the old name"
        return None


RULE = RenameInExpand()
