"""``policy.sql.may_drop_table``: the cheap test the sync keeper asks before lexing each statement a
migration executes (``window/sync_keeper``).  It may say yes to a statement that drops nothing (the
full reading then decides), never no to one that ``from_sql`` reads as a DROP TABLE under any
dialect's reading: generated statements with every casing, comment, whitespace and statement mix."""

from __future__ import annotations

import random

import pytest

from migrations_policy.policy import model as m
from migrations_policy.policy.sql import from_sql, may_drop_table

SEEDS = [random.randrange(10**9) for _ in range(3)]

_GAPS = [" ", "  ", "\t", "\n", " /* c */ ", "/**/", " -- c\n", "\r\n", " /*!50000 */ ", " # c\n"]
_TAILS = ["", ";", "; SELECT 1", " CASCADE", " RESTRICT;", ";\nUPDATE t SET c = 1 WHERE id = ?"]
_OTHERS = ["SELECT * FROM t WHERE id = ?", "UPDATE t SET c = %(c)s", "INSERT INTO t (a) VALUES (%s)",
           "ALTER TABLE t ADD COLUMN c INTEGER", "CREATE TABLE t (id INTEGER)", "DELETE FROM t WHERE c < 3",
           "ALTER TABLE t RENAME TO u", "TRUNCATE t", "SELECT 'DROP TABLE x'", "CREATE INDEX ix ON t (c)"]


def _case(rng: random.Random, word: str) -> str:
    return "".join(ch.upper() if rng.random() < 0.5 else ch.lower() for ch in word)


def _name(rng: random.Random) -> str:
    plain = rng.choice(["t", "nodes", "loans_old", "_tmp_books"])
    return rng.choice([plain, f'"{plain}"', f"`{plain}`", f"public.{plain}", f'"public"."{plain}"'])


def _statement(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            words = [_case(rng, "DROP"), _case(rng, "TABLE")]
            if rng.random() < 0.4:
                words += [_case(rng, "IF"), _case(rng, "EXISTS")]
            names = ", ".join(_name(rng) for _ in range(rng.randint(1, 2)))
            text = rng.choice(_GAPS).lstrip() if rng.random() < 0.3 else ""
            for word in words:
                text += word + rng.choice(_GAPS)
            parts.append(text + names + rng.choice(_TAILS))
        else:
            parts.append(rng.choice(_OTHERS))
    return ";\n".join(parts)


@pytest.mark.parametrize("seed", SEEDS)
def test_never_no_to_a_statement_read_as_a_drop_table(seed):
    print(f"seed={seed}")
    rng = random.Random(seed)
    dropping = 0
    for _ in range(300):
        sql = _statement(rng)
        drops = [op for op in from_sql(sql) if op.kind == m.DROP_TABLE and op.table]
        if drops:
            dropping += 1
            assert may_drop_table(sql), f"seed={seed}: {sql!r} drops {drops[0].table} but the prefilter said no"
    assert dropping > 50, f"seed={seed}: the generator drew too few drops to mean anything"


@pytest.mark.parametrize("sql", _OTHERS[:4])
def test_statements_without_the_keyword_skip_the_lexer(sql):
    assert not may_drop_table(sql)
