"""SQLite: a downgrade that hands a script to sqlite3's ``executescript`` is refused whole, never
left partly reverted.

sqlite3's ``executescript`` first COMMITs the transaction it finds open: the revision's, with every
statement its ``downgrade()`` ran before the script.  When anything after that failed (the script's
own ``DELETE`` refused as rows at risk, a later statement of the revision), alembic rolled back only
what came after the COMMIT: the revision stood partly reverted, its version row unmoved, and SQLite
keeps no journal to resume from, so the rerun failed on what was already gone ("no such index").

Generated: release 2's ``downgrade()`` (the inventory example) gains, at a drawn place among its
statements, an ``executescript`` of drawn statements (harmless ones: a scratch table created and
dropped, a ``SELECT``; or a ``DELETE`` of release 2's rows), sometimes followed later by a statement
that fails; by a drawn route, forced or not.  Must: the run refused (exit 4 from dbsync, alembic's
``FAILED``) with one line naming ``executescript``, no traceback, the schema, the version rows and
every row exactly as before.  Then the way that line names (each statement through ``op.execute``,
the failing one removed, forced when rows go: release 2's, or a scratch table's) reaches ``r1_inventory``.
Seeded: ``MP_SCRIPT_COMMIT_SEED``.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest
import sqlalchemy as sa

from ..gate.conftest import ROWS, App
from ..helpers import EXAMPLE, copy_example, forget_example_modules
from . import expand_history as history
from .test_release_state import EXPAND_FILE, _alembic, _app

CASES = int(os.environ.get("MP_SCRIPT_COMMIT_CASES", "2"))
FAILING = 'op.execute("SELECT missing_column FROM nodes")'


def _draw(rng: random.Random) -> dict:
    script = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randrange(10**4)
        script.append(rng.choice([["SELECT 1"], [f"CREATE TABLE scratch_{n} (a)", f"DROP TABLE scratch_{n}"],
                                  [f"CREATE TABLE keep_{n} (a)", f"INSERT INTO keep_{n} VALUES ({n})",
                                   f"DROP TABLE keep_{n}"]]))
    statements = [s for group in script for s in group]
    deletes = rng.random() < 0.5
    if deletes:
        statements.insert(rng.randint(0, len(statements)), f"DELETE FROM nodes WHERE id > {ROWS}")
    return {"statements": statements, "deletes": deletes, "fails_later": (not deletes) or rng.random() < 0.5,
            "route": rng.choice(["dbsync rollback", "dbsync rollback --to r1_inventory", "alembic downgrade"]),
            "forced": rng.random() < 0.5, "seed": rng.randrange(1 << 30)}


def _downgrade(app, case: dict, scripted: bool) -> str:
    """Release 2's downgrade with the script (*scripted*) or its statements through op.execute."""
    rng = random.Random(case["seed"])
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    head, _, _ = path.read_text().partition("def downgrade() -> None:\n")
    tail = ['op.drop_index("ix_ports_node_id", "ports")',
            'op.drop_index("ix_ports_version", "ports")\nop.drop_column("ports", "version")',
            'op.drop_index("ix_nodes_version", "nodes")\nop.drop_column("nodes", "version")',
            'op.drop_column("nodes", "display_name")', 'op.drop_column("nodes", "meta")']
    at = rng.randint(0, len(tail))
    if scripted:
        script = "".join(f"{s}; " for s in case["statements"])
        sent = f'op.get_bind().connection.driver_connection.executescript("{script}")'
    else:
        sent = "\n".join(f'op.execute("{s}")' for s in case["statements"])
    tail.insert(at, sent)
    if scripted and case["fails_later"]:
        tail.insert(rng.randint(at + 1, len(tail)), FAILING)
    body = "\n".join(['op.drop_sync_trigger("nodes", old="name", new="display_name")',
                      'op.drop_sync_trigger("nodes", old="extra", new="meta")', *tail])
    path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(body, "    ") + "\n")
    forget_example_modules()
    return body


def _release_2_writes(app) -> None:
    with app.engine.begin() as conn:
        for i in range(ROWS + 1, ROWS + 6):
            conn.execute(sa.text("INSERT INTO nodes (id, uuid, display_name, meta) VALUES (:i, :u, :d, '{}')"),
                         {"i": i, "u": f"script-{i}", "d": f"node {i}"})


def _attempt(app, route: str, forced: bool, capsys, alembic: tuple[str, str]) -> tuple[int, str]:
    """Run *route* (``dbsync ...``, or plain alembic's *alembic* verb and target), forced or not: its exit
    code (alembic's refusal counts as 4) and what it said."""
    if route.startswith("dbsync"):
        extra = ("--force", "--reason", "script test") if forced else ()
        code = app.dbsync(*route.split()[1:], *extra)
        return code, capsys.readouterr().err
    output = _alembic(app, *alembic, force="script test" if forced else None)
    return (4 if output else 0), output


def _everything(app) -> tuple:
    with app.engine.connect() as conn:
        rows = {t: sorted(tuple(map(str, r)) for r in conn.execute(sa.select(sa.text("*")).select_from(sa.table(t))))
                for t in ("nodes", "ports", "alembic_version")}
    return history.schema(app.engine), rows


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_downgrade_script_is_refused_whole_never_left_partly_reverted(tmp_path, db_url, backend, capsys):
    seed = int(os.environ.get("MP_SCRIPT_COMMIT_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"MP_SCRIPT_COMMIT_SEED={seed}")
    rng = random.Random(seed)
    for number in range(CASES):
        case = _draw(rng)
        directory = tmp_path / f"case{number}"
        directory.mkdir()
        url = db_url.set(database=str(directory / "db.sqlite"))
        app = _app(directory, url)
        try:
            _release_2_writes(app)
            body = _downgrade(app, case, scripted=True)
            print(f"case {number}: {case}\n{body}")
            before = _everything(app)
            route = case["route"]
            attempts = [case["forced"]]
            if route.startswith("dbsync") and not case["forced"]:
                attempts.append(True)  # the plan cannot see a driver call: refused, "rerun with --force"
            for forced in attempts:
                code, output = _attempt(app, route, forced, capsys, ("downgrade", "r1_inventory"))
                where = f"seed {seed} case {number} {case}, forced {forced}: exit {code}: {output[-600:]}"
                assert _everything(app) == before, f"partly applied: {where}"
                assert code == 4 and "Traceback" not in output, where
                if route.startswith("dbsync"):
                    assert len([line for line in output.splitlines() if line.startswith("dbsync: error:")]) == 1, \
                        where
            assert "executescript" in output, where
            # the way forward: each statement through op.execute (judged), forced when rows may go
            _downgrade(app, case, scripted=False)
            if case["deletes"] or any(st.startswith("INSERT") for st in case["statements"]):  # rows go
                code = app.dbsync("rollback", "--force", "--reason", "script test: release 2 rows may go")
            else:
                code = app.dbsync("rollback")
            assert code == 0, f"{where}\nthen: {capsys.readouterr().err[-600:]}"
            assert app.heads() == ["r1_inventory"], where
        finally:
            app.engine.dispose()
            forget_example_modules()


# -- upgrades ---------------------------------------------------------------------------------
#: The top-level statements release 2's upgrade() starts with (a script goes before or after any).
_ADDS = 4
ORIGINAL_EXPAND = EXAMPLE.joinpath(*EXPAND_FILE)


def _draw_upgrade(rng: random.Random) -> dict:
    statements = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randrange(10**4)
        statements += rng.choice([["SELECT 1"], [f"CREATE TABLE scratch_{n} (a)", f"DROP TABLE scratch_{n}"],
                                  [f"ALTER TABLE ports ADD COLUMN note_{n} VARCHAR(20)"],
                                  [f"CREATE INDEX ix_scratch_{n} ON nodes (uuid)"]])
    return {"statements": statements, "at": rng.randint(0, _ADDS), "fails_later": rng.random() < 0.5,
            "route": rng.choice(["dbsync upgrade --expand", "dbsync upgrade", "alembic upgrade"]),
            "forced": rng.random() < 0.5, "seed": rng.randrange(1 << 30)}


def _upgrade(app, case: dict, scripted: bool) -> str:
    """Release 2's upgrade() with an executescript (*scripted*) or the same statements through
    op.execute, among its first top-level statements (and a failing statement after it)."""
    rng = random.Random(case["seed"])
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    head, marker, rest = path.read_text().partition("def upgrade() -> None:\n")
    lines = rest.split("\n")
    if scripted:
        sent = ['    op.get_bind().connection.driver_connection.executescript("%s")'
                % "".join(f"{s}; " for s in case["statements"])]
    else:
        sent = [f'    op.execute("{s}")' for s in case["statements"]]
    at = case["at"]
    lines[at:at] = sent
    if scripted and case["fails_later"]:
        later = rng.randint(at + len(sent), _ADDS + len(sent))
        lines.insert(later, "    " + FAILING)
    path.write_text(head + marker + "\n".join(lines))
    forget_example_modules()
    return "\n".join(lines[:_ADDS + len(sent) + 1])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_an_upgrade_script_is_refused_whole_never_left_partly_applied(tmp_path, db_url, backend, capsys):
    """The same for ``upgrade()``: release 2's expand with an ``executescript`` of drawn statements
    (scratch tables, an added column, an index) at a drawn place among its first statements, sometimes
    followed by a failing one, by a drawn route, forced or not.  Before: the statements before the
    script committed with it, a later failure left the revision partly applied (version row unmoved,
    nothing to resume from) and the rerun failed ("duplicate column name").  Must: refused (exit 4,
    alembic's FAILED), one line naming ``executescript``, schema and rows as before; then the same
    statements through ``op.execute`` reach release 2."""
    seed = int(os.environ.get("MP_SCRIPT_COMMIT_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"MP_SCRIPT_COMMIT_SEED={seed}")
    rng = random.Random(seed)
    for number in range(CASES):
        case = _draw_upgrade(rng)
        directory = tmp_path / f"up{number}"
        directory.mkdir()
        url = db_url.set(database=str(directory / "db.sqlite"))
        forget_example_modules()
        app = App(copy_example(directory), url)
        app.engine.dispose()
        app.engine = sa.create_engine(url, connect_args={"timeout": 60})
        try:
            app.alembic_upgrade("r1_inventory")
            app.seed_release1()
            body = _upgrade(app, case, scripted=True)
            print(f"case {number}: {case}\n{body}")
            before = _everything(app)
            route, forced = case["route"], case["forced"]
            code, output = _attempt(app, route, forced, capsys, ("upgrade", "expand@head"))
            where = f"seed {seed} case {number} {case}: exit {code}: {output[-600:]}"
            assert _everything(app) == before, f"partly applied: {where}"
            assert code == 4 and "Traceback" not in output and "executescript" in output, where
            if route.startswith("dbsync"):
                assert len([line for line in output.splitlines() if line.startswith("dbsync: error:")]) == 1, where
            # the way forward: the same statements through op.execute
            app.ini.parent.joinpath(*EXPAND_FILE).write_text(ORIGINAL_EXPAND.read_text())
            _upgrade(app, case, scripted=False)
            code = app.dbsync("upgrade", "--expand")
            assert code == 0, f"{where}\nthen: {capsys.readouterr().err[-600:]}"
            assert "r2_meta_display_name_version" in app.heads(), where
        finally:
            app.engine.dispose()
            forget_example_modules()
