"""MP160: a column dropped while a sync trigger still uses it, found across generated scripts."""

from __future__ import annotations

import random

import pytest

from migrations_policy.lint.rules import get
from migrations_policy.lint.rules.mp160_sync_trigger_outlives_column import findings

HEADER = "from alembic import op\nimport migrations_policy.sync_triggers\n\n\ndef upgrade():\n"
DOWNGRADE = "\n\ndef downgrade():\n    op.drop_column('t', 'name')\n"  # never read


def _drop_column(table: str, column: str, batch: bool) -> list[str]:
    if batch:
        return [f"    with op.batch_alter_table({table!r}) as batch_op:", f"        batch_op.drop_column({column!r})"]
    return [f"    op.drop_column({table!r}, {column!r})"]


@pytest.mark.parametrize("seed", range(40))
def test_findings_match_a_model_of_the_scripts(seed):
    rng = random.Random(seed)
    tables = ["t", "u"]
    pairs = [(rng.choice(tables), f"c{i}", f"c{i}_new") for i in range(rng.randint(1, 3))]
    expand = [f"    op.create_sync_trigger({t!r}, old={o!r}, new={n!r})" for t, o, n in pairs]
    contract, expected = [], []
    line = HEADER.count("\n") + 1
    for table, old, new in pairs:
        dropped = rng.choice([old, new, None])
        order = rng.choice(["drop_first", "drop_after", "never"])
        trigger = [f"    op.drop_sync_trigger({table!r}, old={old!r}, new={new!r})"]
        column = _drop_column(table, dropped, rng.random() < 0.5) if dropped else []
        block = {"drop_first": trigger + column, "drop_after": column + trigger, "never": column}[order]
        if dropped and order != "drop_first":
            expected.append(line + (len(column) - 1))
        contract.extend(block)
        line += len(block)
    contract.append("    pass")
    scripts = [("expand.py", HEADER + "\n".join(expand + ["    pass"]) + DOWNGRADE),
               ("contract.py", HEADER + "\n".join(contract) + DOWNGRADE)]
    found = findings(scripts)
    assert [(f.path, f.line) for f in found] == [("contract.py", n) for n in sorted(expected)]
    assert all("op.drop_sync_trigger(" in f.message and "expand.py:" in f.message for f in found)


def test_rule_is_registered_for_contract():
    rule = get("MP160")
    assert rule.name == "sync-trigger-outlives-column" and rule.applies("contract") and not rule.applies("expand")
