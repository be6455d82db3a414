"""A downgrade statement that fires code of the application (a trigger, a rule, an event trigger) is judged.

The inventory example is expanded to release 2 and migrated; release 2 inserts nodes of its own
and a table ``rt5_audit`` (plus ``rt5_keep``, rows no downgrade touches).  Then a trigger of the
application is drawn: its table (``rt5_audit``, a view over it, ``nodes``, a table it chains
through), its timing (BEFORE/AFTER, PostgreSQL row or statement level), its event, its body
(one or two statements deleting release 2's nodes, blanking their names, deleting or rewriting
``rt5_keep``'s rows, or writing a table whose own trigger does), and who defined it: release 2
(left in the database), or the downgrade itself, just before it fires it.  PostgreSQL also
draws a rule (``DO ALSO DELETE``) and an event trigger (fired by the downgrade's own DDL).

Release 2's ``downgrade()`` keeps the example's statements and gains a *firing* statement,
drawn and placed at random (before or after the sync triggers go): an ``INSERT`` of one row
(``op.execute`` text, Core ``sa.insert``, ``op.bulk_insert``, ``exec_driver_sql``, the DB-API
cursor), an ``UPDATE`` of an empty table (PostgreSQL statement triggers fire on zero rows), an
``INSERT`` through a view.  None of these deletes a row itself.

By a random route (``dbsync rollback``, ``--to r1_inventory``, plain ``alembic downgrade``) the
rows must survive: refused (exit 4 for dbsync), one line, naming the revision and the trigger
(rule, event trigger), every row of ``nodes`` and ``rt5_keep`` unchanged; and the way forward
the refusal names (``--force --reason``) finishes the rollback.  A *control* draw puts the
trigger on a table the downgrade does not write: the rollback then finishes unforced, exit 0,
nothing lost (the rule must not refuse what fires nothing of the application's).

``MP_FIRES_TRIGGER_SEED`` replays a draw; ``MP_FIRES_TRIGGER_CASES`` (default 2) draws per test.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest
import sqlalchemy as sa

from ..gate.conftest import ROWS
from ..helpers import forget_example_modules
from .test_release_state import EXPAND_FILE, _alembic, _app, _roll_back

NEW = 9  # nodes release 2 inserts (ids above ROWS)
KEEP = 7  # rows of rt5_keep
REVISION = "r2_meta_display_name_version"


# -- the application's code ---------------------------------------------------------------
def _harm(rng: random.Random, dialect: str) -> list[str]:
    """One or two statements that lose what release 2 wrote, or rows no downgrade touches."""
    pool = [f"DELETE FROM nodes WHERE id > {ROWS + rng.randint(0, NEW - 1)}",
            f"UPDATE nodes SET name = NULL WHERE id > {ROWS}",
            f"UPDATE nodes SET extra = 'gone' WHERE id = {ROWS + rng.randint(1, NEW)}",
            "DELETE FROM rt5_keep",
            f"DELETE FROM rt5_keep WHERE id <= {rng.randint(1, KEEP)}",
            "UPDATE rt5_keep SET v = 'rewritten'"]
    pool.append("INSERT INTO rt5_keep (id, v) VALUES (1, 'replaced') ON CONFLICT (id) DO UPDATE SET v = 'replaced'"
                if dialect == "postgresql" else "REPLACE INTO rt5_keep (id, v) VALUES (1, 'replaced')")
    return rng.sample(pool, rng.randint(1, 2))


def _trigger_ddl(dialect: str, name: str, table: str, timing: str, event: str, body: list[str],
                 level: str = "ROW", instead: bool = False) -> list[str]:
    """CREATE statements of a trigger *name* on *table* running *body*."""
    if dialect == "postgresql":
        returns = "NULL" if level == "STATEMENT" else ("NEW" if event != "DELETE" else "OLD")
        fn = (f"CREATE FUNCTION {name}_fn() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
              + " ".join(s + ";" for s in body) + f" RETURN {returns}; END $f$")
        when = "INSTEAD OF" if instead else timing
        return [fn, f"CREATE TRIGGER {name} {when} {event} ON {table} FOR EACH {level} EXECUTE FUNCTION {name}_fn()"]
    if dialect == "mysql":
        return [f"CREATE TRIGGER {name} {timing} {event} ON {table} FOR EACH ROW BEGIN "
                + " ".join(s + ";" for s in body) + " END"]
    when = "INSTEAD OF" if instead else timing
    return [f"CREATE TRIGGER {name} {when} {event} ON {table} FOR EACH ROW BEGIN "
            + " ".join(s + ";" for s in body) + " END"]


def _release_2(app, rng: random.Random) -> None:
    """Release 2's rows and tables (``rt5_audit`` empty, ``rt5_keep`` with rows, a view)."""
    with app.engine.begin() as conn:
        for i in range(ROWS + 1, ROWS + NEW + 1):
            conn.execute(sa.text("INSERT INTO nodes (id, uuid, display_name, meta) VALUES (:i, :u, :d, :m)"),
                         {"i": i, "u": f"rt5-{i}-{rng.randrange(10**6)}", "d": f"node {i} " + "q" * rng.randint(0, 30),
                          "m": f'{{"k": {i}}}'})
        conn.execute(sa.text("CREATE TABLE rt5_audit (id INTEGER PRIMARY KEY, note VARCHAR(100))"))
        conn.execute(sa.text("CREATE TABLE rt5_chain (id INTEGER PRIMARY KEY, note VARCHAR(100))"))
        conn.execute(sa.text("CREATE TABLE rt5_other (id INTEGER PRIMARY KEY, note VARCHAR(100))"))
        conn.execute(sa.text("CREATE TABLE rt5_keep (id INTEGER PRIMARY KEY, v VARCHAR(100))"))
        for i in range(1, KEEP + 1):
            conn.execute(sa.text("INSERT INTO rt5_keep (id, v) VALUES (:i, :v)"), {"i": i, "v": f"kept {i}"})
        conn.execute(sa.text("CREATE VIEW rt5_view AS SELECT id, note FROM rt5_audit"))


def _draw(dialect: str, rng: random.Random) -> dict:
    """What fires what: the trigger (who defines it, where, its body), and the firing statement."""
    kinds = ["insert", "insert", "chain", "view", "control"]
    if dialect == "postgresql":
        kinds += ["statement_on_empty_update", "rule", "event_trigger"]
    kind = rng.choice(kinds)
    body = _harm(rng, dialect)
    timing = rng.choice(["BEFORE", "AFTER"])
    defined_by = rng.choice(["release 2", "the downgrade"])
    row = rng.randint(1, 10**6)
    senders = ['op.execute("{sql}")', 'op.get_bind().execute(sa.text("{sql}"))',
               'op.get_bind().exec_driver_sql("{sql}")']
    if dialect != "mysql":  # PyMySQL's cursor is a DB-API one too; its paths are the driver watch's
        senders.append('op.get_bind().connection.cursor().execute("{sql}")')
    insert_sql = f"INSERT INTO rt5_audit (id, note) VALUES ({row}, 'downgrade {row}')"
    if kind == "control":  # the plan cannot run what goes to the driver: it refuses that unforced anyway
        senders = senders[:2]
    fire = rng.choice(senders + ["core", "bulk"]) if kind in ("insert", "chain", "control", "rule") else \
        rng.choice(senders)
    if fire == "core":
        firing = (f'op.execute(sa.insert(sa.table("rt5_audit", sa.column("id", sa.Integer), sa.column("note", sa.String)))'
                  f'.values(id={row}, note="core {row}"))')
    elif fire == "bulk":
        firing = (f'op.bulk_insert(sa.table("rt5_audit", sa.column("id", sa.Integer), sa.column("note", sa.String)), '
                  f'[{{"id": {row}, "note": "bulk"}}, {{"id": {row + 1}, "note": "bulk"}}])')
    else:
        firing = fire.format(sql=insert_sql)
    driver = "exec_driver_sql" in firing or ".cursor()" in firing
    ddl: list[str] = []
    name = "rt5_trg"
    if kind in ("insert", "control"):
        ddl = _trigger_ddl(dialect, name, "rt5_audit" if kind == "insert" else "rt5_other", timing, "INSERT", body)
    elif kind == "chain":  # rt5_audit's trigger writes rt5_chain, whose own trigger does the harm
        ddl = _trigger_ddl(dialect, "rt5_chained", "rt5_chain", timing, "INSERT", body) + _trigger_ddl(
            dialect, name, "rt5_audit", rng.choice(["BEFORE", "AFTER"]), "INSERT",
            ["INSERT INTO rt5_chain (id, note) VALUES (NEW.id, NEW.note)"] if dialect != "sqlite" else
            ["INSERT INTO rt5_chain (id, note) VALUES (new.id, new.note)"])
    elif kind == "view":
        view_insert = f"INSERT INTO rt5_view (id, note) VALUES ({row}, 'through the view')"
        firing = rng.choice(senders).format(sql=view_insert)
        driver = "exec_driver_sql" in firing or ".cursor()" in firing
        if dialect == "sqlite":  # a view takes writes only through an INSTEAD OF trigger of its own
            ddl = _trigger_ddl(dialect, name, "rt5_view", "", "INSERT", body, instead=True)
        else:  # an updatable view: the INSERT reaches rt5_audit, and its trigger
            ddl = _trigger_ddl(dialect, name, "rt5_audit", timing, "INSERT", body)
    elif kind == "statement_on_empty_update":
        ddl = _trigger_ddl(dialect, name, "rt5_audit", timing, "UPDATE", body, level="STATEMENT")
        firing = rng.choice(senders).format(sql="UPDATE rt5_audit SET note = 'none' WHERE id < 0")
        driver = "exec_driver_sql" in firing or ".cursor()" in firing
    elif kind == "rule":
        name = "rt5_rule"
        ddl = [f"CREATE RULE rt5_rule AS ON INSERT TO rt5_audit DO ALSO ({'; '.join(body)})"]
    elif kind == "event_trigger":  # fired by the example's own DDL (DROP INDEX, DROP COLUMN ...)
        name = "rt5_evt"
        ddl = [f"CREATE FUNCTION rt5_evt_fn() RETURNS event_trigger LANGUAGE plpgsql AS $f$ BEGIN "
               + " ".join(s + ";" for s in body) + " END $f$",
               "CREATE EVENT TRIGGER rt5_evt ON ddl_command_end EXECUTE FUNCTION rt5_evt_fn()"]
        firing, driver = None, False
        defined_by = "release 2"  # created in the downgrade, it would fire on its own CREATE
    return {"kind": kind, "name": name, "ddl": ddl, "firing": firing, "defined_by": defined_by, "body": body,
            "driver": driver}


def rewrite_downgrade(app, rng: random.Random, draw: dict) -> str:
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    head, _, _ = path.read_text().partition("def downgrade() -> None:\n")
    statements = ['op.drop_sync_trigger("nodes", old="name", new="display_name")',
                  'op.drop_sync_trigger("nodes", old="extra", new="meta")',
                  'if op.get_context().dialect.name in ("postgresql", "mysql"):\n'
                  '    op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")',
                  'op.drop_index("ix_ports_node_id", "ports")',
                  'op.drop_index("ix_ports_version", "ports")\nop.drop_column("ports", "version")',
                  'op.drop_index("ix_nodes_version", "nodes")\nop.drop_column("nodes", "version")',
                  'op.drop_column("nodes", "display_name")', 'op.drop_column("nodes", "meta")']
    if draw["firing"] is not None:
        firing = draw["firing"]
        if draw["defined_by"] == "the downgrade":
            firing = "\n".join(f"op.execute({sql!r})" for sql in draw["ddl"]) + "\n" + firing
        statements.insert(rng.randint(0, len(statements)), firing)
    body = "\n".join(statements)
    path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(body, "    ") + "\n")
    return body


def _written(app) -> dict:
    with app.engine.connect() as conn:
        nodes = conn.execute(sa.text("SELECT id, uuid, name, extra FROM nodes ORDER BY id")).all()
        keep = conn.execute(sa.text("SELECT id, v FROM rt5_keep ORDER BY id")).all()
        return {"nodes": [tuple(str(v) for v in r) for r in nodes], "rt5_keep": [tuple(r) for r in keep]}


def _one_case(tmp_path, db_url, capsys, seed: int) -> None:
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        dialect = app.engine.dialect.name
        draw = _draw(dialect, rng)
        body = rewrite_downgrade(app, rng, draw)
        route = rng.choice(["dbsync rollback", "dbsync rollback --to r1_inventory", "alembic downgrade"])
        about = (f"seed {seed} ({dialect}): {draw['kind']} by {draw['defined_by']}, route {route}, "
                 f"ddl {draw['ddl']}\n{body}")
        print(about)
        forget_example_modules()
        _release_2(app, rng)
        if draw["defined_by"] == "release 2" or draw["firing"] is None:
            with app.engine.begin() as conn:
                for sql in draw["ddl"]:
                    conn.exec_driver_sql(sql)
        written = _written(app)
        capsys.readouterr()
        code, output = _roll_back(app, route, capsys, otherwise=0)
        if draw["kind"] == "control":  # nothing of the application's fires: the rollback goes through
            assert code == 0 and "Traceback" not in output, (about, code, output)
            assert _written(app) == written and app.heads() == ["r1_inventory"], (about, code, output)
            return
        assert _written(app) == written, (about, code, output)
        assert code == 4 and "Traceback" not in output, (about, code, output)
        # dbsync's plan runs each downgrade offline first: a statement sent to the driver cannot run
        # there, so the plan refuses it unforced before anything is judged (operator_guide)
        planned = route.startswith("dbsync") and draw["driver"]
        assert REVISION in output and (draw["name"] in output or planned), (about, output)
        if route.startswith("dbsync"):
            assert output.count("\n") == 1, (about, output)
            forced = app.dbsync(*route.split()[1:], "--force", "--reason", "redteam5: its triggers may run")
            output = capsys.readouterr().err
        else:
            output = _alembic(app, "downgrade", "r1_inventory", force="redteam5: its triggers may run")
            forced = 0 if not output else None
        assert forced == 0 and "Traceback" not in output, (about, forced, output)
        assert app.heads() == ["r1_inventory"], (about, output)
    finally:
        app.engine.dispose()
        forget_example_modules()


CASES = int(os.environ.get("MP_FIRES_TRIGGER_CASES") or 2)
_FIRST = int(os.environ.get("MP_FIRES_TRIGGER_SEED") or random.SystemRandom().randrange(1 << 30))


@pytest.mark.parametrize("case", range(1 if os.environ.get("MP_FIRES_TRIGGER_SEED") else CASES))
def test_a_downgrade_firing_application_code_is_judged(tmp_path, db_url, backend, case, capsys):
    _one_case(tmp_path, db_url, capsys, _FIRST + case)
