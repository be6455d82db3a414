"""What the downgrade judge reads from a statement (``at_risk.destroying``): fails closed.

A statement keeps every row only when the knowledge base reads it as a kind that does; a statement
that deletes or rewrites rows without naming which counts every row of its table (``REWRITTEN``); one
whose losses no count can name is refused unless forced (``UNCOUNTABLE``).  Each statement is drawn
in a random spelling (case, a comment, a schema-qualified name): ``MP_AT_RISK_READING_SEED``.
"""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy.gate.drops import at_risk
from migrations_policy.policy.sql import from_sql

SEED = int(os.environ.get("MP_AT_RISK_READING_SEED") or random.SystemRandom().randrange(1 << 30))

R, U = at_risk.REWRITTEN, at_risk.UNCOUNTABLE
CASES = [
    # (dialect, statement with {t} for the table, the targets: (table or U, column or R or None))
    ("postgresql", "DELETE FROM {t} WHERE id > 3", [("nodes", R)]),
    ("postgresql", "UPDATE {t} SET name = NULL", [("nodes", R)]),
    ("postgresql", "WITH gone AS (DELETE FROM {t} RETURNING id) SELECT count(*) FROM gone", [("nodes", R)]),
    ("postgresql", "TRUNCATE ports, {t} CASCADE", [("ports", None), ("nodes", None)]),
    ("postgresql", "INSERT INTO {t} (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET name = 'x'", [("nodes", R)]),
    ("postgresql", "MERGE INTO {t} USING ports ON true WHEN MATCHED THEN DELETE", [("nodes", R)]),
    ("postgresql", "DROP TYPE mood CASCADE", [(U, None)]),
    ("postgresql", "DROP SCHEMA reports CASCADE", [(U, None)]),
    ("postgresql", "DROP EXTENSION hstore CASCADE", [(U, None)]),
    ("postgresql", "ALTER TABLE {t} DROP COLUMN meta", [("nodes", "meta")]),
    ("mysql", "DELETE {t} FROM {t} WHERE id > 3", [("nodes", R)]),
    ("mysql", "REPLACE INTO {t} SELECT * FROM {t}", [("nodes", R)]),
    ("mysql", "INSERT INTO {t} (id) VALUES (1) ON DUPLICATE KEY UPDATE name = 'x'", [("nodes", R)]),
    ("mysql", "ALTER TABLE {t} ENGINE=BLACKHOLE", [("nodes", R)]),
    ("mysql", "ALTER TABLE {t} TRUNCATE PARTITION p0", [("nodes", R)]),
    ("mysql", "DROP DATABASE reports", [(U, None)]),
    ("mysql", "CREATE OR REPLACE TABLE {t} (id INT PRIMARY KEY)", [("nodes", None)]),
    ("sqlite", "INSERT OR REPLACE INTO {t} (id) VALUES (1)", [("nodes", R)]),
    ("sqlite", "DELETE FROM {t}", [("nodes", R)]),
    # keep every row: never counted
    ("postgresql", "INSERT INTO {t} (id) VALUES (1)", []),
    ("postgresql", "DROP INDEX ix_nodes_version", []),
    ("postgresql", "DROP TRIGGER t ON {t}", []),
    ("postgresql", "DROP FUNCTION f() CASCADE", []),
    ("postgresql", "DROP TYPE mood", []),
    ("postgresql", "SELECT * FROM {t} FOR UPDATE", []),
    ("postgresql", "ALTER TABLE {t} RENAME COLUMN meta TO meta_old", []),
    ("mysql", "SET foreign_key_checks = 0", []),
    ("mysql", "INSERT IGNORE INTO {t} (id) VALUES (1)", []),
    ("sqlite", "DELETE FROM migrations_policy_statements WHERE revision = 'x'", []),
]


def _spell(rng: random.Random, dialect: str, statement: str) -> str:
    table = rng.choice(["nodes", "NODES" if dialect == "mysql" else "nodes",
                        "public.nodes" if dialect == "postgresql" else "nodes"])
    text = statement.replace("{t}", table)
    if rng.random() < 0.5:
        text = text.lower() if "'" not in text else text
    if rng.random() < 0.5:
        text = "/* rollback */ " + text
    return text


@pytest.mark.parametrize("dialect, statement, expected", CASES)
def test_the_judge_reads_what_a_statement_may_destroy(dialect, statement, expected):
    rng = random.Random(f"{SEED}:{statement}")
    text = _spell(rng, dialect, statement)
    found = at_risk.destroying(from_sql(text, (dialect,)))
    normal = [(t if t != U else U, c if t != U else None) for t, c in found]
    assert [(t.lower() if t != U else t, c) for t, c in normal] == expected, (SEED, text, found)
