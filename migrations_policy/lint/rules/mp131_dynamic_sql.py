"""SQL that a DO block or a prepared statement builds at run time: the linter cannot see what it does.

## What it does
Warns about ``EXECUTE`` of a computed string inside a PostgreSQL ``DO`` block
(``EXECUTE format('ALTER TABLE %I ...', t)``, ``EXECUTE 'DROP TABLE ' || t``), and about
MySQL/MariaDB ``PREPARE s FROM ...``, ``EXECUTE s`` and ``EXECUTE IMMEDIATE ...`` (and a
top-level PostgreSQL ``EXECUTE`` of a prepared statement), whatever the string.  The
statements of a ``DO`` block and ``EXECUTE 'constant SQL'`` inside it are checked like
any other SQL; only SQL assembled or prepared apart is out of reach.  Any phase.

## Why is this bad
- **PostgreSQL**: the block can drop, rename or rewrite anything, under the locks the
  statement takes, and no rule looked at it: this is how raw SQL slipped past
  neutron's and keystone's checks.
- **MySQL/MariaDB**: a prepared statement can do the same.  **SQLite**: nothing runs dynamic SQL.

## Example
```python
op.execute('''
DO $$ DECLARE t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables WHERE tablename LIKE 'shard_%' LOOP
    EXECUTE format('ALTER TABLE %I DROP COLUMN legacy', t);
  END LOOP;
END $$''')
```

## Use instead
Write the statements out (a Python loop over the table names is linted statement by
statement), or, when the set of tables is only known at run time, keep the block and
record why with ``# migrations-policy: ignore[MP131] reason``.
```python
for table in ("shard_1", "shard_2"):
    op.drop_column(table, "legacy")  # in a contract script
```
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class DynamicSql(Rule):
    __doc__ = __doc__
    code, name, severity, phases = "MP131", "dynamic-sql", "warning", BOTH_PHASES

    def check(self, verdict):
        if verdict.operation.kind == m.DYNAMIC_SQL:
            if verdict.operation.name == "prepared":
                return "a prepared statement (PREPARE / EXECUTE / EXECUTE IMMEDIATE) runs SQL the linter cannot read"
            return "a DO block runs SQL it builds at run time: not checked"
        return None


RULE = DynamicSql()
