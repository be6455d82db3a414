"""A live sync trigger that no longer fires (disabled, or its body replaced) stops every revision.

``sync_keeper.keeping`` checks every sync-named trigger before each revision (``sync_integrity``):
one not carrying its pair's marker or disabled refuses the revision (exit 4, one line naming the
trigger and the revision) before anything runs.  The damage is done by hand, as an earlier run or
a DBA may have left it; each dialect's ways of silencing a trigger are generated.  And
``policy.sql.dropped_triggers`` sees the statements that do it, so the gate refuses them offline.
"""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from migrations_policy.policy.sql import dropped_triggers
from migrations_policy.window.sync_triggers import sync_trigger_name
from tests.gate.recovery import dbsync, error_line, release1_project

BODY = """
import migrations_policy.sync_triggers
op.add_column("books", sa.Column("title2", sa.String(80)))
op.create_sync_trigger("books", old="title", new="title2")
"""
BASE = sync_trigger_name("books", "title", "title2")
NOOP = {"postgresql": f"CREATE OR REPLACE FUNCTION {BASE}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
        "mysql": "CREATE OR REPLACE TRIGGER {name} BEFORE {event} ON books FOR EACH ROW BEGIN END",
        "sqlite": "DROP TRIGGER {name}\n--\nCREATE TRIGGER {name} AFTER {event} ON books BEGIN SELECT 1; END"}
DAMAGE = {
    "postgresql": [(f"ALTER TABLE books {verb} TRIGGER {target}", BASE) for verb, target in itertools.product(
        ["DISABLE", "ENABLE REPLICA", "ENABLE ALWAYS"], [BASE, "ALL", "USER"]) if not (verb != "DISABLE" and target != BASE)]
    + [(NOOP["postgresql"], BASE)],
    "mysql": [(NOOP["mysql"].format(name=BASE + s, event=e), BASE + s) for s, e in (("_bi", "INSERT"), ("_bu", "UPDATE"))],
    "sqlite": [(NOOP["sqlite"].format(name=BASE + s, event=e), BASE + s)
               for s, e in (("_ai_up", "INSERT"), ("_au_up", "UPDATE"), ("_au_down", "UPDATE"))],
}
R3 = '''
from alembic import op
import sqlalchemy as sa
revision = "r3_expand"
down_revision = "r2_expand"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("books", sa.Column("pages", sa.Integer))


def downgrade():
    pass
'''


def _cases():
    for backend, damages in DAMAGE.items():
        for sql, trigger in damages:
            yield pytest.param(backend, sql, trigger, id=f"{backend}-{sql[:60]}")


@pytest.mark.parametrize("backend,sql,trigger", list(_cases()), indirect=["backend"])
def test_a_silenced_sync_trigger_stops_the_next_revision_before_it_runs(tmp_path, db_url, backend, sql, trigger,
                                                                       capsys):
    proj = release1_project(tmp_path, db_url, BODY)
    try:
        assert dbsync(proj, capsys, "upgrade", "--expand")[0] == 0
        with proj.engine.begin() as conn:
            for statement in sql.split("\n--\n"):
                conn.exec_driver_sql(statement)
        (proj.directory / "migrations/versions/expand/0003_r3.py").write_text(R3)
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 4, err
        line = error_line(err)
        assert f"sync trigger {trigger} " in line and "revision r3_expand not run" in line and "0003_r3.py" in line
        assert proj.heads() == ["r2_expand"] and "pages" not in proj.columns("books")
    finally:
        proj.engine.dispose()


@pytest.mark.parametrize("sql,names", [
    ("ALTER TABLE books DISABLE TRIGGER mp_sync_x", ["mp_sync_x"]),
    ('alter table only public.books enable replica trigger "mp_sync_X"', ["mp_sync_X"]),
    ("ALTER TABLE books ENABLE ALWAYS TRIGGER mp_sync_x", ["mp_sync_x"]),
    ("ALTER TABLE books DISABLE TRIGGER ALL", ["*books"]),
    ("ALTER TABLE books ADD COLUMN c int, DISABLE TRIGGER USER", ["*books"]),
    ("ALTER TABLE books ENABLE TRIGGER mp_sync_x", []),
    ("CREATE OR REPLACE TRIGGER mp_sync_x_bu BEFORE UPDATE ON books FOR EACH ROW BEGIN END", ["mp_sync_x_bu"]),
    ("CREATE OR REPLACE DEFINER=`a`@`%` TRIGGER mp_sync_x_bu BEFORE UPDATE ON books FOR EACH ROW BEGIN END",
     ["mp_sync_x_bu"]),
    ("CREATE OR REPLACE FUNCTION mp_sync_x() RETURNS trigger AS $$ BEGIN RETURN NEW; END $$", ["mp_sync_x"]),
    ("ALTER TRIGGER mp_sync_x ON books RENAME TO y", ["mp_sync_x"]),
    ("ALTER FUNCTION mp_sync_x() RENAME TO y", ["mp_sync_x"]),
    ("CREATE OR REPLACE VIEW v AS SELECT 1", []),
    ("CREATE TRIGGER mp_sync_x BEFORE UPDATE ON books FOR EACH ROW BEGIN END", []),
])
def test_dropped_triggers_sees_every_way_to_silence_a_trigger(sql, names):
    assert dropped_triggers(sql) == names
    assert dropped_triggers(f"SELECT 1; {sql}; SELECT 2") == names
