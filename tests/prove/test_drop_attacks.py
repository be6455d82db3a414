"""Nothing an unfinished data migration reads is dropped, however the drop is written.

The inventory example is expanded to release 2 with rows its data migrations
have not moved yet; its own release-3 contract is removed.  A generated
*attack* revision then drops (or renames away) a column a pending migration
reads or writes — without declaring any requirement — in one of many forms:
alembic operations, batch mode, ``op.execute``, ``bind.execute(text(...))``,
``exec_driver_sql`` with quoting, comments, no ``COLUMN`` keyword, several
statements in one call, a rename, or behind a reflection that keeps the script
from running offline, or after making the table's name mean a copy (a temporary table, USE
another database) that every probe would read; or it leaves the names standing and destroys what they hold:
the column added again under its name after the drop (``readd``), the table
truncated, the column's type changed with its values cast or set to NULL.  It sits on the contract branch or (mis-phased) on the
expand branch and is applied by dbsync or plain alembic.  Whatever the attack,
the column keeps every row and the revision is not recorded.  The control shows
the same forms apply once the data migrations are complete.

``MP_DROP_ATTACKS`` attacks per backend (default 12; ``all`` walks the product)
are drawn from a printed seed (``MP_DROP_ATTACK_SEED`` replays one);
``MP_DROP_ATTACK_FORMS`` narrows the forms by name prefix.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import sys
import textwrap
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from ..gate.conftest import ROWS, App
from .attacks import EXPAND_HEAD, draw, expanded_app, run_attacks, run_route, skip_most_on_servers

ATTACK_REV = "r3_attack"
#: column -> the example's data migration that reads or writes it (pending after the expand).
TARGETS = {"extra": "nodes_extra_to_meta", "meta": "nodes_extra_to_meta", "name": "nodes_name_to_display_name",
           "display_name": "nodes_name_to_display_name"}


def _home(dialect: str) -> str:
    return "public" if dialect == "postgresql" else "main"


def _quoted(dialect: str, name: str) -> str:
    return f"`{name}`" if dialect == "mysql" else f'"{name}"'


_RAW = "raw = op.get_bind().connection.dbapi_connection\n"


#: How the drop is written: source lines inside upgrade(), given the column and the dialect.
FORMS = {
    "op": lambda c, d: f'op.drop_column("nodes", "{c}")',
    "batch": lambda c, d: f'with op.batch_alter_table("nodes") as batch:\n    batch.drop_column("{c}")',
    "op_execute": lambda c, d: f'op.execute("ALTER TABLE nodes DROP COLUMN {c}")',
    "bind_text": lambda c, d: f'op.get_bind().execute(sa.text("ALTER TABLE nodes DROP COLUMN {c}"))',
    "driver_sql": lambda c, d: f'op.get_bind().exec_driver_sql("ALTER TABLE nodes DROP COLUMN {c}")',
    "quoted": lambda c, d: "op.get_bind().exec_driver_sql(%r)"
                           % f"ALTER TABLE {_quoted(d, 'nodes')} DROP COLUMN {_quoted(d, c)}",
    "no_column_keyword": lambda c, d: f'op.execute("alter table nodes drop {c}")',
    "comments": lambda c, d: f'op.execute("/* tidy up */ ALTER TABLE nodes -- old column\\n DROP COLUMN {c}")',
    "rename": lambda c, d: f'op.alter_column("nodes", "{c}", new_column_name="{c}_gone",'
                           f' existing_type=sa.Text)',
    "rename_sql": lambda c, d: f'op.execute("ALTER TABLE nodes RENAME COLUMN {c} TO {c}_gone")',
    "reflect_then_drop": lambda c, d: (f'if "{c}" in [col["name"] for col in '
                                       f'sa.inspect(op.get_bind()).get_columns("nodes")]:\n'
                                       f'    op.drop_column("nodes", "{c}")'),
    "two_statements": lambda c, d: f'op.get_bind().exec_driver_sql("SELECT 1; ALTER TABLE nodes DROP COLUMN {c}")',
    # -- the raw DB-API connection, which no SQLAlchemy event sees ---------------------------
    "dbapi_cursor": lambda c, d: _RAW + f'raw.cursor().execute("ALTER TABLE nodes DROP COLUMN {c}")',
    "pool_proxy_cursor": lambda c, d: f'op.get_bind().connection.cursor().execute("alter table nodes drop {c}")',
    "driver_connection_rename": lambda c, d: ('op.get_bind().connection.driver_connection.cursor().execute('
                                              f'"ALTER TABLE nodes RENAME COLUMN {c} TO {c}_gone")'),
    "dbapi_read_then_drop": lambda c, d: _RAW + ('cursor = raw.cursor()\ncursor.execute("SELECT count(*) FROM nodes")\n'
                                                 'cursor.fetchall()\n'
                                                 f'cursor.execute("ALTER TABLE nodes DROP COLUMN {c}")'),
    "dbapi_quoted_comments": lambda c, d: _RAW + "raw.cursor().execute(%r)" % (
        f"/* raw */ ALTER TABLE {_quoted(d, 'nodes')} -- old\n DROP COLUMN {_quoted(d, c)}"),
    "dbapi_refusal_swallowed": lambda c, d: _RAW + ('try:\n'
                                                    f'    raw.cursor().execute("ALTER TABLE nodes DROP COLUMN {c}")\n'
                                                    'except Exception:\n    pass'),
    "sqlite_executescript": lambda c, d: _RAW + f'raw.executescript("SELECT 1; ALTER TABLE nodes DROP COLUMN {c};")',
    "sqlite_cursor_executescript": lambda c, d: _RAW + (
        'raw.cursor().executescript("CREATE TABLE scratch (a); '
        f'ALTER TABLE nodes RENAME COLUMN {c} TO {c}_gone; DROP TABLE scratch;")'),
    "sqlite_connection_execute": lambda c, d: _RAW + f'raw.execute("ALTER TABLE nodes DROP COLUMN {c}")',
    "psycopg_connection_execute": lambda c, d: _RAW + f'raw.execute("ALTER TABLE nodes DROP COLUMN {c}")',
    "psycopg_two_statements": lambda c, d: _RAW + ('raw.cursor().execute('
                                                   f'"SELECT 1; ALTER TABLE nodes DROP COLUMN {c}")'),
    "psycopg_composed": lambda c, d: _RAW + (
        'from psycopg import sql\n'
        'raw.execute(sql.SQL("ALTER TABLE {} DROP COLUMN {}").format('
        f'sql.Identifier("nodes"), sql.Identifier("{c}")))'),
    "psycopg_client_cursor": lambda c, d: _RAW + ('import psycopg\n'
                                                  f'psycopg.ClientCursor(raw).execute("ALTER TABLE nodes DROP COLUMN {c}")'),
    "psycopg_pgconn": lambda c, d: _RAW + f'raw.pgconn.exec_(b"ALTER TABLE nodes DROP COLUMN {c}")',
    "pymysql_query": lambda c, d: _RAW + f'raw.query("ALTER TABLE nodes DROP COLUMN {c}")',
    "pymysql_dict_cursor": lambda c, d: _RAW + ('import pymysql\n'
                                                'raw.cursor(pymysql.cursors.DictCursor).execute('
                                                f'"ALTER TABLE nodes DROP COLUMN {c}")'),
    "pymysql_sscursor": lambda c, d: _RAW + ('import pymysql\n'
                                             f'pymysql.cursors.SSCursor(raw).execute("ALTER TABLE nodes DROP COLUMN {c}")'),
    "pymysql_private_command": lambda c, d: _RAW + (f'raw._execute_command(3, "ALTER TABLE nodes DROP COLUMN {c}")\n'
                                                    'raw._read_query_result()'),
    # -- a script that takes the driver hook off before dropping (on purpose, not by mistake) ---
    "sqlite_authorizer_reset": lambda c, d: _RAW + ('raw.set_authorizer(None)\n'
                                                    f'raw.execute("ALTER TABLE nodes DROP COLUMN {c}")'),
    "sqlite_authorizer_reset_then_script": lambda c, d: _RAW + (
        f'raw.set_authorizer(None)\nraw.executescript("ALTER TABLE nodes DROP COLUMN {c};")'),
    "psycopg_factory_reset": lambda c, d: _RAW + ('import psycopg\nraw.cursor_factory = psycopg.Cursor\n'
                                                  f'raw.execute("ALTER TABLE nodes DROP COLUMN {c}")'),
    "pymysql_query_reset": lambda c, d: _RAW + ('raw.query = type(raw).query.__get__(raw)\n'
                                                f'raw.query("ALTER TABLE nodes DROP COLUMN {c}")'),
    # -- the name made to mean another table, so that every probe reads a copy -----------------
    "shadow_temp_table": lambda c, d: (
        f'op.execute("CREATE TEMP TABLE nodes AS SELECT * FROM {_home(d)}.nodes")\n'
        f'op.execute("UPDATE {"pg_temp" if d == "postgresql" else "temp"}.nodes SET meta = extra, display_name = name")\n'
        f'op.execute("ALTER TABLE {_home(d)}.nodes DROP COLUMN {c}")'),
    "shadow_use_database": lambda c, d: (
        'import uuid\n'
        'real, decoy = op.get_bind().execute(sa.text("SELECT DATABASE()")).scalar(), "d" + uuid.uuid4().hex\n'
        'op.execute("CREATE DATABASE " + decoy)\n'
        'op.execute("CREATE TABLE " + decoy + ".nodes AS SELECT * FROM nodes")\n'
        'op.execute("UPDATE " + decoy + ".nodes SET meta = extra, display_name = name")\n'
        'op.execute("USE " + decoy)\n'
        f'op.get_bind().exec_driver_sql("ALTER TABLE " + real + ".nodes DROP COLUMN {c}")'),
    # -- the rows or values destroyed, the names left standing --------------------------------
    "truncate": lambda c, d: ('op.execute("TRUNCATE nodes, ports")' if d == "postgresql" else
                              'op.execute("SET foreign_key_checks = 0")\nop.execute("TRUNCATE TABLE nodes")'),
    "type_change_postgresql": lambda c, d: f'op.alter_column("nodes", "{c}", type_=sa.Text(), postgresql_using="NULL")',
    "type_change_postgresql_middle_rows": lambda c, d: (  # past the final check's sampled rows
        f'op.execute("ALTER TABLE nodes ALTER COLUMN {c} TYPE text USING '
        f'CASE WHEN id BETWEEN 65 AND 236 THEN NULL ELSE {c} END")'),
    "type_change_mysql": lambda c, d: ('op.execute("SET SESSION sql_mode = \'\'")\n'
                                       f'op.alter_column("nodes", "{c}", type_=sa.String(1), existing_nullable=True)'),
    "type_change_sqlite_batch": lambda c, d: (f'with op.batch_alter_table("nodes") as batch:\n'
                                              f'    batch.alter_column("{c}", type_=sa.Integer())'),
}
#: Forms that drop or rename the column: an attack may add a column of the same name again
#: afterwards (``readd``), so that only the values, not the names, show what was lost.
READDABLE = {form for form in FORMS if not form.startswith(("truncate", "type_change"))}
#: Forms that destroy the values of the old columns only: the new ones are still empty, and
#: one dropped and added again has lost nothing (the migration will fill it).
OLD_COLUMNS_ONLY = {form for form in FORMS if form not in READDABLE}
OLD_COLUMNS = ("extra", "name")
#: The dialects a form can be sent on (every dialect when not listed): psycopg alone runs two
#: statements in one call; each driver's own API on its own dialect.
DIALECTS = {"two_statements": {"postgresql"}, "psycopg_two_statements": {"postgresql"},
            "truncate": {"postgresql", "mysql"}, "type_change_postgresql": {"postgresql"},
            "type_change_postgresql_middle_rows": {"postgresql"},
            "shadow_temp_table": {"postgresql", "sqlite"}, "shadow_use_database": {"mysql"},
            "type_change_mysql": {"mysql"}, "type_change_sqlite_batch": {"sqlite"},
            **{form: {dialect} for form in FORMS for prefix, dialect in
               (("sqlite_", "sqlite"), ("psycopg_", "postgresql"), ("pymysql_", "mysql"))
               if form.startswith(prefix)}}
#: Forms that get past every check before the database (a cursor class or private call the
#: driver hooks do not see, a script that removes the hook): the check after ``upgrade()``
#: refuses them.  PostgreSQL and SQLite roll the revision's transaction back, except after
#: sqlite3's executescript (it commits first); MariaDB/MySQL's DDL has committed (exit 7, the
#: data is gone, the revision is not recorded).
FINAL_CHECK_ONLY = {"psycopg_client_cursor", "psycopg_pgconn", "pymysql_private_command", "sqlite_authorizer_reset",
                    "sqlite_authorizer_reset_then_script", "psycopg_factory_reset", "pymysql_query_reset",
                    # SQLite's batch copy keeps the names: the final check compares the values
                    "type_change_sqlite_batch"}


#: Forms that end the revision's transaction through the driver (sqlite3's executescript COMMITs it
#: before its script): refused whatever the data and however forced, before the script runs
#: (``gate.runtime._keep_one_transaction``; ``test_sqlite_script_commit``).
SCRIPT_COMMITS = {"sqlite_executescript", "sqlite_cursor_executescript"}


def _refused_as_script_commit(app, code: int, err: str) -> bool:
    """Refused with exit 4, one line naming executescript, the attack revision not applied."""
    return code == 4 and "executescript" in err and ATTACK_REV not in app.heads()


def _committed(form: str, backend: str) -> bool:
    """Whether the drop is beyond the rollback when the check after upgrade() sees it."""
    return form in FINAL_CHECK_ONLY and (backend == "mysql" or form == "sqlite_authorizer_reset_then_script")
EXIT_DESTROYED = 7
PLACEMENTS = {  # (directory, down_revision, depends_on)
    "contract_without_requirements": ("contract", "contract_root", EXPAND_HEAD),
    "expand_branch": ("expand", EXPAND_HEAD, None),
}
ROUTES = ("dbsync upgrade", "dbsync upgrade --contract", "alembic upgrade heads")


def sendable(form: str, backend: str) -> bool:
    return backend in DIALECTS.get(form, {backend})


@dataclass(frozen=True)
class Attack:
    form: str
    column: str
    placement: str
    route: str
    readd: bool = False  # then add a column of the same name again (names intact, values gone)

    def __str__(self) -> str:
        return f"{self.form}/{self.column}/{self.placement}/{self.route!r}{'/readd' if self.readd else ''}"


def _all_attacks(backend: str) -> list[Attack]:
    """Every attack *backend* can send (``MP_DROP_ATTACK_FORMS=dbapi_,sqlite_``: only the forms
    whose names start so)."""
    prefixes = tuple(p for p in os.environ.get("MP_DROP_ATTACK_FORMS", "").split(",") if p)
    return [Attack(*combo) for combo in itertools.product(FORMS, TARGETS, PLACEMENTS, ROUTES, (False, True))
            if sendable(combo[0], backend) and (not prefixes or combo[0].startswith(prefixes))
            and (combo[0] in READDABLE or not combo[4])
            and (combo[0] in READDABLE and not combo[4] or combo[1] in OLD_COLUMNS)]


def _install(app: App, attack: Attack, dialect: str, body: str | None = None) -> None:
    """Replace the example's contract by the attack revision (or one whose upgrade() is *body*)."""
    root = app.ini.parent / "migrations" / "versions"
    (root / "contract" / "0003_r3_drop_extra_name.py").unlink()
    directory, down, depends = PLACEMENTS[attack.placement]
    # The contract removes the sync triggers the example's expand installed; an expand may not
    # (sync_keeper refuses it first, for another reason): there the drop guard acts before the
    # database could refuse a column a trigger uses.
    releases = [] if attack.placement == "expand_branch" else [
        'op.drop_sync_trigger("nodes", old="extra", new="meta")',
        'op.drop_sync_trigger("nodes", old="name", new="display_name")']
    readd = [f'op.add_column("nodes", sa.Column("{attack.column}", sa.Text()))'] if attack.readd else []
    body = body or "\n".join([*releases, FORMS[attack.form](attack.column, dialect), *readd])
    (root / directory / "0003_r3_attack.py").write_text(
        f'"""attack: {attack}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
        "import migrations_policy.window.sync_triggers\n\n"
        f"revision = {ATTACK_REV!r}\ndown_revision = {down!r}\nbranch_labels = None\ndepends_on = {depends!r}\n\n\n"
        f"def upgrade() -> None:\n{textwrap.indent(body, '    ')}\n\n\ndef downgrade() -> None:\n    pass\n")


def _column_intact(app: App, column: str) -> bool:
    if column not in app.columns("nodes"):
        return False
    with app.engine.connect() as conn:
        values = conn.execute(sa.text(f"SELECT count({column}) FROM nodes")).scalar_one()  # noqa: S608 - test
    return values == (ROWS if column in ("extra", "name") else 0)  # release 2's new columns are still empty


def _applies(app: App, attack: Attack) -> bool:
    gone = attack.form not in READDABLE or attack.column not in app.columns("nodes")
    return gone and ATTACK_REV in app.heads()


def _expected_exits(attack: Attack, backend: str) -> tuple[int, ...]:
    if attack.placement == "expand_branch" and attack.route == "dbsync upgrade --contract":
        return (4,)  # the route does not apply the expand branch; contract_root waits (the global rule)
    # Release 2's data migrations are unfinished: the contract (global rule) and the next expand
    # (the previous release's migrations first) are refused by the gate before any statement runs;
    # the drop guard (exit 7 where the DDL had committed) is the second line behind it.
    refused = (4, EXIT_DESTROYED) if _committed(attack.form, backend) else (4,)
    if attack.placement == "expand_branch" and attack.route == "dbsync upgrade":
        return (2, *refused)  # 2: the expand is refused first, for release 1's unversioned rows
    return refused


def _trigger_refused(output: str, column: str, form: str) -> bool:
    """The database's own refusal of a drop for the sync trigger on *column*: MariaDB fails the
    trigger, PostgreSQL refuses to drop a column an ``UPDATE OF`` trigger depends on.  libpq's
    ``exec_`` returns the refusal instead of raising it, so after ``psycopg_pgconn`` it shows as the
    aborted transaction the next statement finds."""
    if form == "psycopg_pgconn" and "InFailedSqlTransaction" in output:
        return True
    if "cannot alter type of a column used in a trigger definition" in output:
        return True
    return "error in trigger" in output or bool(re.search(
        rf"DependentObjectsStillExist: cannot drop column {column} of table nodes .*\n.*"
        rf"trigger mp_sync_nodes_\w+ on table nodes depends on column {column} of table nodes", output))


def test_no_undeclared_drop_loses_pending_data(tmp_path, backend, capsys):
    seed, attacks = draw(_all_attacks(backend), backend, "MP_DROP_ATTACKS", "MP_DROP_ATTACK_SEED", 12)

    def attempt(app: App, attack: Attack) -> list[str]:
        _install(app, attack, app.engine.dialect.name)
        code, output = run_route(app, attack.route, capsys)
        if os.environ.get("MP_DROP_ATTACK_VERBOSE"):
            print(f"{attack}: exit {code}: {output.strip()}", file=sys.__stderr__)
        problems = []
        committed_ddl = _committed(attack.form, backend)  # seen after the fact
        if not _column_intact(app, attack.column) and not (committed_ddl and code in (None, EXIT_DESTROYED)):
            problems.append("DATA DROPPED")
        if ATTACK_REV in app.heads():
            problems.append("attack recorded as applied")
        if "Traceback" in output:
            problems.append("traceback")
        if code is not None and code not in _expected_exits(attack, backend):
            problems.append(f"exit {code}")
        # On the expand branch the sync triggers stay installed (sync_keeper refuses removing them),
        # and a drop that got past every hook may be refused by the database itself, for the
        # trigger that reads the column: nothing dropped, nothing recorded, but not our line.
        refused_by_trigger = attack.placement == "expand_branch" and _trigger_refused(output, attack.column,
                                                                                       attack.form)
        if code in (4, EXIT_DESTROYED, None) and not refused_by_trigger:
            if TARGETS[attack.column] not in output:
                problems.append("the refusal does not name the migration")
        elif code == 2 and "with NULL version" not in output:
            problems.append("exit 2 for another reason")
        return problems and [*problems, f"({output.strip()[:400]})"]

    run_attacks(tmp_path, backend, seed, "MP_DROP_ATTACK_SEED", attacks, attempt)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_applies_once_the_data_is_migrated(tmp_path, db_url, backend, form, capsys):
    """The control: the guard judges, it does not refuse every drop."""
    if not sendable(form, backend):
        pytest.skip(f"{backend}'s driver cannot send {form}")
    if form == "shadow_use_database":
        pytest.skip("USE in a revision moves alembic's and the journal's own tables too: it fails either way")
    if form == "type_change_mysql":  # test_script_sql_mode.py pins that refusal
        pytest.skip("MariaDB's strictness is re-asserted before the narrowing whatever the script set: values "
                    "longer than one character make it fail (1406) once the data is migrated too")
    skip_most_on_servers(form, backend)
    app = expanded_app(tmp_path, db_url)
    try:
        columns = OLD_COLUMNS if form in OLD_COLUMNS_ONLY else sorted(TARGETS)
        attack = Attack(form, random.choice(columns), "contract_without_requirements", "dbsync upgrade")
        _install(app, attack, app.engine.dialect.name)
        assert app.dbsync("online_data_migrations") == 0
        capsys.readouterr()
        code = app.dbsync("upgrade")
        err = capsys.readouterr().err
        if form in SCRIPT_COMMITS:
            assert _refused_as_script_commit(app, code, err), (attack, code, err)
            return
        assert code == 0, (attack, err)
        assert _applies(app, attack), attack
    finally:
        app.engine.dispose()


def test_status_and_check_name_the_undeclared_reader(tmp_path, db_url, backend, capsys):
    import json

    app = expanded_app(tmp_path, db_url)
    try:
        _install(app, Attack("op", "extra", "contract_without_requirements", "dbsync upgrade"),
                 app.engine.dialect.name)
        capsys.readouterr()
        assert app.dbsync("--format", "json", "status") == 0
        gate = json.loads(capsys.readouterr().out)["gate"]
        assert not gate["allowed"]
        (pending,) = [p for p in gate["pending"] if p["name"] == "nodes_extra_to_meta"]
        assert pending["required_by"] == [f"{ATTACK_REV}, which drops nodes.extra that it reads"]
        assert app.dbsync("--format", "json", "check") == 4
        assert "nodes_extra_to_meta" in {p["name"] for p in json.loads(capsys.readouterr().out)["gate"]["pending"]}
    finally:
        app.engine.dispose()


def _release1_app(tmp_path, db_url) -> App:
    """The example at release 1 with rows, release 2's expand not applied yet."""
    from ..helpers import copy_example, forget_example_modules, set_ini_option

    forget_example_modules()
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, db_url)
    app.alembic_upgrade("r1_inventory")
    app.seed_release1()
    return app


def _unrelated_statements(rng: random.Random, dialect: str) -> list[str]:
    """Raw DDL and DML that destroys nothing a migration reads, in an order that runs: a scratch
    table created, filled, altered and dropped, an index on the migrations' own table."""
    scratch, index = f"scratch_{rng.randrange(1000)}", f"ix_nodes_{rng.randrange(1000)}"
    steps = [[f"CREATE TABLE {scratch} (id INTEGER PRIMARY KEY, note VARCHAR(20))"],
             [f"INSERT INTO {scratch} (id, note) VALUES ({n}, 'n{n}')" for n in range(rng.randint(1, 3))],
             [f"ALTER TABLE {scratch} ADD COLUMN extra VARCHAR(20)", f"UPDATE {scratch} SET extra = note"],
             [f"CREATE INDEX {index} ON nodes (id)",  # and, half the time, its drop (one step: both or neither)
              *([f"DROP INDEX {index} ON nodes" if dialect == "mysql" else f"DROP INDEX {index}"]
                if rng.random() < 0.5 else [])]]
    steps.append([f"ALTER TABLE {scratch} RENAME TO {scratch}_b", f"DROP TABLE {scratch}_b"]
                 if rng.random() < 0.5 else [f"DROP TABLE {scratch}"])
    return [statement for step in steps if step is steps[0] or rng.random() < 0.8 for statement in step]


def _raw_sender(rng: random.Random, dialect: str) -> str:
    choices = {"sqlite": ["raw.cursor().execute(%r)", "raw.execute(%r)", "script"],
               "postgresql": ["raw.cursor().execute(%r)", "raw.execute(%r)"],
               "mysql": ["raw.cursor().execute(%r)", "raw.query(%r)"]}[dialect]
    return rng.choice(choices)


def test_unrelated_raw_statements_apply_while_data_is_pending(tmp_path, db_url, backend, capsys):
    """The guard stays on the driver but refuses only what destroys a pending migration's data:
    generated raw DDL/DML (a scratch table created, filled, altered, renamed and dropped, an index on
    the very table the migrations read) applies while every row is still pending."""
    seed = random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    # A contract no longer runs while data is pending (the global rule): the revision sits on the
    # expand branch after release 2's expand and is applied in the same run, once release 2's
    # expand has made every row pending, so the drop guard is what judges its statements.
    app = _release1_app(tmp_path, db_url)
    try:
        dialect = app.engine.dialect.name
        statements = _unrelated_statements(rng, dialect)
        sender = _raw_sender(rng, dialect)
        if sender == "script":
            body = _RAW + "raw.executescript(%r)" % "".join(f"{s};\n" for s in statements)
        else:
            body = _RAW + "\n".join(sender % s for s in statements)
        # an ALTER of the migrations' own table through alembic: judged column by column (SQLite's
        # authorizer, which sees no column for ADD/RENAME, must leave SQLAlchemy's statements alone)
        body += f'\nop.add_column("nodes", sa.Column("note_{rng.randrange(1000)}", sa.Text))'
        _install(app, Attack("op", "extra", "expand_branch", "dbsync upgrade --expand"), dialect, body=body)
        capsys.readouterr()
        code = app.dbsync("upgrade", "--expand")
        err = capsys.readouterr().err
        if sender == "script":  # it would end the revision's transaction: refused, nothing applied
            assert _refused_as_script_commit(app, code, err), (seed, body, code, err)
            return
        assert code == 0, (seed, body, err)
        assert ATTACK_REV in app.heads(), seed
        assert all(_column_intact(app, column) for column in TARGETS), seed  # nothing migrated, nothing lost
        assert {"extra", "name"} <= app.columns("nodes")
    finally:
        app.engine.dispose()


def test_a_raw_form_applies_with_force(tmp_path, db_url, backend, capsys):
    """--force lets a drawn raw-driver form through with every row pending (the control above shows
    the migrated case for each form)."""
    rng = random.Random()
    form = rng.choice(sorted(f for f in FORMS if f.startswith(("dbapi_", "pool_", "driver_", "sqlite_", "psycopg_",
                                                                 "pymysql_")) and sendable(f, backend)))
    app = expanded_app(tmp_path, db_url)
    try:
        columns = OLD_COLUMNS if form in OLD_COLUMNS_ONLY else sorted(TARGETS)
        attack = Attack(form, rng.choice(columns), "contract_without_requirements", "dbsync upgrade")
        _install(app, attack, app.engine.dialect.name)
        capsys.readouterr()
        code = app.dbsync("upgrade", "--force", "--reason", "raw drop on purpose")
        err = capsys.readouterr().err
        if form in SCRIPT_COMMITS:  # forcing cannot make a revision committed part-way atomic
            assert _refused_as_script_commit(app, code, err), (attack, code, err)
            return
        assert code == 0, (attack, err)
        assert _applies(app, attack), attack
    finally:
        app.engine.dispose()


def test_a_drop_past_every_hook_on_mariadb_is_not_recorded(tmp_path, db_url, backend, capsys):
    """MariaDB/MySQL: DDL sent by a private driver call (no hook sees it) commits at once.  The check
    after upgrade() still refuses to record the revision, with one line naming what was destroyed
    (exit 7); the journal keeps the statements alembic ran, so ``status`` shows the revision partly
    applied and ``check`` does not call the schema clean."""
    if backend != "mysql":
        pytest.skip("PostgreSQL and SQLite roll back or refuse before the database acts (the attack test)")
    app = _release1_app(tmp_path, db_url)  # applied with release 2's expand (see the test above)
    try:
        column = random.choice(["meta", "display_name"])
        attack = Attack("pymysql_private_command", column, "expand_branch", "dbsync upgrade --expand")
        _install(app, attack, "mysql", body="\n".join([  # a journaled statement first, then the private call
            'op.add_column("ports", sa.Column("note", sa.Text))', FORMS[attack.form](column, "mysql")]))
        capsys.readouterr()
        assert app.dbsync("upgrade", "--expand") == EXIT_DESTROYED
        err = capsys.readouterr().err
        (line,) = [line for line in err.splitlines() if line.startswith("dbsync: error:")]
        assert f"nodes.{column}" in line and TARGETS[column] in line and "not recorded as applied" in line, line
        assert ATTACK_REV not in app.heads() and column not in app.columns("nodes")
        assert app.dbsync("status") in (0, 1, 2)
        assert f"revision {ATTACK_REV} partly applied" in capsys.readouterr().out
        assert app.dbsync("check") in (2, 4)  # never 0 or 5 ("contract allowed")
        captured = capsys.readouterr()  # (the object versions release 2 left unset may speak first: issue 27 s.4)
        assert f"revision {ATTACK_REV} partly applied" in captured.out or "with NULL version" in captured.err
        capsys.readouterr()
        code = app.dbsync("upgrade", "--expand")  # its raw drop runs again and fails (8), or the object
        err = capsys.readouterr().err             # versions release 2 left unset speak first (2): one line
        assert "Traceback" not in err and ((code == 8 and "migration failed: revision" in err) or (
            code == 2 and "with NULL version" in err)), (code, err)
        assert ATTACK_REV not in app.heads()
    finally:
        app.engine.dispose()
