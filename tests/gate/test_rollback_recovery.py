"""An interrupted ``dbsync rollback`` resumes: downgrades are journaled like upgrades.

On PostgreSQL (after an ``autocommit_block``) and on MariaDB (every DDL statement
commits) a lock holder makes the third statement of a ``downgrade()`` give up; what
committed before it stays reverted.  ``status`` says how far the downgrade got,
upgrades are refused while the schema is neither release's, and a second
``dbsync rollback`` skips the reverted statements (rerunning them would fail:
``Can't DROP 'pages'``) and reaches the release before.
"""

from __future__ import annotations

import json
import threading

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config
from alembic.util import CommandError

from .expand_project import ExpandProject
from .recovery import PG_AND_MARIADB, dbsync, error_line, fail_at_fourth_statement, hold_loans

BODY = """
op.add_column("books", sa.Column("isbn", sa.String(20)))
op.add_column("books", sa.Column("pages", sa.Integer))
if dialect == "postgresql":
    with op.get_context().autocommit_block():
        op.create_index("ix_books_isbn", "books", ["isbn"], postgresql_concurrently=True)
else:
    op.create_index("ix_books_isbn", "books", ["isbn"])
op.add_column("loans", sa.Column("due", sa.Integer))
op.add_column("loans", sa.Column("note", sa.String(40)))
"""

#: Five statements; the third (the first on ``loans``) is the one the lock holder blocks.
DOWNGRADE = """
dialect = op.get_context().dialect.name
op.drop_column("books", "pages")
if dialect == "postgresql":
    with op.get_context().autocommit_block():
        op.drop_index("ix_books_isbn", table_name="books", postgresql_concurrently=True)
else:
    op.drop_index("ix_books_isbn", table_name="books")
op.drop_column("loans", "note")
op.drop_column("loans", "due")
op.drop_column("books", "isbn")
"""

R3 = '''
from alembic import op
import sqlalchemy as sa

revision = "r3_expand"
down_revision = "r2_expand"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("books", sa.Column("shelf", sa.Integer))


def downgrade():
    op.drop_column("books", "shelf")
'''


@PG_AND_MARIADB
def test_interrupted_rollback_is_reported_blocks_upgrades_and_resumes(tmp_path, db_url, capsys):
    proj = ExpandProject(tmp_path, db_url, BODY, downgrade=DOWNGRADE)
    try:
        alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
        with proj.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO books (id, title) VALUES (1, 'a'), (2, 'b')"))
            conn.execute(sa.text("INSERT INTO loans (id, book_id, who) VALUES (1, 1, 'x')"))
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        assert proj.columns("loans") == ["id", "book_id", "who", "due", "note"]

        release = threading.Event()
        holder = hold_loans(proj.engine, release)
        try:
            code, _, err = dbsync(proj, capsys, "rollback")
        finally:
            release.set()
            holder.join()
        assert code == 8, err
        assert "gave up waiting for a lock" in error_line(err)
        assert proj.heads() == ["r2_expand"]  # the version table still names it
        assert proj.columns("books") == ["id", "title", "isbn"]  # statements 1 and 2 committed
        assert proj.indexes("books") == []
        assert proj.journal() == [(-2, "done"), (-1, "done")]

        code, out, _ = dbsync(proj, capsys, "status")
        assert "revision r2_expand partly reverted: 2 of 5 statements" in out, out
        code, out, _ = dbsync(proj, capsys, "check")
        assert code == 2 and "partly reverted" in out, out
        code, out, _ = dbsync(proj, capsys, "--format", "json", "status")
        assert json.loads(out)["partly_applied"] == [
            {"revision": "r2_expand", "direction": "downgrade", "done": 2, "total": 5, "in_flight": None,
             "script_matches": True}]

        # An upgrade on a schema that is neither release's is refused, and applies nothing: also one
        # that would apply nothing (the partly reverted revision is the head), which would say "at head".
        code, out, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 2, out
        assert "r2_expand is partly reverted" in error_line(err), err
        (proj.directory / "migrations" / "versions" / "expand" / "0003_r3.py").write_text(R3)
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 2, err
        line = error_line(err)
        assert "r2_expand is partly reverted" in line and "rollback" in line, line
        assert proj.heads() == ["r2_expand"] and "shelf" not in proj.columns("books")
        (proj.directory / "migrations" / "versions" / "expand" / "0003_r3.py").unlink()

        code, _, err = dbsync(proj, capsys, "rollback")
        assert code == 0, err
        assert proj.heads() == ["r1_release1"]
        assert proj.columns("books") == ["id", "title"]
        assert proj.columns("loans") == ["id", "book_id", "who"]
        assert proj.journal() == []
        code, out, _ = dbsync(proj, capsys, "status")
        assert "partly" not in out
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")  # and the release can expand again
        assert code == 0, err
        assert proj.columns("loans") == ["id", "book_id", "who", "due", "note"]
    finally:
        proj.engine.dispose()


@PG_AND_MARIADB
def test_rollback_refuses_while_an_expand_is_partly_applied_then_works_once_it_finished(recovery_project, capsys):
    fail_at_fourth_statement(recovery_project, capsys)
    assert recovery_project.heads() == ["r1_release1"] and recovery_project.journal() == [(1, "done"), (2, "done"), (3, "done")]
    code, _, err = dbsync(recovery_project, capsys, "rollback")
    assert code == 4, err
    line = error_line(err)
    assert "r2_expand is partly applied" in line and "dbsync upgrade --expand" in line, line
    assert recovery_project.columns("books") == ["id", "title", "isbn", "pages"]  # nothing touched
    # Plain alembic through env.py is refused the same way, before any step runs.
    with pytest.raises(CommandError, match="r2_expand is partly applied"):
        alembic_command.downgrade(Config(str(recovery_project.ini)), "expand_root")
    assert recovery_project.heads() == ["r1_release1"]
    assert recovery_project.journal() == [(1, "done"), (2, "done"), (3, "done")]

    code, _, err = dbsync(recovery_project, capsys, "upgrade", "--expand")
    assert code == 0, err
    code, _, err = dbsync(recovery_project, capsys, "rollback")
    assert code == 0, err
    assert recovery_project.heads() == ["r1_release1"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sqlite_revision_that_fails_half_way_leaves_nothing_behind_in_either_direction(tmp_path, db_url, capsys):
    """SQLite keeps no journal: a revision must be one transaction, DDL included (Python's sqlite3
    commits each DDL statement on its own unless a BEGIN was sent).  A statement that fails after
    others ran leaves the revision whole, not applied or not reverted, and the rerun works."""
    failing = 'op.execute("SELECT no_such_function()")'
    proj = ExpandProject(tmp_path, db_url, f'op.add_column("books", sa.Column("isbn", sa.String(20)))\n{failing}',
                         downgrade='op.drop_column("books", "isbn")')
    try:
        alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 8 and "no_such_function" in error_line(err)
        assert proj.heads() == ["r1_release1"] and proj.columns("books") == ["id", "title"]

        proj.write_expand('op.add_column("books", sa.Column("isbn", sa.String(20)))',
                          downgrade=f'op.drop_column("books", "isbn")\n{failing}')
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        code, _, err = dbsync(proj, capsys, "rollback", "--force", "--reason", "recovery test")
        assert code == 8 and "no_such_function" in error_line(err)
        assert proj.heads() == ["r2_expand"] and proj.columns("books") == ["id", "title", "isbn"]

        proj.write_expand('op.add_column("books", sa.Column("isbn", sa.String(20)))',
                          downgrade='op.drop_column("books", "isbn")')
        code, _, err = dbsync(proj, capsys, "rollback", "--force", "--reason", "recovery test")
        assert code == 0, err
        assert proj.heads() == ["r1_release1"] and proj.columns("books") == ["id", "title"]
    finally:
        proj.engine.dispose()
