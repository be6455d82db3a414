"""A re-runnable expand (statements guarded by what the schema already has) resumes after it stopped.

MariaDB commits each DDL statement, so a run that stops half way leaves the guarded statements'
objects behind and the rerun does not issue them: its statement N is no longer the interrupted
run's statement N.  The rerun pairs statements with the journal by their SQL, in order
(``journal_match``): the applied ones it issues again are skipped, the ones it does not issue are
noted (one line each), the rest run.  A statement edited since (other SQL for an object the
interrupted run changed) is still refused, before anything runs.  Scripts are generated: random
guarded and unguarded columns, the run stopped after a random number of them.  Each run draws fresh
seeds (at collection, from the global ``random``: alike in every xdist worker; the test ids carry
them); ``MP_RESUME_SEED=N`` replays one.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from .expand_project import ExpandProject
from .recovery import dbsync, error_line

MYSQL = pytest.mark.parametrize("backend", ["mysql"], indirect=True)
FAIL = 'op.execute("SELECT no_such_function()")'


def _seeds(count: int) -> list[int]:
    """*count* fresh seeds, or the one ``MP_RESUME_SEED`` names."""
    if os.environ.get("MP_RESUME_SEED"):
        return [int(os.environ["MP_RESUME_SEED"])]
    return [random.randrange(10**6) for _ in range(count)]


GUARD = 'cols = lambda t: [c["name"] for c in sa.inspect(op.get_bind()).get_columns(t)]'


def _statement(table: str, column: str, guarded: bool, type_: str = "sa.Integer") -> str:
    add = f'op.add_column("{table}", sa.Column("{column}", {type_}))'
    return f'if "{column}" not in cols("{table}"):\n    {add}' if guarded else add


def _script(rng: random.Random) -> tuple[list[tuple[str, str, bool]], int]:
    count = rng.randint(2, 6)
    columns = [(rng.choice(["books", "loans"]), f"c{i}", rng.random() < 0.5) for i in range(count)]
    return columns, rng.randint(1, count - 1)


def _body(columns, stop: int | None = None, edit: int | None = None) -> str:
    lines = [GUARD]
    for i, (table, column, guarded) in enumerate(columns):
        if i == stop:
            lines.append(FAIL)
        lines.append(_statement(table, column, guarded, "sa.BigInteger" if i == edit else "sa.Integer"))
    return "\n".join(lines)


def _interrupted(tmp_path, db_url, capsys, columns, stop: int) -> ExpandProject:
    proj = ExpandProject(tmp_path, db_url, _body(columns, stop))
    alembic_command.upgrade(Config(str(proj.ini)), "r1_release1")
    code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
    assert code == 8 and "no_such_function" in error_line(err)
    assert proj.journal() == [(o, "done") for o in range(1, stop + 1)]
    return proj


def _notes(caplog) -> list[str]:
    """The one-line notes (a warning each: stderr when logging is not configured)."""
    return [r.getMessage() for r in caplog.records if "was not issued by this run" in r.getMessage()]


@MYSQL
@pytest.mark.parametrize("seed", _seeds(5))
def test_a_guarded_script_resumes_and_notes_what_it_did_not_issue(tmp_path, db_url, capsys, caplog, seed):
    columns, stop = _script(random.Random(seed))
    proj = _interrupted(tmp_path, db_url, capsys, columns, stop)
    try:
        proj.write_expand(_body(columns))
        code, _, err = dbsync(proj, capsys, "status")
        assert code == 0
        caplog.clear()
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        assert proj.heads() == ["r2_expand"] and proj.journal() == []
        for table in ("books", "loans"):
            assert proj.columns(table)[3 if table == "loans" else 2:] == [c for t, c, _ in columns if t == table]
        notes = _notes(caplog)
        skipped = [column for _, column, guarded in columns[:stop] if guarded]
        assert len(notes) == len(skipped), err
        assert all(f".{column})" in note for note, column in zip(notes, skipped)), notes
    finally:
        proj.engine.dispose()


@MYSQL
@pytest.mark.parametrize("seed", _seeds(3))
def test_an_edited_applied_statement_is_still_refused_before_anything_runs(tmp_path, db_url, capsys, seed):
    rng = random.Random(seed)
    columns, stop = _script(rng)
    edit = rng.randrange(stop)
    proj = _interrupted(tmp_path, db_url, capsys, columns, stop)
    try:
        before = {table: proj.columns(table) for table in ("books", "loans")}
        proj.write_expand(_body(columns, edit=edit).replace(f'if "c{edit}" not in', 'if True or "c" not in'))
        code, out, _ = dbsync(proj, capsys, "status")
        assert "its script changed since, the rerun will refuse" in out or "partly applied" in out
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 2
        line = error_line(err)
        assert f".c{edit})" in line and "the script changed since" in line
        assert {table: proj.columns(table) for table in ("books", "loans")} == before
        assert proj.journal() == [(o, "done") for o in range(1, stop + 1)]
    finally:
        proj.engine.dispose()


@MYSQL
def test_statements_the_interrupted_run_applied_and_the_rerun_drops_are_noted(tmp_path, db_url, capsys, caplog):
    columns = [("books", "c0", False), ("books", "c1", False), ("loans", "c2", False)]
    proj = _interrupted(tmp_path, db_url, capsys, columns, 2)
    try:
        proj.write_expand(_body(columns[:1]))
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, err
        notes = _notes(caplog)
        assert len(notes) == 1 and "statement 2 of the interrupted run (add column books.c1) applied" in notes[0]
        assert proj.columns("books")[2:] == ["c0", "c1"]  # its effect stays
    finally:
        proj.engine.dispose()
