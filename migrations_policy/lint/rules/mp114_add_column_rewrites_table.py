"""Adding a column that rewrites or copies the whole table.

## What it does
Flags ``add_column`` on an existing table when the column forces a rewrite: a volatile
server default (``random()``, ``gen_random_uuid()``, ``uuid()``...; a call of any function
not known to be stable or immutable counts as volatile, e.g. ``uuid_generate_v1mc()``,
``"random"()`` or the project's own), an identity / serial column (also an integer
``primary_key=True`` column, which alembic adds as ``SERIAL`` / ``AUTO_INCREMENT``), a
STORED generated column; on PostgreSQL before 11 (``postgresql_version`` setting) any
default at all.

## Why is this bad
- **PostgreSQL**: the table and its indexes are rewritten under ``ACCESS EXCLUSIVE``;
  reads and writes wait (1.5-2.6 s per million rows measured).  Constant and ``now()``
  defaults are instant from PostgreSQL 11 on.
- **MySQL/MariaDB**: expression defaults such as ``(uuid())``, STORED generated columns
  and ``AUTO_INCREMENT`` columns rebuild the table (writes blocked).  ``(rand())`` is instant but wrong: see ``MP141``.
- **SQLite**: such columns are rejected (see ``MP150``).

## Example
```python
def upgrade():
    op.add_column("users", sa.Column("token", UUID, server_default=sa.text("gen_random_uuid()")))
```

## Use instead
Add the column nullable without a default, set the default for new rows, and fill the
existing rows in an online data migration.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class AddColumnRewritesTable(Rule):
    __doc__ = __doc__
    code, name = "MP114", "add-column-rewrites-table"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.ADD_COLUMN and verdict.effect.rewrite:
            return f"{op.describe()} rewrites the table"
        return None


RULE = AddColumnRewritesTable()
