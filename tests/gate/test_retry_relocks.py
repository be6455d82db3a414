"""PostgreSQL: a revision whose statement lost a lock wait inside its transaction is run again
(``lock_timeout.retry_segments``), first locking the tables it lost on; the tables it locks are the
ones that existed when it waited, never one the revision itself creates.

Found by ``test_expand_kill_repeated`` (the fresh-clone CI of session 16): a ``CREATE TABLE n2``
whose foreign key waited for ``books`` (an application transaction held it) gave up; the retry then
began with ``LOCK TABLE n2`` — the table the statement was creating — and failed with
``relation "n2" does not exist`` instead of running the revision again.

Drawn (seed in every assertion message): a revision of two to five operations, at least one of
which waits for ``books`` (a table with a foreign key to it, a foreign key added to it, a column
added to it), mixed with operations on the tables the revision creates; an application
transaction holds ``books`` until the revision's first wait has given up.
"""

from __future__ import annotations

import os
import random
import threading

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from ..helpers import hold_lock, wait_until
from .expand_project import ExpandProject
from .recovery import dbsync

SEEDS = ([int(os.environ["MP_RETRY_RELOCK_SEED"])] if os.environ.get("MP_RETRY_RELOCK_SEED") else
         [random.randrange(1 << 30) for _ in range(int(os.environ.get("MP_RETRY_RELOCK_CASES", "3")))])

#: A session of dbsync waiting for a lock (the holder is idle in its transaction, the watcher runs).
DDL_WAITING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND wait_event_type = 'Lock' AND backend_type = 'client backend'")


def _body(rng: random.Random) -> tuple[list[str], dict]:
    """Operations, and what the schema must hold after them: {table: columns} of the new tables,
    the columns added to books, the foreign keys added."""
    lines, new_tables, books_columns, fks = [], {}, [], []
    waits = False
    n = 0
    while len(lines) < rng.randint(2, 5) or not waits:
        n += 1
        kind = rng.choice(["table_to_books", "table_to_books", "table_to_loans", "column_on_new", "fk_to_books",
                           "index_on_new", "column_on_books"])
        if kind in ("table_to_books", "table_to_loans"):
            parent = "books" if kind == "table_to_books" else "loans"
            name = f"n{n}"
            lines.append(f'op.create_table("{name}", sa.Column("id", sa.Integer, primary_key=True), '
                         f'sa.Column("ref_id", sa.Integer, sa.ForeignKey("{parent}.id")))')
            new_tables[name] = ["id", "ref_id"]
            waits |= parent == "books"
        elif kind == "column_on_books":
            lines.append(f'op.add_column("books", sa.Column("c{n}", sa.Integer))')
            books_columns.append(f"c{n}")
            waits = True
        elif new_tables:
            table = rng.choice(sorted(new_tables))
            if kind == "column_on_new":
                lines.append(f'op.add_column("{table}", sa.Column("b{n}", sa.Integer))')
                new_tables[table].append(f"b{n}")
            elif kind == "fk_to_books":
                lines.append(f'op.add_column("{table}", sa.Column("b{n}", sa.Integer))')
                lines.append(f'op.create_foreign_key("fk{n}", "{table}", "books", ["b{n}"], ["id"])')
                new_tables[table].append(f"b{n}")
                fks.append(f"fk{n}")
                waits = True
            else:
                lines.append(f'op.create_index("ix{n}", "{table}", ["ref_id"])')
    return lines, {"tables": new_tables, "books": books_columns, "fks": fks}


def _release_after_first_give_up(engine: sa.Engine, release: threading.Event) -> threading.Thread:
    def watch():
        if wait_until(engine, DDL_WAITING, seconds=60):  # the revision waits for books ...
            wait_until(engine, DDL_WAITING, done=lambda rows: not rows[0][0], seconds=60)  # ... and gave up
        release.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_retried_revision_relocks_only_tables_that_exist(tmp_path, db_url, capsys, seed):
    rng = random.Random(seed)
    lines, expected = _body(rng)
    where = f"seed={seed}: " + "; ".join(lines)
    proj = ExpandProject(tmp_path, db_url, "\n".join(lines), lock_retries="4")
    try:
        alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
        with proj.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO books (id, title) VALUES (1, 't')"))
        release = threading.Event()
        holder = hold_lock(proj.engine, "UPDATE books SET title = title WHERE id = 1", release=release)
        watcher = _release_after_first_give_up(proj.engine, release)
        try:
            code, out, err = dbsync(proj, capsys, "upgrade", "--expand")
        finally:
            release.set()
            holder.join()
            watcher.join()
        assert code == 0, (where, err)
        assert proj.heads() == ["r2_expand"], where
        assert proj.journal() == [], where
        inspector = sa.inspect(proj.engine)
        for table, columns in expected["tables"].items():
            assert [c["name"] for c in inspector.get_columns(table)] == columns, (where, table)
        books = [c["name"] for c in inspector.get_columns("books")]
        assert set(expected["books"]) <= set(books), (where, books)
        found = {fk["name"] for table in expected["tables"] for fk in inspector.get_foreign_keys(table)}
        assert set(expected["fks"]) <= found, (where, found)
    finally:
        proj.engine.dispose()
