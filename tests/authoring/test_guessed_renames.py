"""A GUESSED rename is a guess: generated code must not run it before someone says it is right.

Autogenerate sees a dropped and an added column of one kind (``notes`` Text dropped, ``summary``
Text added) and cannot tell a rename from two unrelated changes.  Run as generated, the guessed
sync triggers carry release N+1's writes to ``summary`` into ``notes`` (release N's data,
overwritten where it was not a rename at all), and the copy lets the contract drop ``notes`` as
"moved".  So the generated expand refuses to run until the guess is confirmed or undone: one line
naming the file and line, nothing applied.  Drawn: the kind (Text, String, Integer/BigInteger,
Boolean), the rows release N wrote, the route (``dbsync``-style ``alembic upgrade`` online, or
``--sql``).  Then the documented edit (confirm: delete the line) lets the same expand run.

``MP_GUESSED_RENAME_SEEDS`` (default 3) draws per backend; ``MP_GUESSED_RENAME_SEED`` replays one.
"""

from __future__ import annotations

import io
import random

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.util import CommandError

from .conftest import confirm_guessed_renames, drawn_seeds

SEEDS = drawn_seeds("MP_GUESSED_RENAME")
KINDS = {"text": ("sa.Text()", "sa.Text()"), "str": ("sa.String(40)", "sa.String(60)"),
         "int": ("sa.Integer()", "sa.BigInteger()"), "bool": ("sa.Boolean()", "sa.Boolean()")}


def _value(rng, kind: str):
    if kind in ("text", "str"):
        return "".join(rng.choice("abcdef") for _ in range(rng.randint(1, 30)))
    if kind == "int":
        return rng.randrange(-10**6, 10**6)
    return rng.random() < 0.5


@pytest.mark.parametrize("seed", SEEDS)
def test_a_guessed_rename_refuses_to_run_until_it_is_confirmed(workspace, backend, seed):
    try:
        _attack(workspace, backend, seed)
    except (AssertionError, pytest.fail.Exception) as exc:
        raise AssertionError(f"{backend} seed {seed} (MP_GUESSED_RENAME_SEED={seed} replays it): {exc}") from exc


def _attack(workspace, backend, seed) -> None:
    rng = random.Random(seed)
    # MariaDB reflects a Boolean as TINYINT: a dropped Boolean and an added one are not one kind there
    kind = rng.choice(sorted(k for k in KINDS if not (k == "bool" and backend == "mysql")))
    offline = rng.random() < 0.3
    drawn = f"{kind}, offline={offline}"
    print(drawn)
    old_type, new_type = KINDS[kind]
    table = 'notes = sa.Table("notes", metadata, sa.Column("id", sa.Integer, primary_key=True), {})\n'
    workspace.upgrade()
    workspace.models(table.format(f'sa.Column("body", {old_type})'))
    workspace.revision("release n")
    workspace.upgrade()
    engine = sa.create_engine(workspace.url)
    t = sa.table("notes", sa.column("id"), sa.column("body"))
    wrote = {key: _value(rng, kind) for key in range(1, rng.randint(2, 8))}
    with engine.begin() as conn:
        for key, value in wrote.items():
            conn.execute(sa.insert(t).values(id=key, body=value))
    workspace.models(table.format(f'sa.Column("summary", {new_type})'))
    files = workspace.revision("release n plus 1")
    expand = files["expand"].read_text()
    assert "GUESSED" in expand, f"{drawn}: not guessed as a rename: {expand}"

    def state():
        with engine.connect() as conn:
            columns = sorted(c["name"] for c in sa.inspect(conn).get_columns("notes"))
            version = sorted(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
            rows = {r[0]: r[1] for r in conn.execute(sa.select(t.c.id, t.c.body))}
        return columns, version, rows

    before = state()
    with pytest.raises(CommandError) as refused:
        if offline:
            command.upgrade(workspace.config, "expand@head", sql=True)
        else:
            command.upgrade(workspace.config, "expand@head")
    message = str(refused.value)
    print("refused:", message)
    assert "\n" not in message and "GUESSED rename notes.body -> summary" in message, f"{drawn}: {message!r}"
    assert f"{files['expand'].name}:" in message, f"{drawn}: the refusal does not name the script's line: {message}"
    assert state() == before, f"{drawn}: the refused expand applied something"

    assert confirm_guessed_renames(files["expand"]) == 1, drawn
    if offline:
        out = io.StringIO()
        config = workspace.config
        config.output_buffer = out
        command.upgrade(config, "expand@head", sql=True)
        assert "summary" in out.getvalue(), f"{drawn}: the confirmed expand wrote no SQL for summary"
    else:
        workspace.upgrade("expand@head")
        with engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("notes")}
        assert {"body", "summary"} <= columns, f"{drawn}: the confirmed expand did not run: {columns}"
    engine.dispose()
