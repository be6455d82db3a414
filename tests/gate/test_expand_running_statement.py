"""A statement the journal left *running* (the run died inside it) is judged by the database's state.

On MariaDB the server finishes a DDL statement whose client was SIGKILLed while it waited for a
lock.  The rerun must count it as applied when what it creates (or renames to) is there, whatever
the server answers when it is run again: a foreign key gives errno 1005/121 ("Duplicate key on write
or update"), a procedure 1304, a rename 1054 (unknown column).  When the database says it did not
apply, the rerun runs it; and a rerun that fails leaves the row *running*, never forgets it.

The state is made as such a kill leaves it: a later statement fails (the statements before it are
done), then the statement under test is set back to *running*, applied or undone by hand.
"""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from .expand_project import ExpandProject
from .recovery import dbsync, error_line

MYSQL = pytest.mark.parametrize("backend", ["mysql"], indirect=True)
FAIL = 'op.execute("SELECT no_such_function()")'
PREFIX = ('op.create_table("tags", sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.String(40)))\n'
          'op.add_column("books", sa.Column("isbn", sa.String(20)))')

#: kind -> (the statement, SQL that undoes it, what shows it applied)
CASES = {
    "foreign key": ('op.create_foreign_key("fk_loans_book_id", "loans", "books", ["book_id"], ["id"])',
                    "ALTER TABLE loans DROP FOREIGN KEY fk_loans_book_id",
                    lambda i, c: "fk_loans_book_id" in [fk["name"] for fk in i.get_foreign_keys("loans")]),
    "procedure": ('op.execute("CREATE PROCEDURE mp_touch() BEGIN SELECT 1; END")', "DROP PROCEDURE mp_touch",
                  lambda i, c: c.execute(sa.text("SELECT count(*) FROM information_schema.routines WHERE "
                                                 "routine_schema = DATABASE() AND routine_name = 'mp_touch'"))
                  .scalar() == 1),
    "rename column": ('op.execute("ALTER TABLE tags RENAME COLUMN label TO name")',
                      "ALTER TABLE tags RENAME COLUMN name TO label",
                      lambda i, c: [col["name"] for col in i.get_columns("tags")] == ["id", "name"]),
    "change column": ('op.execute("ALTER TABLE tags CHANGE COLUMN label name VARCHAR(60)")',
                      "ALTER TABLE tags CHANGE COLUMN name label VARCHAR(40)",
                      lambda i, c: [col["name"] for col in i.get_columns("tags")] == ["id", "name"]),
    "add column": ('op.add_column("loans", sa.Column("note", sa.String(40)))', "ALTER TABLE loans DROP COLUMN note",
                   lambda i, c: "note" in [col["name"] for col in i.get_columns("loans")]),
}


def _interrupted(tmp_path, db_url, capsys, statement: str) -> ExpandProject:
    """r2_expand stopped after *statement* (its last statement, number 3) committed; its row set back to running."""
    proj = ExpandProject(tmp_path, db_url, f"{PREFIX}\n{statement}\n{FAIL}")
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
    assert code == 8 and "no_such_function" in error_line(err)
    assert proj.journal() == [(1, "done"), (2, "done"), (3, "done")]
    with proj.engine.begin() as conn:
        conn.execute(sa.text("UPDATE migrations_policy_statements SET state = 'running' WHERE ordinal = 3"))
    proj.write_expand(f"{PREFIX}\n{statement}")
    return proj


def _shows(proj: ExpandProject, kind: str) -> bool:
    with proj.engine.connect() as conn:
        return CASES[kind][2](sa.inspect(conn), conn)


@MYSQL
@pytest.mark.parametrize("kind,applied", list(itertools.product(CASES, [True, False])))
def test_a_running_statement_counts_as_applied_exactly_when_the_database_has_its_effect(
        tmp_path, db_url, capsys, kind, applied):
    statement, undo, _ = CASES[kind]
    proj = _interrupted(tmp_path, db_url, capsys, statement)
    try:
        if not applied:  # the server never got to it
            with proj.engine.begin() as conn:
                conn.exec_driver_sql(undo)
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        assert proj.heads() == ["r2_expand"] and proj.journal() == []
        assert _shows(proj, kind)
    finally:
        proj.engine.dispose()


@MYSQL
def test_a_failed_rerun_of_a_running_statement_keeps_it_running(tmp_path, db_url, capsys):
    """Neither applied nor not (the column was renamed to a third name by hand): the rerun fails in
    one line, and the journal still says the statement may or may not be applied."""
    proj = _interrupted(tmp_path, db_url, capsys, CASES["rename column"][0])
    try:
        with proj.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE tags RENAME COLUMN name TO other")
        for _ in range(2):
            code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
            assert code == 8 and "Unknown column" in error_line(err)
            assert proj.journal() == [(1, "done"), (2, "done"), (3, "running")]
        code, out, _ = dbsync(proj, capsys, "status")
        assert "statement 3 (" in out and "may or may not be applied" in out
    finally:
        proj.engine.dispose()
