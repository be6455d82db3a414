"""A batch operation re-creates a table whose sync triggers are still live.

## What it does
Reads the revision scripts in the order they are applied and finds each
``op.batch_alter_table`` block that re-creates ("move and copy") a table on which
an ``op.create_sync_trigger`` earlier in the history installed triggers that no
``op.drop_sync_trigger`` has removed yet: ``recreate="always"`` on every dialect;
on SQLite any operation but ``add_column`` and indexes.  Reported by
``findings(scripts)``, which the linter calls with the project's scripts.

## Why is this bad
Dropping the old table drops every trigger on it.  While the rolling window is
open release N still writes the old column; without its sync triggers those
writes never reach the new column: lost, silently.  ``dbsync upgrade`` and
``alembic upgrade`` through migrations_policy's env.py put the triggers back from
the catalog's own definition (``sync_keeper``), and on MariaDB refuse the rebuild
(its ``DROP TABLE`` commits at once); a run outside that hook (another tool, an
env.py without the options, offline ``--sql`` output applied by hand) loses them.
The rebuild also holds SQLite's database-wide write lock while it copies
(MP151).

## Example
```python
# versions/expand/... (release N+2, while release N's pair is still live)
def upgrade():
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.alter_column("provision_state", type_=sa.String(32))
```

## Use instead
```python
def upgrade():
    op.add_column("nodes", sa.Column("provision_state_wide", sa.String(32)))
    # ... or change the table in the contract, after op.drop_sync_trigger(...)
```
"""

from __future__ import annotations

from typing import Iterable

from migrations_policy.lint.rules.base import BOTH_PHASES, Rule
from migrations_policy.lint.rules.mp160_sync_trigger_outlives_column import Finding, upgrade_events


class SyncTriggerTableRebuilt(Rule):
    __doc__ = __doc__
    code, name, severity, phases = "MP161", "sync-trigger-table-rebuilt", "warning", BOTH_PHASES
    alternative = "op.add_column, or the change in the contract after op.drop_sync_trigger(...)"


RULE = SyncTriggerTableRebuilt()


def findings(scripts: Iterable[tuple[str, str]]) -> list[tuple[Finding, str]]:
    """``(path, source)`` of every revision script, in the order they are applied: each batch
    block re-creating a table with live sync triggers, with the dialect it concerns ("" for all)."""
    live: dict[tuple[str, str, str], tuple[str, int]] = {}
    found = []
    for path, source in scripts:
        for event in upgrade_events(path, source):
            pair = (event.table, *event.columns)
            if event.kind == "create":
                live[pair] = (event.path, event.line)
            elif event.kind == "drop":
                live.pop(pair, None)
            elif event.kind == "rebuild":
                kept = [(pair, where) for pair, where in live.items() if pair[0] == event.table]
                if not kept:
                    continue
                (table, old, new), (created, line) = kept[0]
                on = "" if event.columns[0] == "always" else "on SQLite "
                found.append((Finding(path, event.line, (
                    f"MP161 batch_alter_table({table!r}) re-creates {table} {on}while the sync trigger created "
                    f"at {created}:{line} keeps {table}.{old} -> {new} in step: the rebuild drops it (the run "
                    "through migrations_policy's env.py puts it back; MariaDB refuses the rebuild); prefer "
                    "op.add_column, or change the table in the contract after op.drop_sync_trigger")),
                    "" if not on else "sqlite"))
    return found
