"""Scripts that cannot run offline: AST fallback + warning MP001 (and --url on real servers)."""

from __future__ import annotations

import sqlalchemy as sa

from .conftest import script

REFLECTING = '''
insp = sa.inspect(op.get_bind())
columns = [c["name"] for c in insp.get_columns("users")]
if "legacy" in columns:
    op.drop_column("users", "legacy")
with op.batch_alter_table("users") as batch_op:
    batch_op.alter_column("name", type_=sa.String(200))
for table in ("a", "b"):
    op.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4")
op.add_column("users", sa.Column("nick", sa.String(20)))
'''

READS_ROWS = '''
bind = op.get_bind()
rows = bind.execute(sa.text("SELECT id FROM users")).fetchall()
for row in rows:
    bind.execute(sa.text("UPDATE users SET a = 1 WHERE id = :id"), {"id": row.id})
_helper()
'''

HELPER = '''
def _helper():
    op.drop_column("users", "old")

'''


def test_reflecting_script_falls_back_to_source(lint_body):
    run = lint_body(REFLECTING, "mysql")
    assert run.code == 1
    (warning,) = run.findings("MP001")
    assert warning["severity"] == "warning" and warning["line"] == 11
    assert "inspected the database" in warning["message"] and "--url" in warning["message"]
    assert {"MP101", "MP103"} <= run.codes
    tables = {f["message"].split(" in an")[0] for f in run.findings("MP103")}
    assert {"convert charset a", "convert charset b", "alter type users.name"} <= tables


def test_reading_rows_falls_back_and_follows_helpers(lint_body):
    run = lint_body(READS_ROWS, "postgresql", "expand", HELPER)
    assert "MP001" in run.codes and "not available offline" in run.findings("MP001")[0]["message"]
    assert {"MP101", "MP107"} <= run.codes  # the UPDATE in the loop body and the helper's drop


def test_fallback_warning_alone_is_exit_0(lint_body):
    run = lint_body('insp = sa.inspect(op.get_bind())\nop.add_column("u", sa.Column("n", sa.String(5)))', "postgresql")
    assert run.codes == {"MP001"} and run.code == 0


def test_unknown_arguments_are_read_from_literals(lint_body):
    body = 'cols = sa.inspect(op.get_bind()).get_columns("users")\nop.drop_column("users", cols[0]["name"])'
    run = lint_body(body, "postgresql")
    assert "MP101" in run.codes and "read from literals only" in run.findings("MP001")[0]["message"]


def _scratch_url(backend, db_url):
    return db_url.render_as_string(hide_password=False)


def test_url_runs_upgrade_for_real_and_rolls_back(backend, db_url, tmp_path, run_lint):
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE users (id INTEGER PRIMARY KEY, legacy INTEGER, name VARCHAR(20))"))
    path = tmp_path / "reflect.py"
    path.write_text(script(REFLECTING.replace("op.execute(f\"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4\")", "pass")))
    dialect = "mysql" if backend == "mysql" else backend
    run = run_lint("--format", "json", "--phase", "expand", "--dialect", dialect, "--url", _scratch_url(backend, db_url), path)
    assert "MP001" not in run.codes, run.out
    assert "MP101" in run.codes  # the column exists in the scratch database: the branch ran
    assert all(f["dialect"] == dialect for f in run.json["findings"])
    columns = {c["name"] for c in sa.inspect(engine).get_columns("users")}
    engine.dispose()
    if backend != "mysql":  # MySQL/MariaDB commit DDL implicitly: there --url must be a throwaway database
        assert "legacy" in columns and "nick" not in columns


def test_url_unreachable_is_one_line_with_masked_password(tmp_path, run_lint):
    path = tmp_path / "r.py"
    path.write_text(script("insp = sa.inspect(op.get_bind())"))
    run = run_lint("--url", "postgresql+psycopg://u:secret@127.0.0.1:1/x", path)
    assert run.code == 2 and "secret" not in run.err and "***" in run.err
    assert len(run.err.strip().splitlines()) == 1
