"""upgrade() calls an operation the linter does not know; what it does is not checked.

## What it does
Reports each call of ``op.NAME(...)`` where ``NAME`` is neither an alembic operation
nor one registered (``@Operations.register_operation``) by a module the linter
imported: the modules named in the ``lint_plugins`` setting and the project's own
modules that its ``env.py`` imports and that register operations.  Also reported: a
registered operation without an implementation (``@Operations.implementation_for``).
The call answers with a harmless value and the rest of ``upgrade()`` is still linted.
A registered operation whose implementation is known is not reported: its
implementation runs offline and every operation it invokes is checked.

## Why is this bad
A custom operation can drop a column or lock a table as well as a built-in one; an
operation the linter cannot see is a hole in the check.  Under alembic the script
only works because ``env.py`` (or a module it imports) registers the operation.

## Example
```python
def upgrade():
    op.create_sequence("order_numbers")  # registered in myproj/migration_ops.py
```

## Use instead
Name the module that registers the operation in the settings, so that the linter
imports it before the scripts run:
``lint_plugins = myproj.migration_ops``.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class UnknownOperation(Rule):
    __doc__ = __doc__
    code, name, phases = "MP005", "unknown-operation", BOTH_PHASES


RULE = UnknownOperation()
