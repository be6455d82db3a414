"""A foreign key added with foreign_key_checks=0 (MySQL/MariaDB).

## What it does
Flags a foreign key added to an existing table after ``SET foreign_key_checks = 0``
in the same script.  Any phase.

## Why is this bad
- **MySQL/MariaDB**: with the checks off the FK is added instantly -- and existing rows
  are never validated.  Orphans stay, and the schema claims an integrity it does not have.
- **PostgreSQL**: use ``NOT VALID`` + ``VALIDATE CONSTRAINT`` instead (``MP110``).

## Example
```python
def upgrade():
    op.execute("SET foreign_key_checks = 0")
    op.create_foreign_key("fk_orders_user", "orders", "users", ["user_id"], ["id"])
```

## Use instead
Declare a separate orphan check (an online data migration that finds and fixes the
violating rows) and say so in an inline ignore:
``# migrations-policy: ignore[MP142] orphans checked by data migration orders_user_orphans``.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class ForeignKeyUnvalidated(Rule):
    __doc__ = __doc__
    code, name, phases = "MP142", "foreign-key-unvalidated", BOTH_PHASES

    def check(self, verdict):
        if verdict.effect.unvalidated:
            return f"{verdict.operation.describe()}: existing rows are never validated"
        return None


RULE = ForeignKeyUnvalidated()
