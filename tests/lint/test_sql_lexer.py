"""The fast path of ``policy.sql_lexer`` gives exactly what sqlparse's lexer gives."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from migrations_policy.policy import sql_lexer

FRAGMENTS = [
    "ALTER", "TABLE", "t", "users", "ADD", "COLUMN", "c1", "_x", "DROP", "NOT", "NULL", "DEFAULT", "0", "12", "1a",
    "integer", "varchar", "(", ")", ",", ";", ".", "=", "==", "*", "'x'", "'it''s'", "'", '"q"', '"a""b"', '"',
    "PRIMARY", "KEY", "IF", "EXISTS", "CREATE", "OR", "REPLACE", "INDEX", "CONCURRENTLY", "ON", "UPDATE", "SET",
    "LIKE", "DIV", "GO", "AT", "TIME", "ZONE", "END", "ORDER", "BY", "AS", "IN", "FROM", "JOIN", "LEFT", "DOUBLE",
    "PRECISION", "NULLS", "FIRST", "ASC", ".5", "1.", "1e5", "0x1F", "-1", "--", "/*", "*/", "$$", "#", "\\", "é",
    "now", "x.y", "s.t", "VALID", "REFERENCES", "WITH'", "ENDX", "ASC_X", "2abc", "\n", "\t", "  ", "",
]
SEPARATORS = [" ", "", "\n", "  "]


def _random_texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12))]
        texts.append("".join(p + rng.choice(SEPARATORS) for p in parts))
    return texts


def _test_sql_strings() -> list[str]:
    """String literals written in the linter's own tests (the SQL they lint)."""
    found = []
    for path in Path(__file__).parent.glob("test_*.py"):
        found += re.findall(r"\"([^\"\n\\]{6,})\"|'([^'\n\\]{6,})'", path.read_text())
    return [a or b for a, b in found]


@pytest.mark.parametrize("seed", range(4))
def test_fast_path_matches_sqlparse(seed):
    texts = _random_texts(3000, seed) + _test_sql_strings()
    fast_taken = 0
    for text in texts:
        fast = sql_lexer._fast_tokens(text)
        if fast is not None:
            fast_taken += 1
            assert fast == sql_lexer._sqlparse_tokens(text), text
    assert fast_taken > 200  # the fast path is really exercised


@pytest.mark.parametrize("text", [
    "UPDATE t1 SET c1 = 1", "ALTER TABLE t ADD COLUMN e integer", 'ALTER TABLE "user" DROP COLUMN "x"',
    "ALTER TABLE t ADD COLUMN c varchar(50) NOT NULL DEFAULT 'a''b'", "CREATE INDEX ix ON s.t (a, b);",
])
def test_plain_statements_take_the_fast_path(text):
    assert sql_lexer._fast_tokens(text) == sql_lexer._sqlparse_tokens(text)


@pytest.mark.parametrize("text", [
    "UPDATE t SET c = 1 -- note", "SELECT 1.5", "x LIKE 'a'", "a $$ b $$", "SET x = 'a\\'b'", "é", "1abc", "a - 1",
])
def test_other_statements_go_to_sqlparse(text):
    assert sql_lexer._fast_tokens(text) is None
    assert sql_lexer.tokens(text) == sql_lexer._sqlparse_tokens(text)
