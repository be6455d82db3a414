"""Adding a validated CHECK constraint to an existing table.

## What it does
Flags ``create_check_constraint`` and ``ADD CHECK`` / ``ADD CONSTRAINT ... CHECK`` on an
existing table, unless ``NOT VALID`` (PostgreSQL).

## Why is this bad
- **PostgreSQL**: every row is checked under ``ACCESS EXCLUSIVE``: reads and writes wait.
- **MySQL/MariaDB**: ``ADD CHECK`` copies the whole table (``ALGORITHM=COPY``).
- **SQLite**: ``ALTER TABLE`` cannot add constraints (see ``MP150`` / ``MP151``).

## Example
```python
def upgrade():
    op.create_check_constraint("ck_price_positive", "items", "price > 0")
```

## Use instead
PostgreSQL: ``postgresql_not_valid=True`` (brief lock, new rows checked), then
``VALIDATE CONSTRAINT`` in a later script.  MySQL/MariaDB: an online schema change tool.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class ValidatedCheckConstraint(Rule):
    __doc__ = __doc__
    code, name = "MP112", "validated-check-constraint"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.ADD_CHECK and verdict.effect.blocking:
            return f"{op.describe()}: CHECK constraint validated on an existing table"
        return None


RULE = ValidatedCheckConstraint()
