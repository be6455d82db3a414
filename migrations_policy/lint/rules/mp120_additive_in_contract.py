"""Creating a table, column or index in a contract script.

## What it does
Flags ``create_table``, ``add_column`` and ``create_index`` (and their raw SQL forms) in a
contract script.

## Why is this bad
Contract runs after the new code is fully deployed.  If the new code needed the new
object, it ran without it until contract; if it did not, the object belongs to the next
release's expand.  On every dialect the additive step is cheap in expand and useless
(or too late) in contract.

## Example
```python
# versions/contract/...
def upgrade():
    op.add_column("users", sa.Column("nickname", sa.String(50)))
```

## Use instead
Move it to an expand script.
"""

from migrations_policy.policy import model as m
from migrations_policy.policy.model import CONTRACT
from migrations_policy.lint.rules.base import Rule


class AdditiveInContract(Rule):
    __doc__ = __doc__
    code, name, phases = "MP120", "additive-in-contract", (CONTRACT,)
    alternative = "move it to an expand script"

    def check(self, verdict):
        op = verdict.operation
        if op.kind in m.ADDITIVE and not op.new_table:
            return f"{op.describe()} in a contract script: the new code needed it before contract ran"
        return None


RULE = AdditiveInContract()
