"""``dbsync rollback`` over drawn histories of several releases, each release's code writing what it added.

Each case draws (from a printed seed) a chain of three to six expand revisions
(``expand_history.py``: columns nullable or with a server default, indexes, tables with a foreign
key, widened varchars, sync triggers, NOT VALID constraints), cut into two or three releases: each
release is one upgrade run (plain ``alembic upgrade`` to its last revision, through env.py, which
records it).  After each release its code writes: rows in every table there is, values in every
column there is (its own columns too: the new tables, the new columns, ``loans.who`` up to its
new width), and updates some old rows.

Then a drawn sequence of ``dbsync rollback`` steps until release 1, each unforced, forced, or
``--to`` a drawn earlier revision, and must hold:

* refused (exit 4, one line): the schema, the version table and every row and value unchanged;
* done (exit 0): the schema is that of a fresh database migrated straight to the target, and every
  row and every value of every column that stays is as before the step (reverting release N+1
  never touches what release N or release 1 wrote); unforced, what went held nothing (every
  dropped column NULL in every row, every dropped table empty, no narrowed column);
* at the end a new ``dbsync upgrade --expand`` reaches the schema of a fresh database at head.

``MP_ROLLBACK_RELEASES_SEED`` replays a draw; ``MP_ROLLBACK_RELEASES_CASES`` (default 1) per backend.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from migrations_policy.core.errors import EXIT_MIGRATION_FAILED
from migrations_policy.core.framework_tables import is_framework_table

from ..gate.expand_project import ExpandProject
from . import expand_history as history
from .test_rollback_kill import Databases, dbsync, fresh_schema

CASES = int(os.environ.get("MP_ROLLBACK_RELEASES_CASES") or 1)
_FIRST = int(os.environ.get("MP_ROLLBACK_RELEASES_SEED") or random.SystemRandom().randrange(1 << 30))


def _data(engine: sa.Engine) -> dict:
    """{table: {id: {column: value}}} of every application table."""
    found = {}
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        for table in sorted(inspector.get_table_names()):
            if is_framework_table(table) or table == "alembic_version":
                continue
            rows = conn.execute(sa.select(sa.text("*")).select_from(sa.table(table))).mappings().all()
            found[table] = {r["id"]: dict(r) for r in rows}
    return found


def _write(engine: sa.Engine, rng: random.Random) -> None:
    """The code of the release now applied writes every table and column it has."""
    with engine.begin() as conn:
        inspector = sa.inspect(conn)
        books = [r[0] for r in conn.execute(sa.text("SELECT id FROM books"))]
        for table in sorted(inspector.get_table_names()):
            if is_framework_table(table) or table == "alembic_version":
                continue
            columns = [c for c in inspector.get_columns(table) if c["name"] != "id" and not c["name"].startswith("s")]
            known = [r[0] for r in conn.execute(sa.select(sa.column("id")).select_from(sa.table(table)))]
            for _ in range(rng.randint(1, 3)):
                key = max(known + [0]) + 1 + rng.randrange(5)
                known.append(key)
                values = {c["name"]: _value(c, rng, books) for c in columns}
                conn.execute(sa.insert(sa.table(table, sa.column("id"), *(sa.column(n) for n in values)))
                             .values(id=key, **values))
                if table == "books":
                    books.append(key)
            if known and columns:
                key = rng.choice(known)
                column = rng.choice(columns)
                conn.execute(sa.update(sa.table(table, sa.column("id"), sa.column(column["name"])))
                             .where(sa.column("id") == key).values({column["name"]: _value(column, rng, books)}))


def _value(column: dict, rng: random.Random, books: list[int]):
    name, kind = column["name"], column["type"]
    if name == "book_id":
        return rng.choice(books) if books and rng.random() < 0.8 else None
    if isinstance(kind, sa.String):
        if rng.random() < 0.15 and column["nullable"]:
            return None
        return "".join(rng.choices("klmnopqrst", k=rng.randint(1, kind.length or 30)))
    if not column["nullable"] or rng.random() < 0.7:
        return rng.randint(-1000, 10**6)
    return None


def _same(before: dict, after: dict, step: str) -> None:
    """What stays is as it was: no row lost, no value of a column still there changed."""
    for table, rows in after.items():
        assert set(rows) == set(before[table]), f"{step}: rows of {table} changed"
        for key, row in rows.items():
            assert row == {c: before[table][key][c] for c in row if c in before[table][key]}, \
                f"{step}: {table} row {key} is {row}, was {before[table][key]}"


def _one_case(seed: int, backend: str, tmp_path, server_for, capsys) -> None:
    rng = random.Random(seed)
    dbs = Databases(backend, tmp_path, server_for)
    proj = None
    log: list[str] = []
    try:
        url = dbs.new()
        proj = ExpandProject(tmp_path / "project", url, "pass", extra_tables=history.BASE_TABLES)
        revs = history.generate(rng, proj.engine.dialect.name, rng.randint(3, 6))
        history.write(proj.directory / "migrations" / "versions", revs)
        chain = ["r1_release1"] + [r.revision for r in revs]
        cuts = sorted(rng.sample(range(1, len(chain) - 1), rng.randint(1, min(2, len(chain) - 2)))) + [len(chain) - 1]
        where = f"seed {seed} ({backend}): releases end at {[chain[c] for c in cuts]}"
        config = Config(str(proj.ini))
        alembic_command.upgrade(config, "r1_release1")
        _write(proj.engine, rng)
        for cut in cuts:  # each release: one upgrade run, then its code writes
            alembic_command.upgrade(Config(str(proj.ini)), chain[cut])
            _write(proj.engine, rng)
        ends = [0] + cuts  # the positions a plain rollback goes back to, newest last
        position = len(chain) - 1
        while position > 0:
            before_data, before_schema, heads = _data(proj.engine), history.schema(proj.engine), proj.heads()
            how = rng.choice(["unforced", "forced", "to"])
            if how == "to":
                target = rng.randrange(0, position)
                args = ("rollback", "--to", chain[target], "--force", "--reason", "redteam5")
            else:
                target = max(e for e in ends if e < position)
                args = ("rollback",) + (("--force", "--reason", "redteam5") if how == "forced" else ())
            code, _, err = dbsync(proj, capsys, *args)
            log.append(f"{how} {chain[position]} -> {chain[target]}: exit {code}")
            step = f"{where}; {'; '.join(log)}; {err.strip()[:400]}"
            if code == 4:  # refused: nothing changed
                assert how == "unforced", step
                assert len(err.strip().splitlines()) == 1, step
                assert (history.schema(proj.engine), proj.heads(), _data(proj.engine)) == \
                    (before_schema, heads, before_data), step
                continue
            if code == EXIT_MIGRATION_FAILED and how != "unforced" and ("truncated" in err or "too long" in err):
                # forced over a narrowed varchar that holds longer values: the database refuses the
                # ALTER (MariaDB: the revision stays partly reverted, its journal resumes it); nothing
                # that stays may have changed.  The operator shortens the values, and reruns.
                _same(before_data, _data(proj.engine), step)
                with proj.engine.begin() as conn:
                    conn.execute(sa.text(f"UPDATE loans SET who = substr(who, 1, {history.WHO_LENGTH})"))
                before_data = _data(proj.engine)
                code, _, err = dbsync(proj, capsys, *args)
                log.append(f"values shortened, rerun: exit {code}")
                step = f"{where}; {'; '.join(log)}; {err.strip()[:400]}"
            assert code == 0, step
            assert history.schema(proj.engine) == fresh_schema(proj, dbs, chain[target]), step
            after = _data(proj.engine)
            _same(before_data, after, step)
            if how == "unforced":  # nothing that went held a value
                for table, rows in before_data.items():
                    if table not in after:
                        assert not rows, f"{step}: table {table} with {len(rows)} row(s) dropped unforced"
                        continue
                    kept = set(next(iter(after[table].values()), {}))
                    for key, row in rows.items():
                        lost = {c: v for c, v in row.items() if kept and c not in kept and v is not None}
                        assert not lost, f"{step}: {table} row {key} lost {lost} unforced"
            position = target
            ends = [e for e in ends if e < position] + [position]
            if rng.random() < 0.4 and position > 0:  # the release now applied writes again
                _write(proj.engine, rng)
        code, _, err = dbsync(proj, capsys, "upgrade", "--expand")
        assert code == 0, f"{where}; {'; '.join(log)}; {err}"
        assert history.schema(proj.engine) == fresh_schema(proj, dbs, chain[-1]), f"{where}; {'; '.join(log)}"
    finally:
        if proj is not None:
            proj.engine.dispose()
        dbs.drop_all()


@pytest.mark.parametrize("case", range(1 if os.environ.get("MP_ROLLBACK_RELEASES_SEED") else CASES))
@pytest.mark.parametrize("backend", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_rollback_over_drawn_releases_keeps_what_stays(tmp_path, backend, case, server_for, capsys):
    _one_case(_FIRST + case, backend, tmp_path, server_for, capsys)
