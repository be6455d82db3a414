"""MP160: a column dropped while a sync trigger still uses it, found across generated scripts."""

from __future__ import annotations

import random

import pytest

from migrations_policy.lint.rules import get
from migrations_policy.lint.rules.mp160_sync_trigger_outlives_column import findings

HEADER = "from alembic import op\nimport migrations_policy.window.sync_triggers\n\n\ndef upgrade():\n"
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


# -- MP161: a batch block re-creating a table whose sync triggers are live -------------------
#: (source lines inside upgrade() for table t, which dialects it re-creates t on: "always", "sqlite", None)
BATCH_BLOCKS = [
    (["    with op.batch_alter_table({t!r}) as b:", "        b.alter_column('x', nullable=True)"], "sqlite"),
    (["    with op.batch_alter_table({t!r}) as b:", "        b.drop_constraint('uq', type_='unique')"], "sqlite"),
    (["    with op.batch_alter_table({t!r}, recreate='always') as b:", "        pass"], "always"),
    (["    with op.batch_alter_table({t!r}, recreate='always') as b:", "        b.add_column(sa.Column('y'))"],
     "always"),
    (["    with op.batch_alter_table({t!r}) as b:", "        b.add_column(sa.Column('y'))"], None),
    (["    with op.batch_alter_table({t!r}) as b:", "        b.create_index('ix', ['y'])"], None),
    (["    with op.batch_alter_table({t!r}, recreate='never') as b:", "        b.alter_column('x')"], None),
]


@pytest.mark.parametrize("seed", range(40))
def test_mp161_findings_match_a_model_of_the_scripts(seed):
    from migrations_policy.lint.rules.mp161_sync_trigger_table_rebuilt import findings as rebuilds

    rng = random.Random(seed)
    tables = ["t", "u"]
    live: set[str] = set()
    scripts, expected = [], []
    for number in range(rng.randint(2, 5)):
        lines, path = [], f"r{number}.py"
        line = HEADER.count("\n") + 1
        for _ in range(rng.randint(1, 4)):
            table, roll = rng.choice(tables), rng.random()
            if roll < 0.3:
                block = [f"    op.create_sync_trigger({table!r}, old='a', new='b')"]
                live.add(table)
            elif roll < 0.45:
                block = [f"    op.drop_sync_trigger({table!r}, old='a', new='b')"]
                live.discard(table)
            else:
                template, rebuilt = rng.choice(BATCH_BLOCKS)
                block = [text.format(t=table) for text in template]
                if rebuilt and table in live:
                    expected.append((path, line, "sqlite" if rebuilt == "sqlite" else ""))
            lines.extend(block)
            line += len(block)
        scripts.append((path, HEADER + "\n".join(lines + ["    pass"]) + DOWNGRADE))
    found = rebuilds(scripts)
    assert [(f.path, f.line, dialect) for f, dialect in found] == expected
    assert all("op.drop_sync_trigger" in f.message and f.message.startswith("MP161 ") for f, _ in found)


def test_mp161_is_registered_for_both_phases_as_a_warning():
    rule = get("MP161")
    assert rule.applies("expand") and rule.applies("contract") and rule.severity == "warning"
