"""A downgrade that deletes or rewrites rows release N+1 wrote is judged like one that drops them.

The inventory example is expanded to release 2 and migrated; release 2 then inserts nodes of its
own (their names and display names in step through the sync trigger, so dropping ``display_name``
and ``meta`` loses nothing) and, on PostgreSQL, may fill a column of an enum type it created.
Release 2's ``downgrade()`` keeps the example's statements and gains one more, drawn per dialect
and placed at random: a ``DELETE`` of release 2's nodes (``op.execute`` text or Core, a
data-modifying ``WITH``, ``exec_driver_sql``, the DB-API cursor, MariaDB's multi-table form), an
``UPDATE`` that blanks their names, a ``TRUNCATE``, ``DROP TYPE ... CASCADE`` (which takes the
column of that type with it), or a routine that deletes them, run by ``CALL`` or from a query
(created by the downgrade, or left in the database by release 2).  None of these is a drop of a named column or table, and each
destroys what release 2 wrote.  By a random route (``dbsync rollback``, ``dbsync rollback --to
r1_inventory``, plain ``alembic downgrade``), the rows must survive: the run refused (exit 4 for
dbsync), every row and value release 2 wrote still there; and the way forward the refusal names
(``--force --reason``, ``-x migrations_policy_force=``) then finishes the rollback.

``MP_REWRITE_DOWNGRADE_SEED`` replays a draw; ``MP_REWRITE_DOWNGRADE_FORM`` picks the form by its
label.
"""

from __future__ import annotations

import os
import random
import textwrap

import sqlalchemy as sa

from ..gate.conftest import ROWS
from ..helpers import forget_example_modules
from .test_release_state import EXPAND_FILE, _alembic, _app, _roll_back

NEW = 12  # nodes release 2 inserts (ids above ROWS)


def _forms(dialect: str) -> dict[str, str]:
    delete = f"DELETE FROM nodes WHERE id > {ROWS}"
    forms = {
        "delete_text": f'op.execute("{delete}")',
        "delete_core": f'op.execute(sa.delete(sa.table("nodes", sa.column("id"))).where(sa.column("id") > {ROWS}))',
        "delete_bind": f'op.get_bind().execute(sa.text("{delete.lower()}"))',
        "delete_driver_sql": f'op.get_bind().exec_driver_sql("{delete}")',
        "update_blank": f'op.execute("UPDATE nodes SET name = NULL WHERE id > {ROWS}")',
    }
    forms["delete_cursor"] = f'op.get_bind().connection.cursor().execute("{delete}")'
    if dialect == "sqlite":  # the driver's own script path: the database reports the DELETE (authorizer)
        forms["delete_script"] = f'op.get_bind().connection.driver_connection.executescript("SELECT 1; {delete};")'
    if dialect == "postgresql":
        forms["delete_with"] = (f'op.execute("WITH gone AS (DELETE FROM nodes WHERE id > {ROWS} RETURNING id) '
                                'SELECT count(*) FROM gone")')
        forms["truncate_two"] = 'op.execute("TRUNCATE rt2_notes, nodes CASCADE")'
        forms["drop_type"] = 'op.execute("DROP TYPE rt2_mood CASCADE")'
    if dialect == "postgresql":  # EXPLAIN ANALYZE runs the statement it explains
        forms["explain_analyze"] = f'op.execute("EXPLAIN (ANALYZE, COSTS OFF) {delete}")'
    if dialect == "mysql":  # so does MariaDB's ANALYZE
        forms["analyze_delete"] = f'op.execute("ANALYZE {delete}")'
    if dialect == "mysql":
        forms["delete_multi"] = f'op.execute("DELETE nodes FROM nodes WHERE nodes.id > {ROWS}")'
    if dialect != "sqlite":  # a statement reading another table (MariaDB: LOCK TABLES would refuse it)
        forms["delete_subquery"] = (f'op.execute("DELETE FROM nodes WHERE id > {ROWS} AND id NOT IN '
                                    '(SELECT node_id FROM ports WHERE node_id IS NOT NULL)")')
    # Code the statement's text does not show: a routine (created by the downgrade, or one release 2
    # left in the database) that deletes release 2's nodes, run by CALL or from a query.
    if dialect == "postgresql":
        body = f"DELETE FROM nodes WHERE id > {ROWS}"
        forms["routine_select_sql"] = (
            f'op.execute("CREATE FUNCTION rt3_purge() RETURNS bigint LANGUAGE sql AS $f$ {body} RETURNING 1 $f$")\n'
            'op.execute("SELECT count(*) FROM (SELECT rt3_purge()) AS x")')
        forms["routine_select_plpgsql"] = (
            f'op.execute("CREATE FUNCTION rt3_purge() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN {body}; END $f$")\n'
            'op.execute(sa.select(sa.func.rt3_purge()))')
        forms["routine_call"] = (
            f'op.execute("CREATE PROCEDURE rt3_purge() LANGUAGE sql AS $f$ {body} $f$")\n'
            'op.execute("CALL rt3_purge()")')
        forms["routine_left_by_release_2"] = 'op.execute("SELECT public.rt3_left()")'
        # a DDL that runs a routine per row: a volatile default fills every existing row
        forms["routine_in_ddl"] = (
            f'op.execute("CREATE FUNCTION rt5_purge() RETURNS text LANGUAGE plpgsql AS $f$ BEGIN {body}; '
            f'RETURN \'x\'; END $f$")\n'
            'op.execute("ALTER TABLE ports ADD COLUMN rt5 text DEFAULT rt5_purge()")')
    if dialect == "mysql":
        body = f"DELETE FROM nodes WHERE id > {ROWS}"
        forms["routine_call"] = (f'op.execute("CREATE PROCEDURE rt3_purge() {body}")\n'
                                 'op.execute("CALL rt3_purge()")')
        forms["routine_select"] = (
            f'op.execute("CREATE FUNCTION rt3_purge() RETURNS INT MODIFIES SQL DATA BEGIN {body}; RETURN 1; END")\n'
            'op.execute("SELECT rt3_purge()")')
        forms["routine_left_by_release_2"] = 'op.execute("SET @gone = rt3_left()")'
        forms["create_or_replace"] = 'op.execute("CREATE OR REPLACE TABLE rt3_notes (id INT PRIMARY KEY)")'
    if dialect == "sqlite":
        forms["replace"] = (f'op.execute("REPLACE INTO nodes (id, uuid, provision_state) '
                            f'SELECT id, uuid, provision_state FROM nodes WHERE id > {ROWS}")')
    return forms


def rewrite_downgrade(app, rng: random.Random, label: str) -> str:
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    head, _, _ = path.read_text().partition("def downgrade() -> None:\n")
    dialect = app.engine.dialect.name
    tail = ['op.drop_index("ix_ports_node_id", "ports")',
            'op.drop_index("ix_ports_version", "ports")\nop.drop_column("ports", "version")',
            'op.drop_index("ix_nodes_version", "nodes")\nop.drop_column("nodes", "version")',
            'op.drop_column("nodes", "display_name")', 'op.drop_column("nodes", "meta")']
    tail.insert(rng.randint(0, len(tail)), _forms(dialect)[label])
    body = "\n".join(['op.drop_sync_trigger("nodes", old="name", new="display_name")',
                      'op.drop_sync_trigger("nodes", old="extra", new="meta")',
                      'if op.get_context().dialect.name in ("postgresql", "mysql"):\n'
                      '    op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")', *tail])
    path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(body, "    ") + "\n")
    return body


def _release_2_writes(app, rng: random.Random) -> None:
    with app.engine.begin() as conn:
        for i in range(ROWS + 1, ROWS + NEW + 1):
            display = f"node {i} " + "r" * rng.randint(0, 40)
            conn.execute(sa.text("INSERT INTO nodes (id, uuid, display_name, meta) VALUES (:i, :u, :d, :m)"),
                         {"i": i, "u": f"rt2-{i}-{rng.randrange(10**6)}", "d": display, "m": f'{{"k": {i}}}'})
        if app.engine.dialect.name == "postgresql":  # a table and a type of release 2's own
            conn.execute(sa.text("CREATE TYPE rt2_mood AS ENUM ('calm', 'busy')"))
            conn.execute(sa.text("ALTER TABLE nodes ADD COLUMN mood rt2_mood"))
            conn.execute(sa.text(f"UPDATE nodes SET mood = 'busy' WHERE id > {ROWS}"))
            conn.execute(sa.text("CREATE TABLE rt2_notes (id integer PRIMARY KEY)"))
            conn.execute(sa.text(f"CREATE FUNCTION rt3_left() RETURNS void LANGUAGE plpgsql AS "
                                 f"$f$ BEGIN DELETE FROM nodes WHERE id > {ROWS}; END $f$"))
        if app.engine.dialect.name in ("mysql", "mariadb"):  # a routine of release 2's own
            conn.execute(sa.text(f"CREATE FUNCTION rt3_left() RETURNS INT MODIFIES SQL DATA "
                                 f"BEGIN DELETE FROM nodes WHERE id > {ROWS}; RETURN 1; END"))
            conn.execute(sa.text("CREATE TABLE rt3_notes (id INT PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO rt3_notes (id) VALUES (1), (2), (3)"))


def _written(app) -> dict:
    with app.engine.connect() as conn:
        present = {c["name"] for c in sa.inspect(conn).get_columns("nodes")}  # DROP TYPE CASCADE takes mood
        columns = ["id", "uuid", "name", "extra", "mood"]
        rows = conn.execute(sa.select(*[sa.column(c) if c in present else sa.literal("<gone>") for c in columns])
                            .select_from(sa.table("nodes")).where(sa.column("id") > ROWS).order_by(sa.column("id"))).all()
        written = {r[0]: tuple(str(v) for v in r[1:]) for r in rows}
        if "rt3_notes" in sa.inspect(conn).get_table_names():  # MariaDB: a table of release 2's own
            written["rt3_notes"] = conn.execute(sa.text("SELECT count(*) FROM rt3_notes")).scalar_one()
        return written


def test_a_downgrade_deleting_or_rewriting_rows_is_judged(tmp_path, db_url, backend, capsys):
    seed = int(os.environ.get("MP_REWRITE_DOWNGRADE_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        forms = _forms(app.engine.dialect.name)
        label = os.environ.get("MP_REWRITE_DOWNGRADE_FORM") or rng.choice(sorted(forms))
        body = rewrite_downgrade(app, rng, label)
        route = rng.choice(["dbsync rollback", "dbsync rollback --to r1_inventory", "alembic downgrade"])
        print(f"seed {seed}: form {label}, route {route}\n{body}")
        forget_example_modules()
        _release_2_writes(app, rng)
        written = _written(app)
        nodes = {k: v for k, v in written.items() if isinstance(k, int)}
        assert len(nodes) == NEW and all(v[1] != "None" for v in nodes.values()), written
        capsys.readouterr()
        code, output = _roll_back(app, route, capsys)
        assert _written(app) == written, (seed, label, route, code, output)
        assert code == 4 and "Traceback" not in output, (seed, label, route, code, output)
        # The way forward the refusal names works: forced, the rollback finishes (and records it).
        # Not through sqlite3's executescript, which would commit the revision's transaction before
        # its script: refused forced or not, nothing reverted (test_sqlite_script_commit.py).
        if route.startswith("dbsync"):
            forced = app.dbsync(*route.split()[1:], "--force", "--reason", "redteam: release 2 rows may go")
            output = capsys.readouterr().err
        else:
            output = _alembic(app, "downgrade", "r1_inventory", force="redteam: release 2 rows may go")
            forced = 0 if not output else None
        if label == "delete_script":
            assert forced != 0 and "executescript" in output and _written(app) == written, \
                (seed, label, route, forced, output)
            return
        assert forced == 0 and "Traceback" not in output, (seed, label, route, forced, output)
        assert app.heads() == ["r1_inventory"], (seed, label, route)
    finally:
        app.engine.dispose()
        forget_example_modules()
