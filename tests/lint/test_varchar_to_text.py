"""``varchar(n)`` -> ``text`` (issue 28, labelled real scripts: airflow 0087, mlflow bda7b8c39065): on PostgreSQL a
binary-coercible change, catalog only (no rewrite, indexes kept) like a varchar widening, so no MP103 in expand;
on MySQL/MariaDB it copies the table (MP103).  A change the other way, or to another type, stays MP103 everywhere."""

from __future__ import annotations

import os
import random

SEED = int(os.environ.get("MP_TEXT_SEED") or random.randrange(10 ** 9))
print(f"test_varchar_to_text: MP_TEXT_SEED={SEED}")

TEXTS = ["sa.Text()", "sa.UnicodeText()", "sa.TEXT()", "sa.Text"]
VARCHARS = ["sa.String({n})", "sa.VARCHAR({n})", "sa.Unicode({n})", "sa.String(length={n})"]


def _alter(rng: random.Random, old: str, new: str) -> str:
    batch = rng.random() < 0.5
    nullable = rng.choice(["", ", existing_nullable=True", ", existing_nullable=False"])
    call = f'alter_column("c", existing_type={old}, type_={new}{nullable})'
    if batch:
        return f'with op.batch_alter_table("t") as batch_op:\n    batch_op.{call}'
    return f'op.{call.replace("alter_column(", "alter_column(" + chr(34) + "t" + chr(34) + ", ", 1)}'


def test_varchar_to_text_is_catalog_only_on_postgresql(lint_body):
    rng = random.Random(SEED)
    for _ in range(4):
        n = rng.choice([1, 50, 200, 255, 256, 5000, 10485760])
        old = rng.choice(VARCHARS + ["sa.String()", "sa.String"]).format(n=n)  # also varchar without a length
        new = rng.choice(TEXTS)
        body = _alter(rng, old, new)
        pg = lint_body(body, "postgresql")
        assert "MP103" not in pg.codes, (SEED, body, pg.json)
        my = lint_body(body, "mysql")
        assert "MP103" in my.codes, (SEED, body, my.json)
        back = _alter(rng, new if not new.endswith("Text") else new + "()", rng.choice(VARCHARS).format(n=n))
        assert "MP103" in lint_body(back, "postgresql").codes, (SEED, back)
        other = _alter(rng, old, rng.choice(["sa.Integer()", "sa.CHAR(10)", "sa.LargeBinary()"]))
        unbounded = _alter(rng, rng.choice(["sa.String()", "sa.String", "sa.VARCHAR()"]), new)
        assert "MP103" not in lint_body(unbounded, "postgresql").codes, (SEED, unbounded)
        assert "MP103" in lint_body(other, "postgresql").codes, (SEED, other)


import pytest  # noqa: E402
import sqlalchemy as sa  # noqa: E402


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgresql_varchar_to_text_keeps_table_and_index_files(db_engine):
    """What the verdict above relies on, on the real server: the table's and its index's ``relfilenode`` stay."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    rng = random.Random(SEED)
    n = rng.randint(1, 300)
    table = sa.Table("widened", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("c", sa.String(n)), sa.Index("widened_c", "c"))
    files = sa.text("SELECT relfilenode FROM pg_class WHERE relname = :name")
    with db_engine.begin() as conn:
        table.create(conn)
        conn.execute(table.insert(), [{"id": i, "c": "x" * (1 + i % n)} for i in range(1, 300)])
        before = [conn.execute(files, {"name": name}).scalar_one() for name in ("widened", "widened_c")]
        Operations(MigrationContext.configure(conn)).alter_column(
            "widened", "c", existing_type=sa.String(n), type_=rng.choice([sa.Text(), sa.UnicodeText()]))
        after = [conn.execute(files, {"name": name}).scalar_one() for name in ("widened", "widened_c")]
    assert after == before, (SEED, n)
