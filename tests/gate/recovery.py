"""What the recovery tests of tests/gate share: a release-1 project whose expand revision is
interrupted half way (a lock holder on ``loans`` makes a statement give up), and dbsync run in
this process with its output captured.

``test_expand_recovery`` and ``test_rollback_recovery`` use it; the ``recovery_project``
fixture (``conftest.py``) is ``release1_project`` with the expand ``BODY``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from migrations_policy import cli

from ..helpers import hold_lock
from .expand_project import ExpandProject

PG_AND_MARIADB = pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)

#: Five statements on each dialect; the fourth is the one a lock holder on ``loans`` blocks.
BODY = """
op.add_column("books", sa.Column("isbn", sa.String(20)))
op.add_column("books", sa.Column("pages", sa.Integer))
if dialect == "postgresql":
    with op.get_context().autocommit_block():
        op.create_index("ix_books_isbn", "books", ["isbn"], postgresql_concurrently=True)
    op.create_foreign_key("fk_loans_book_id", "loans", "books", ["book_id"], ["id"], postgresql_not_valid=True)
else:
    op.create_index("ix_books_isbn", "books", ["isbn"])
    op.add_column("loans", sa.Column("due", sa.Integer))
op.add_column("loans", sa.Column("note", sa.String(40)))
"""


def release1_project(directory: Path, url: sa.URL, body: str = BODY, **options) -> ExpandProject:
    """An ExpandProject at release 1 (``r1_release1`` applied) with two books and a loan."""
    proj = ExpandProject(directory, url, body, **options)
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    with proj.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO books (id, title) VALUES (1, 'a'), (2, 'b')"))
        conn.execute(sa.text("INSERT INTO loans (id, book_id, who) VALUES (1, 1, 'x')"))
    return proj


def hold_loans(engine: sa.Engine, release: threading.Event) -> threading.Thread:
    """An application transaction that keeps a lock on ``loans`` the 4th statement needs, until *release*."""
    statement = "LOCK TABLE loans IN ROW EXCLUSIVE MODE" if engine.dialect.name == "postgresql" \
        else "SELECT count(*) FROM loans"  # PostgreSQL: what an INSERT takes; MariaDB: a metadata lock
    return hold_lock(engine, statement, release=release)


def dbsync(proj: ExpandProject, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.dbsync_main(["-c", str(proj.ini), *args])
    out, err = capsys.readouterr()
    return code, out, err


def fail_at_fourth_statement(proj: ExpandProject, capsys) -> str:
    release = threading.Event()
    holder = hold_loans(proj.engine, release)
    try:
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
    finally:
        release.set()
        holder.join()
    assert code == 8, err
    assert error_line(err).startswith("dbsync: error: gave up waiting for a lock after every retry")
    return err


def error_line(err: str) -> str:
    """The one error line (warnings about retries may come before it), and no traceback."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("dbsync: error:")]
    assert len(errors) == 1, err
    return errors[0]
