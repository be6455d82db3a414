"""SQL is read as the linted dialects' servers read it (red-team F3): nothing a server runs hides behind lexing.

Each case wraps a generated destructive statement (random names, case and spacing) in text that a dialect-blind
lexer misreads -- a backslash that PostgreSQL does not take as an escape, PostgreSQL's ``#`` operator, MySQL's
executable comments, ``--`` glued to a digit, the settings ``NO_BACKSLASH_ESCAPES`` / ``ANSI_QUOTES`` /
``standard_conforming_strings`` -- or in syntax the parser did not know (``ALTER ONLINE TABLE``, ``ALTER TABLE
t *``, ``U&"..."``, several ``RENAME TABLE`` pairs, ``EXECUTE IMMEDIATE``).  ``from_sql`` for that dialect must
find the operation the server runs (the cases were checked on PostgreSQL 15 and MariaDB).
"""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy.policy import model as m
from migrations_policy.policy.sql import from_sql, reading_for

SEED = int(os.environ.get("MP_FUZZ_SEED", random.randrange(1 << 30)))


def _name(r: random.Random) -> str:
    return r.choice("abcdefghij") + "".join(r.choice("abcdefghij_0123") for _ in range(r.randrange(1, 8)))


def _case(r: random.Random, word: str) -> str:
    return "".join(c.upper() if r.random() < 0.5 else c.lower() for c in word)


def _sp(r: random.Random) -> str:
    return r.choice([" ", "  ", "\n", "\t "])


def _unicode_escaped(name: str) -> str:
    return "".join(f"\\{ord(c):04x}" if i % 2 else c for i, c in enumerate(name))


def _drop(r, t, c):
    s = lambda: _sp(r)  # noqa: E731
    return f"{_case(r, 'alter')}{s()}{_case(r, 'table')}{s()}{t}{s()}{_case(r, 'drop')}{s()}{_case(r, 'column')}{s()}{c}"


PG = [
    lambda r, t, c: f"SELECT 'x\\'; {_drop(r, t, c)}; --'",
    lambda r, t, c: f"SELECT 1 # 2; {_drop(r, t, c)}",
    lambda r, t, c: f"SELECT 1 #- 2;\n{_drop(r, t, c)}",
    lambda r, t, c: f"ALTER TABLE {t} * DROP COLUMN {c}",
    lambda r, t, c: f"ALTER TABLE ONLY {t} DROP COLUMN {c}",
    lambda r, t, c: f'ALTER TABLE U&"{_unicode_escaped(t)}" DROP COLUMN U&"{_unicode_escaped(c)}"',
    lambda r, t, c: f'ALTER TABLE {t} DROP COLUMN U&"{_unicode_escaped(c).replace(chr(92), "!")}" UESCAPE \'!\'',
    lambda r, t, c: f"/* outer /* inner */ still a comment */ {_drop(r, t, c)}",
    lambda r, t, c: f"SELECT $q$ ' $q$; {_drop(r, t, c)}",
    lambda r, t, c: f"SELECT E'a\\\\'; {_drop(r, t, c)}; --'",
    lambda r, t, c: f"SELECT 1 ` 2; {_drop(r, t, c)}",
]
MYSQL = [
    lambda r, t, c: f"/*!50000 {_drop(r, t, c)} */",
    lambda r, t, c: f"/*M!100100 {_drop(r, t, c)} */",
    lambda r, t, c: f"/*!{_drop(r, t, c)}*/",
    lambda r, t, c: f"ALTER TABLE {t} /*!50000 DROP COLUMN {c} */",
    lambda r, t, c: f"ALTER ONLINE TABLE {t} DROP COLUMN {c}",
    lambda r, t, c: f"ALTER IGNORE TABLE {t} DROP COLUMN {c}",
    lambda r, t, c: f"SELECT 1--1; {_drop(r, t, c)}",
    lambda r, t, c: f"SELECT 'a\\'; {_drop(r, t, c)}; -- '",
    lambda r, t, c: f'SELECT "a\\"; {_drop(r, t, c)}; -- "',
    lambda r, t, c: f"SELECT `a'`; {_drop(r, t, c)}",
]
DYNAMIC = [
    lambda r, t, c: f"EXECUTE IMMEDIATE '{_drop(r, t, c)}'",
    lambda r, t, c: f"PREPARE s FROM '{_drop(r, t, c)}'; EXECUTE s",
    lambda r, t, c: f"EXECUTE IMMEDIATE CONCAT('ALTER TABLE {t} ', 'DROP COLUMN {c}')",
]


def _found(sql: str, dialect: str, kind: str, **facts) -> bool:
    ops = from_sql(sql, (dialect,))
    return any(op.kind == kind and all(getattr(op, k) == v for k, v in facts.items()) for op in ops)


@pytest.mark.parametrize("dialect, cases", [("postgresql", PG), ("mysql", MYSQL)])
def test_hidden_drops_are_found(dialect, cases):
    r = random.Random(SEED)
    for _ in range(15):
        for index, case in enumerate(cases):
            t, c = _name(r), _name(r)
            sql = case(r, t, c)
            assert _found(sql, dialect, m.DROP_COLUMN, table=t, column=c), (SEED, index, sql, from_sql(sql, (dialect,)))
            with reading_for(dialect):  # how the linter reads what a script executes for that dialect
                assert any(op.kind == m.DROP_COLUMN and op.column == c for op in from_sql(sql)), (SEED, sql)
            assert any(op.kind == m.DROP_COLUMN and op.column == c for op in from_sql(sql)), (SEED, sql)  # all


def test_dynamic_sql_fails_closed():
    r = random.Random(SEED)
    for case in DYNAMIC:
        sql = case(r, _name(r), _name(r))
        assert _found(sql, "mysql", m.DYNAMIC_SQL), (SEED, sql)


def test_renames_and_cascades():
    r = random.Random(SEED)
    for _ in range(20):
        names = [_name(r) for _ in range(2 * r.randrange(1, 5))]
        pairs = ", ".join(f"{a} TO {b}" for a, b in zip(names[::2], names[1::2]))
        tables = {op.table for op in from_sql(f"RENAME TABLE {pairs}", ("mysql",)) if op.kind == m.RENAME_TABLE}
        assert tables == set(names[::2]), (SEED, pairs)
        t, new = _name(r), _name(r)
        for verb in ("RENAME", "RENAME TO", "RENAME AS"):
            assert _found(f"ALTER TABLE {t} {verb} {new}", "mysql", m.RENAME_TABLE, table=t, name=new)
        assert _found(f"ALTER TABLE {t} RENAME {new} TO x", "postgresql", m.RENAME_COLUMN, table=t, column=new)
        for what in ("DOMAIN", "TYPE"):
            assert _found(f"DROP {what} {t} CASCADE", "postgresql", m.DROP_COLUMN, table=m.ANY_TABLE)
            assert not _found(f"DROP {what} {t}", "postgresql", m.DROP_COLUMN)


def test_plain_strings_still_hide_nothing_they_should_not():
    """What no server runs stays hidden: a comment or a string in every reading."""
    for sql in ("SELECT 'ALTER TABLE users DROP COLUMN email'", "-- ALTER TABLE users DROP COLUMN email\nSELECT 1",
                "/* ALTER TABLE users DROP COLUMN email */ SELECT 1", "SELECT $$ ALTER TABLE u DROP COLUMN e $$"):
        for dialect in ("postgresql",) if "$$" in sql else ("postgresql", "mysql", "sqlite"):
            assert not _found(sql, dialect, m.DROP_COLUMN), (dialect, sql)
