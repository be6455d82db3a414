"""Adding a validated foreign key to an existing table.

## What it does
Flags ``create_foreign_key``, ``ADD ... FOREIGN KEY`` and FKs declared inline in
``add_column(sa.Column(..., sa.ForeignKey(...)))`` on a table that already exists --
on PostgreSQL unless ``NOT VALID``; on MySQL/MariaDB always (see ``MP142`` when
``foreign_key_checks`` is off).  FKs between tables created in the same script are fine.

## Why is this bad
- **PostgreSQL**: ``SHARE ROW EXCLUSIVE`` on *both* tables while every row is validated:
  writes to the child and the parent wait for the whole scan.
- **MySQL/MariaDB**: with ``foreign_key_checks=1`` the table is copied
  (``ALGORITHM=COPY``), blocking writes for the whole copy.
- **SQLite**: ``ALTER TABLE`` cannot add constraints (see ``MP150`` / ``MP151``).

## Example
```python
def upgrade():
    op.create_foreign_key("fk_orders_user", "orders", "users", ["user_id"], ["id"])
```

## Use instead
PostgreSQL: ``postgresql_not_valid=True`` in expand (brief lock, new rows checked), then
``ALTER TABLE ... VALIDATE CONSTRAINT`` in a later script (no write lock).
MySQL/MariaDB: an online schema change tool, or a maintenance window.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class ForeignKeyOnExistingTable(Rule):
    __doc__ = __doc__
    code, name = "MP110", "foreign-key-on-existing-table"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.ADD_FK and verdict.effect.blocking:
            return f"{op.describe()}: foreign key added to an existing table"
        return None


RULE = ForeignKeyOnExistingTable()
