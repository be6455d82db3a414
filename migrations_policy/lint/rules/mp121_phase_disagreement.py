"""The revision's branch label, directory and declared data migrations disagree about its phase.

## What it does
Reports a revision whose phase is ambiguous: its file sits in ``versions/expand/`` or
``versions/contract/`` but alembic puts it on the other branch (or on none), through its
own ``branch_labels`` or its ``down_revision`` chain; or it declares required data
migrations (``requires_data_migrations = ...`` or ``op.require_data_migrations(...)``)
but is not on the contract branch.  Branch labels are resolved as alembic resolves them,
constants and imported constants included (``branch_labels = (migration.CONTRACT_BRANCH,)``).

The decision is ``migrations_policy.policy.phases.revision_phase_disagreement``: the
contract gate asks the same function and refuses to apply such a revision.

## Why is this bad
``alembic upgrade expand@head`` applies what is on the expand branch, whatever the
directory says.  A contract script that alembic sees on the expand branch runs while the
old code still serves traffic; an expand script on the contract branch waits until the
end of the rollout.  Only contract revisions may depend on data migrations.

## Example
```python
# versions/contract/3f2a_drop_legacy.py
revision = "3f2a"
down_revision = "1b7c"  # the expand head: this revision is on the expand branch
```

## Use instead
Point ``down_revision`` at the contract branch's head (or label the revision
``branch_labels = ("contract",)`` when it starts the branch), or move the file to the
directory of its branch.
"""

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule


class PhaseDisagreement(Rule):
    __doc__ = __doc__
    code, name, phases = "MP121", "phase-disagreement", BOTH_PHASES


RULE = PhaseDisagreement()
