"""The knowledge base's varchar widening facts, against the real servers.

PostgreSQL 15: ``varchar(n) -> varchar(m > n)`` is catalog-only: the table's and its
index's ``relfilenode`` do not change (a narrowing, for contrast, rewrites both).
MariaDB: the knowledge base's "in place" answer must equal what the server accepts with
``ALGORITHM=NOCOPY`` (no table copy), for seeded random lengths and character sets.
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from alembic.operations import ops

from migrations_policy import policy
from migrations_policy.policy import mysql as mysql_kb

CHARSETS = {"latin1": 1, "utf8mb3": 3, "utf8mb4": 4}


def _widening(n: int, m: int, charset: str | None = None) -> policy.Operation:
    old = sa.String(n, collation=f"{charset}_bin" if charset else None)
    new = sa.String(m, collation=f"{charset}_bin" if charset else None)
    return policy.from_alembic(ops.AlterColumnOp("t", "c", existing_type=old, modify_type=new))[0]


def _relfilenodes(conn) -> tuple[int, int]:
    return tuple(conn.execute(sa.text(
        "SELECT relfilenode FROM pg_class WHERE relname = :name"), {"name": name}).scalar_one()
        for name in ("widened", "widened_c"))


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgresql_widening_rewrites_nothing_and_narrowing_does(db_engine):
    rng = random.Random(15)
    for _ in range(4):
        n = rng.randint(1, 200)
        m = rng.randint(n + 1, 500)
        operation = _widening(n, m)
        verdict = policy.classify(operation, "postgresql")
        assert operation.kind == "widen_varchar" and verdict.phase == "expand" and verdict.effect.safe
        with db_engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS widened"))
            conn.execute(sa.text(f"CREATE TABLE widened (id integer PRIMARY KEY, c varchar({n}))"))
            conn.execute(sa.text("CREATE INDEX widened_c ON widened (c)"))
            conn.execute(sa.text("INSERT INTO widened SELECT g, repeat('x', 1 + g % :n) "
                                 "FROM generate_series(1, 500) g"), {"n": n})
            before = _relfilenodes(conn)
            conn.execute(sa.text(f"ALTER TABLE widened ALTER COLUMN c TYPE varchar({m})"))
            assert _relfilenodes(conn) == before, (n, m)
            conn.execute(sa.text(f"ALTER TABLE widened ALTER COLUMN c TYPE varchar({n})"))  # narrowing
            after = _relfilenodes(conn)
            assert after[0] != before[0] and after[1] != before[1], "a narrowing rewrites table and index"
            assert policy.classify(policy.from_alembic(ops.AlterColumnOp(
                "t", "c", existing_type=sa.String(m), modify_type=sa.String(n)))[0], "postgresql").phase \
                == "multi-step"


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_mariadb_in_place_answer_is_what_the_server_does(db_engine):
    rng = random.Random(10)
    seen = set()
    with db_engine.connect() as conn:
        for _ in range(24):
            charset = rng.choice(sorted(CHARSETS))
            # lengths around the 127 / 255 byte boundaries, where the answer changes
            n = max(1, rng.choice([127, 128, 255, 256, 64, 85, 86]) // CHARSETS[charset] + rng.randint(-2, 2))
            m = n + rng.randint(1, 300 // CHARSETS[charset] + 2)
            expected = mysql_kb.widening_in_place(_widening(n, m, charset))
            verdict = policy.classify(_widening(n, m, charset), "mysql")
            assert verdict.effect.safe == expected and verdict.effect.rewrite == (not expected)
            conn.execute(sa.text("DROP TABLE IF EXISTS widened"))
            conn.execute(sa.text(f"CREATE TABLE widened (id int PRIMARY KEY, c varchar({n}) CHARACTER SET {charset}) "
                                 "ENGINE=InnoDB"))
            conn.execute(sa.text("INSERT INTO widened VALUES (1, 'x'), (2, NULL)"))
            try:
                conn.execute(sa.text(f"ALTER TABLE widened MODIFY c varchar({m}) CHARACTER SET {charset}, "
                                     "ALGORITHM=NOCOPY"))
                in_place = True
            except sa.exc.DBAPIError as exc:
                assert "ALGORITHM" in str(exc.orig), exc
                in_place = False
            assert in_place == expected, (charset, n, m)
            seen.add(expected)
        conn.execute(sa.text("DROP TABLE widened"))
    assert seen == {True, False}, "both answers were exercised"


def test_an_unknown_character_set_must_fit_every_common_one():
    rng = random.Random(3)
    for _ in range(500):
        n = rng.randint(1, 400)
        m = rng.randint(n + 1, 900)
        unknown = mysql_kb.widening_in_place(_widening(n, m))
        assert unknown == all(mysql_kb.widening_in_place(_widening(n, m, c)) for c in CHARSETS)
