"""A failed expand is always recoverable: the statement journal, resume, and the INVALID index.

On PostgreSQL and MariaDB a real lock holder makes a statement in the middle of
an expand revision give up; what committed before it stays, ``status`` / ``check``
say exactly how much, and a rerun (``dbsync upgrade --expand`` or plain
``alembic upgrade``) resumes after it and reaches the head with every object once.
"""

from __future__ import annotations

import json
import threading

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from ..helpers import hold_lock, wait_until
from .expand_project import ExpandProject
from .recovery import BODY, PG_AND_MARIADB, dbsync, error_line, fail_at_fourth_statement


def expanded_once(proj: ExpandProject) -> None:
    assert proj.heads() == ["r2_expand"]
    assert proj.columns("books") == ["id", "title", "isbn", "pages"]
    loans = ["id", "book_id", "who", "note"] if proj.engine.dialect.name == "postgresql" \
        else ["id", "book_id", "who", "due", "note"]
    assert proj.columns("loans") == loans
    assert proj.indexes("books") == ["ix_books_isbn"]
    if proj.engine.dialect.name == "postgresql":
        fks = sa.inspect(proj.engine).get_foreign_keys("loans")
        assert [fk["name"] for fk in fks] == ["fk_loans_book_id"]
    assert proj.journal() == []  # cleared with the version


@PG_AND_MARIADB
@pytest.mark.parametrize("rerun", ["dbsync", "alembic"])
def test_lock_give_up_mid_revision_then_status_says_how_far_and_rerun_resumes(recovery_project, capsys, rerun):
    fail_at_fourth_statement(recovery_project, capsys)
    assert recovery_project.heads() == ["r1_release1"]
    assert recovery_project.columns("books") == ["id", "title", "isbn", "pages"]  # committed before the give-up
    assert recovery_project.journal() == [(1, "done"), (2, "done"), (3, "done")]

    code, out, _ = dbsync(recovery_project, capsys, "status")
    assert code == 0
    assert "revision r2_expand partly applied: 3 of 5 statements" in out
    code, out, _ = dbsync(recovery_project, capsys, "--format", "json", "status")
    partial = json.loads(out)["partly_applied"]
    assert partial == [{"revision": "r2_expand", "direction": "upgrade", "done": 3, "total": 5, "in_flight": None,
                        "script_matches": True}]
    code, out, _ = dbsync(recovery_project, capsys, "check")
    assert code == 3
    assert "run dbsync upgrade --expand" in out and "3 of 5 statements" in out

    if rerun == "dbsync":
        code, out, err = dbsync(recovery_project, capsys, "upgrade", "--expand")
        assert code == 0, err
    else:
        alembic_command.upgrade(Config(str(recovery_project.ini)), "expand@heads")
    expanded_once(recovery_project)
    code, out, _ = dbsync(recovery_project, capsys, "status")
    assert "partly applied" not in out


@PG_AND_MARIADB
def test_an_edited_script_is_refused_in_one_line_then_the_original_resumes(recovery_project, capsys):
    fail_at_fourth_statement(recovery_project, capsys)
    recovery_project.write_expand(BODY.replace('sa.Column("pages", sa.Integer)', 'sa.Column("pages", sa.BigInteger)'))
    code, out, _ = dbsync(recovery_project, capsys, "status")
    assert "3 of 5 statements" in out and "its script changed since, the rerun will refuse" in out

    code, _, err = dbsync(recovery_project, capsys, "upgrade", "--expand")
    assert code == 2
    line = error_line(err)
    assert "statement 2" in line and "the script changed since" in line
    assert recovery_project.heads() == ["r1_release1"]
    assert recovery_project.journal() == [(1, "done"), (2, "done"), (3, "done")]  # nothing more applied or forgotten

    recovery_project.write_expand(BODY)
    code, _, err = dbsync(recovery_project, capsys, "upgrade", "--expand")
    assert code == 0, err
    expanded_once(recovery_project)


@PG_AND_MARIADB
def test_a_script_shortened_below_what_was_applied_resumes_and_notes_each_dropped_statement(
        recovery_project, capsys, caplog):
    """The applied statements the rerun no longer issues are one note each, not an error (a
    re-runnable script issues fewer on its rerun: journal_match); their objects stay."""
    fail_at_fourth_statement(recovery_project, capsys)
    recovery_project.write_expand('op.add_column("books", sa.Column("isbn", sa.String(20)))')
    caplog.clear()
    code, _, err = dbsync(recovery_project, capsys, "upgrade", "--expand")
    assert code == 0, err
    notes = [r.getMessage() for r in caplog.records if "was not issued by this run" in r.getMessage()]
    assert len(notes) == 2 and "statement 2 of the interrupted run (add column books.pages) applied" in notes[0]
    assert recovery_project.heads() == ["r2_expand"] and recovery_project.columns("books")[-1] == "pages"


# -- PostgreSQL: CREATE INDEX CONCURRENTLY that gives up leaves an INVALID index ------------------
CONCURRENT_BODY = """
op.add_column("books", sa.Column("isbn", sa.String(20)))
with op.get_context().autocommit_block():
    op.create_index("ix_books_isbn", "books", ["isbn"], postgresql_concurrently=True)
op.add_column("books", sa.Column("pages", sa.Integer))
"""


#: The sessions running CREATE INDEX CONCURRENTLY while they wait for a lock (the snapshot holder's
#: virtual transaction id), with when each attempt started.
CONCURRENT_INDEX_WAITS = ("SELECT pid, query_start FROM pg_stat_activity WHERE datname = current_database() "
                          "AND wait_event_type = 'Lock' AND query ILIKE '%CREATE INDEX CONCURRENTLY%'")


def hold_snapshot(engine: sa.Engine, release: threading.Event) -> threading.Thread:
    """A REPEATABLE READ transaction until *release*: CREATE INDEX CONCURRENTLY waits for its snapshot."""
    return hold_lock(engine, "SELECT count(*) FROM loans", release=release, isolation_level="REPEATABLE READ")


def release_at_second_attempt(engine: sa.Engine, release: threading.Event) -> threading.Thread:
    """Set *release* once a second attempt of the index build is seen waiting (so the first one gave
    up, whatever the machine's load), or after a minute."""
    attempts: set[tuple] = set()

    def second_attempt(rows) -> bool:
        attempts.update(map(tuple, rows))
        return len(attempts) >= 2 or release.is_set()

    def watch():
        wait_until(engine, CONCURRENT_INDEX_WAITS, second_attempt)
        release.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def index_validity(engine: sa.Engine) -> list[bool]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = 'ix_books_isbn'"))]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_concurrent_index_gives_up_then_rerun_drops_the_invalid_index_and_reaches_head(tmp_path, db_url, capsys):
    proj = ExpandProject(tmp_path, db_url, CONCURRENT_BODY, lock_retries="0")
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    release = threading.Event()
    holder = hold_snapshot(proj.engine, release)
    try:
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
    finally:
        release.set()
        holder.join()
    assert code == 8, err
    assert index_validity(proj.engine) == [False]  # what the give-up left behind
    assert proj.journal() == [(1, "done"), (2, "running")]  # so the build is neither applied nor not
    code, out, _ = dbsync(proj, capsys, "status")
    assert "revision r2_expand partly applied: 1 of 3 statements; statement 2 (create index" in out, out

    code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
    assert code == 0, err
    assert proj.heads() == ["r2_expand"]
    assert index_validity(proj.engine) == [True]
    assert proj.columns("books") == ["id", "title", "isbn", "pages"]
    proj.engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_concurrent_index_retry_within_the_run_rebuilds_the_invalid_index(tmp_path, db_url, capsys):
    proj = ExpandProject(tmp_path, db_url, CONCURRENT_BODY, lock_retries="4")
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    release = threading.Event()
    holder = hold_snapshot(proj.engine, release)
    watcher = release_at_second_attempt(proj.engine, release)
    try:
        code, out, err = dbsync(proj, capsys, "upgrade", "--expand")
    finally:
        release.set()
        holder.join()
        watcher.join()
    assert code == 0, err
    assert "gave up waiting for a lock and were retried" in out
    assert proj.heads() == ["r2_expand"]
    assert index_validity(proj.engine) == [True]
    proj.engine.dispose()


# -- deadlock victims are retried like lock timeouts ----------------------------------------------
#: The revision's UPDATE waiting for a row lock the application holds.
REVISION_WAITS_FOR_A_ROW = ("SELECT count(*) FROM information_schema.INNODB_TRX "
                            "WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE 'UPDATE books%'")


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_a_deadlock_victim_statement_is_retried_and_the_application_commits(tmp_path, db_url, capsys, caplog):
    """InnoDB picks the lighter transaction as the victim: the revision's one-statement UPDATE, caught
    in a cycle with an application transaction that changed many rows.  Retried, it succeeds."""
    proj = ExpandProject(tmp_path, db_url, 'op.execute("UPDATE books SET title = \'r2\' WHERE id IN (1, 2)")',
                         lock_retries="3", lock_timeout="5")
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    with proj.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO books (id, title) VALUES (1, 'a'), (2, 'b')"))
        conn.execute(sa.text("INSERT INTO loans (id, book_id, who) VALUES " +
                             ", ".join(f"({i}, 1, 'x')" for i in range(1, 301))))
    ready, app_error, waited = threading.Event(), [], []

    def application():
        with proj.engine.connect() as conn:
            conn.execute(sa.text("UPDATE loans SET who = 'app'"))  # a heavy transaction
            conn.execute(sa.text("UPDATE books SET title = 'app' WHERE id = 2"))
            ready.set()
            # the revision now holds row 1 and waits for row 2; InnoDB refreshes INNODB_TRX only
            # when it was not read for 0.1 s, so a faster poll would read a stale table forever
            waited.append(wait_until(proj.engine, REVISION_WAITS_FOR_A_ROW, interval=0.25))
            try:
                conn.execute(sa.text("UPDATE books SET title = 'app' WHERE id = 1"))
                conn.commit()
            except sa.exc.DBAPIError as exc:
                app_error.append(exc)

    thread = threading.Thread(target=application, daemon=True)
    thread.start()
    assert ready.wait(10)
    with caplog.at_level("WARNING", logger="migrations_policy.expand.lock_timeout"):
        code, out, err = dbsync(proj, capsys, "upgrade", "--expand")
    thread.join()
    assert waited == [True], "the revision's UPDATE was never seen waiting for the application's row lock"
    assert app_error == []
    assert code == 0, err
    assert "chosen as a deadlock victim" in caplog.text
    assert "1 statement(s) gave up waiting for a lock and were retried" in out
    with proj.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT title FROM books ORDER BY id")).scalars().all() == ["r2", "r2"]
    assert proj.heads() == ["r2_expand"]
    proj.engine.dispose()


@PG_AND_MARIADB
def test_stamping_a_partly_applied_revision_forgets_its_journal(recovery_project, capsys):
    """Whatever moves the version (here a stamp after a repair by hand) makes the entries obsolete: a
    later downgrade and upgrade must run every statement again, not "resume"."""
    fail_at_fourth_statement(recovery_project, capsys)
    alembic_command.stamp(Config(str(recovery_project.ini)), "r2_expand")
    assert recovery_project.journal() == []
    code, out, _ = dbsync(recovery_project, capsys, "status")
    assert "partly applied" not in out



@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_a_trigger_statement_that_was_running_when_the_run_died_counts_as_done_on_resume(tmp_path, db_url, capsys):
    """MariaDB: a run killed while ``CREATE TRIGGER`` (a sync trigger) or ``DROP TRIGGER`` waited for
    its lock leaves the statement *running* in the journal, and the server may finish it after the
    client died.  The rerun must take "trigger already exists" (1359) / "does not exist" (1360) as
    applied, like a duplicate column; it failed on them, every time.  The state is made as such a
    kill leaves it: a later statement fails, then the trigger statement's entry is set back to running."""
    from migrations_policy.window.sync_triggers import sync_trigger_name

    trigger = sync_trigger_name("books", "title", "label")
    fail = 'op.execute("SELECT no_such_function()")'
    up = ('import migrations_policy.window.sync_triggers\n'
          'op.add_column("books", sa.Column("label", sa.String(80)))\n'
          'op.create_sync_trigger("books", old="title", new="label")')  # statement 5: CREATE TRIGGER ..._bu
    down = (f'op.execute("DROP TRIGGER {trigger}_bi")\nop.execute("DROP TRIGGER {trigger}_bu")\n'
            'op.drop_column("books", "label")')
    proj = ExpandProject(tmp_path, db_url, f"{up}\n{fail}", downgrade=down)

    def interrupted_inside(ordinal: int) -> None:
        with proj.engine.begin() as conn:
            conn.execute(sa.text("UPDATE migrations_policy_statements SET state = 'running' WHERE ordinal = :o"),
                         {"o": ordinal})

    try:
        alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 8 and "no_such_function" in error_line(err)
        assert proj.journal() == [(o, "done") for o in range(1, 6)]
        interrupted_inside(5)
        proj.write_expand(up, downgrade=down.replace("\nop.drop_column", f"\n{fail}\nop.drop_column"))
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        assert proj.heads() == ["r2_expand"] and proj.journal() == []

        code, _, err = dbsync(proj, capsys, "rollback", "--force", "--reason", "recovery test")
        assert code == 8 and "no_such_function" in error_line(err)
        assert proj.journal() == [(-2, "done"), (-1, "done")]
        interrupted_inside(-2)
        proj.write_expand(up, downgrade=down)
        code, _, err = dbsync(proj, capsys, "rollback", "--force", "--reason", "recovery test")
        assert code == 0, err
        assert proj.heads() == ["r1_release1"] and proj.columns("books") == ["id", "title"]
    finally:
        proj.engine.dispose()
