"""A type change whose plain copy may fail or change a value, and for which the split knows no
guard, refuses to run until someone writes the conversion.

The split guards what it knows (a shorter string, a smaller integer, text into an integer:
``test_narrowing_copies``).  For any other pair it cannot prove that every value of the old type is
a value of the new one (``String(20)`` -> ``Date``, ``Numeric(10, 2)`` -> ``Numeric(5, 2)``,
``Float`` -> ``Integer``, ``Integer`` -> ``String(3)``), a plain-copy sync trigger would fail release
N's write of a value that does not convert (PostgreSQL, strict MariaDB) or store it changed
(SQLite).  So the generated expand raises first, one line naming the file and line, nothing applied;
a pair it can prove (``Integer`` -> ``BigInteger``, ``String(20)`` -> ``String(40)``, an enum
gaining a value) does not.

``MP_UNCHECKED_CONVERSION_SEEDS`` (default 3) draws per backend; ``..._SEED`` replays one.
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from alembic.util import CommandError

from .conftest import drawn_seeds

SEEDS = drawn_seeds("MP_UNCHECKED_CONVERSION")
UNCHECKED = [("sa.String(20)", "sa.Date()", "2024-01-02"), ("sa.Numeric(10, 2)", "sa.Numeric(5, 2)", 12345.5),
             ("sa.Float()", "sa.Integer()", 1.5), ("sa.Integer()", "sa.String(3)", 12345)]
PROVEN = [("sa.Integer()", "sa.BigInteger()", 7), ("sa.String(20)", "sa.Text()", "x"),
          ("sa.Numeric(5, 2)", "sa.Numeric(10, 2)", 1.5)]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_conversion_the_split_cannot_guard_refuses_to_run(workspace, backend, seed):
    try:
        _attack(workspace, seed)
    except (AssertionError, pytest.fail.Exception) as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_UNCHECKED_CONVERSION_SEED={seed} replays it): {exc}") from exc


def _attack(workspace, seed) -> None:
    rng = random.Random(seed)
    proven = rng.random() < 0.3
    old, new, value = rng.choice(PROVEN if proven else UNCHECKED)
    print(old, "->", new, "proven" if proven else "unchecked")
    table = 'conv = sa.Table("conv", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", {}))\n'
    workspace.upgrade()
    workspace.models(table.format(old))
    workspace.revision("release n")
    workspace.upgrade()
    engine = sa.create_engine(workspace.url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO conv (id, v) VALUES (1, :v)"), {"v": value})
    workspace.models(table.format(new))
    files = workspace.revision("release n plus 1")
    assert "v_new" in files["expand"].read_text(), f"{old} -> {new} is not a type change here"

    def columns():
        with engine.connect() as conn:
            return sorted(c["name"] for c in sa.inspect(conn).get_columns("conv"))

    if proven:
        workspace.upgrade("expand@head")
        assert "v_new" in columns(), f"{old} -> {new}: the expand did not run"
        return
    before = columns()
    with pytest.raises(CommandError) as refused:
        workspace.upgrade("expand@head")
    message = str(refused.value)
    print("refused:", message)
    assert "\n" not in message and "conv.v ->" in message and f"{files['expand'].name}:" in message, message
    assert columns() == before, f"{old} -> {new}: the refused expand applied something"
    engine.dispose()
