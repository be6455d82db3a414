"""A FULLTEXT index on an existing MySQL/MariaDB table.

## What it does
Flags ``create_index(..., mysql_prefix="FULLTEXT")``, ``CREATE FULLTEXT INDEX`` and
``ADD FULLTEXT`` on a table not created in the same script.

## Why is this bad
- **MySQL/MariaDB**: a FULLTEXT index can only be built with ``LOCK=SHARED``: writes are
  blocked for the whole build (a plain index is online and is not flagged).
- **PostgreSQL**, **SQLite**: no FULLTEXT indexes; not flagged.

## Example
```python
def upgrade():
    op.create_index("ft_body", "posts", ["body"], mysql_prefix="FULLTEXT")
```

## Use instead
An online schema change tool (pt-online-schema-change, gh-ost) or a maintenance window.
"""

from migrations_policy.policy import model as m
from migrations_policy.lint.rules.base import Rule


class MysqlFulltextIndex(Rule):
    __doc__ = __doc__
    code, name = "MP140", "mysql-fulltext-index"

    def check(self, verdict):
        op = verdict.operation
        if op.kind == m.CREATE_INDEX and op.fulltext and verdict.effect.blocks_writes:
            return f"{op.describe()}: FULLTEXT index on an existing table"
        return None


RULE = MysqlFulltextIndex()
