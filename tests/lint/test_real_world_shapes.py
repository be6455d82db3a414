"""Shapes of real alembic histories (neutron, quay, glance, ...) that the offline fakes must carry (issue 13)."""

from __future__ import annotations

import itertools

import pytest

from .conftest import script

PLACEHOLDER = ("object at 0x", "<object", "Harmless", "_UNKNOWN")


def _no_placeholder(run) -> None:
    assert run.code != 3, run.err
    for finding in run.json["findings"]:
        assert not any(p in finding["message"] for p in PLACEHOLDER), finding


NEUTRON_ITERATES_INSPECTOR = '''
insp = sa.inspect(op.get_bind())
for fk in insp.get_foreign_keys("ports"):
    op.drop_constraint(fk["name"], "ports", type_="foreignkey")
for index in insp.get_indexes("ports"):
    op.drop_index(index["name"], table_name="ports")
op.drop_index(insp.get_indexes("ports")[0]["name"], table_name="routers")
'''


def test_iterating_inspector_results_never_reaches_an_op_with_a_placeholder(lint_body):
    run = lint_body(NEUTRON_ITERATES_INSPECTOR, "postgresql")
    _no_placeholder(run)
    assert run.code == 1 and "MP001" in run.codes
    drops = {f["message"].split(" in an")[0] for f in run.findings("MP101")}
    assert {"drop constraint on ports", "drop index on routers"} <= {d.replace("  ", " ") for d in drops} or \
        any("routers" in d for d in drops), drops


def test_bind_can_be_begun_closed_and_has_a_dialect_and_url(lint_body):
    body = '''
bind = op.get_bind()
assert bind.dialect.name in ("postgresql", "mysql", "sqlite")
assert str(bind.url).startswith(bind.dialect.name) and "@" not in str(bind.url)
with bind.begin():
    bind.execute(sa.text("UPDATE users SET a = 1"))
trans = bind.begin()
trans.commit()
bind.close()
op.drop_column("users", "a")
'''
    for dialect in ("postgresql", "mysql", "sqlite"):
        run = lint_body(body, dialect)
        assert run.codes == {"MP101", "MP107"}, run.out


def test_inspection_that_works_offline_is_still_read_for_every_branch(lint_body):
    body = '''
columns = [c["name"] for c in sa.inspect(op.get_bind()).get_columns("users")]
if "legacy" in columns:
    op.drop_column("users", "legacy")
tables = sa.inspect(op.get_bind()).get_table_names()
'''
    run = lint_body(body, "postgresql")
    assert "MP101" in run.codes  # offline the database is empty, but the branch is read from the source
    (warning,) = run.findings("MP001")
    assert warning["line"] == 11 and "inspected the database" in warning["message"]


@pytest.mark.parametrize("call, codes", [
    # asking the mode: only the offline path ran, so every branch is read from source (MP001 says so)
    ("context.is_offline_mode()", {"MP101", "MP001"}),
    ("not context.is_offline_mode()", {"MP101", "MP001"}),
    ("context.get_context().dialect.name == 'postgresql'", {"MP101"}),
    ("context.get_x_argument(as_dictionary=True).get('data') == 'true'", set()),
    ("context.get_tag_argument() is None", {"MP101"}),
])
def test_alembic_context_answers_as_offline_mode(lint_body, call, codes):
    body = f"if {call}:\n    op.drop_column('users', 'c')"
    run = lint_body(body, "postgresql", "expand", "from alembic import context\n")
    assert run.codes == codes, run.out


QUAY = '''"""quay-style: the framework passes op, tables and a tester."""
import sqlalchemy as sa

revision = "q1"
down_revision = None


def upgrade(op, tables, tester):
    op.add_column("repository", sa.Column("kind_id", sa.Integer(), nullable=True))
    op.bulk_insert(tables.repositorykind, [{"name": "image"}, {"name": "application"}])
    tester.populate_column("repository", "kind_id", tester.TestDataType.Foreign("repositorykind"))
    op.execute(tables.repository.update().values(kind_id=1))
    op.drop_column("repository", "legacy")


def downgrade(op, tables, tester):
    op.drop_column("repository", "kind_id")
'''


def test_framework_signature_gets_op_and_harmless_fakes(tmp_path, run_lint):
    path = tmp_path / "quay.py"
    path.write_text(QUAY)
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", "postgresql", path)
    _no_placeholder(run)
    assert run.codes == {"MP101", "MP107"}, run.out
    assert "UPDATE repository" in run.findings("MP107")[0]["message"]


def test_orm_session_and_table_update_are_dml_in_the_source_fallback(lint_body):
    body = '''
rows = op.get_bind().execute(sa.text("SELECT id FROM users")).fetchall()
session = sa.orm.Session(bind=op.get_bind())
session.query(User).filter(User.id > rows[0].id).update({"active": True})
session.query(User).filter_by(name="admin").delete()
users.delete().where(users.c.id == rows[0].id)
op.get_bind().execute(users.update().where(users.c.id == rows[0].id).values(active=False))
other = {}
other.update(rows)
'''
    extra = "class User:\n    pass\n\nusers = None\n"
    run = lint_body(body, "postgresql", "expand", extra)
    _no_placeholder(run)
    lines = sorted(f["line"] for f in run.findings("MP107"))
    assert lines == [17, 18, 19, 20], run.out  # not the dict's update on line 21


METHODS = {  # op method -> (positional form, keyword form, what the finding names)
    "drop_column": ('"users", {u}', 'table_name="users", column_name={u}', "MP101"),
    "drop_index": ('{u}, "users"', 'index_name={u}, table_name="users"', "MP101"),
    "drop_constraint": ('{u}, "users"', 'constraint_name={u}, table_name="users"', "MP101"),
    "drop_table": ("{u}", "table_name={u}", "MP101"),
    "alter_column": ('"users", {u}, nullable=False', 'table_name="users", column_name={u}, nullable=False', "MP104"),
    "create_foreign_key": ('{u}, "users", "orgs", ["o"], ["id"]', 'constraint_name={u}, source_table="users", '
                           'referent_table="orgs", local_cols=["o"], remote_cols=["id"]', "MP110"),
}
UNKNOWNS = ['cols[0]["name"]', "names.pop()", "next(iter(cols))"]


@pytest.mark.parametrize("method, style, unknown",
                         list(itertools.product(sorted(METHODS), ("positional", "keyword"), UNKNOWNS)))
def test_unknown_arguments_from_inspection_keep_the_literal_names(lint_body, method, style, unknown):
    positional, keyword, code = METHODS[method]
    arguments = (positional if style == "positional" else keyword).format(u=unknown)
    body = (f'cols = sa.inspect(op.get_bind()).get_columns("users")\nnames = [c["name"] for c in cols]\n'
            f"op.{method}({arguments})")
    run = lint_body(body, "postgresql")
    _no_placeholder(run)
    assert code in run.codes, run.out
    finding = run.findings(code)[0]
    if method != "drop_table":
        assert "users" in finding["message"], finding


HELPER_MODULE = '''
from alembic import op


def drop_foreign_keys(table, names):
    for name in names:
        op.drop_constraint(name, table, type_="foreignkey")


def rename(table, old, new):
    op.alter_column(table, old, new_column_name=new)
'''


def test_source_fallback_follows_helpers_of_the_project_s_modules(tmp_path, lint_body):
    """neutron-style: the script cannot run offline and calls helpers of an imported project module."""
    (tmp_path / "projhelpers.py").write_text(HELPER_MODULE)
    body = '''
fks = [fk["name"] for fk in sa.inspect(op.get_bind()).get_foreign_keys("ports")]
rows = op.get_bind().execute(sa.text("SELECT 1")).fetchall()
projhelpers.drop_foreign_keys("ports", fks)
projhelpers.rename("ports", rows[0][0], "device")
'''
    run = lint_body(body, "postgresql", "expand", "import projhelpers\n")
    _no_placeholder(run)
    found = {(f["code"], f["line"]) for f in run.json["findings"]}
    assert {("MP101", 14), ("MP102", 15)} <= found, run.out  # at the lines calling the helpers
    assert any("ports" in f["message"] for f in run.findings("MP101"))
