"""MariaDB: a revision that turns its own session non-strict still cannot truncate a value.

``expand/sql_mode.py`` adds ``STRICT_ALL_TABLES`` to every migration session; the revision runs after
that, so it can set the session's mode back itself.  A release-2 expand (or contract) first sets
``sql_mode`` to a non-strict value, in a random form (``op.execute``, ``bind.execute(text)``,
``exec_driver_sql``, ``SET @@session``, through a user variable, the driver's ``query``), then
narrows ``nodes.uuid`` (no data migration reads it) to a random width shorter than its values, in a
random form; or does both at once with MariaDB's ``SET STATEMENT sql_mode='' FOR ALTER ...``.  By a
random route: the run fails, and every value is kept whole.

``MP_SQL_MODE_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa

from ..gate.conftest import App
from ..helpers import copy_example, forget_example_modules, set_ini_option
from .attacks import run_route

EXPAND = ("migrations", "versions", "expand", "0002_r2_meta_display_name_version.py")

NON_STRICT = [
    "op.execute(\"SET SESSION sql_mode = ''\")",
    "op.execute(sa.text(\"SET sql_mode = 'NO_ENGINE_SUBSTITUTION'\"))",
    "op.get_bind().execute(sa.text(\"SET @@session.sql_mode = ''\"))",
    "op.get_bind().exec_driver_sql(\"set session sql_mode='ERROR_FOR_DIVISION_BY_ZERO'\")",
    "op.execute(\"SET @m = ''\")\nop.execute(\"SET SESSION sql_mode = @m\")",
    "op.get_bind().connection.driver_connection.query(\"SET SESSION sql_mode = ''\")",
]
NARROW = [
    "op.alter_column('nodes', 'uuid', type_=sa.String({w}), existing_nullable=False)",
    'op.execute("ALTER TABLE nodes MODIFY uuid VARCHAR({w}) NOT NULL")',
    'op.get_bind().exec_driver_sql("ALTER TABLE nodes MODIFY COLUMN uuid VARCHAR({w}) NOT NULL")',
    'op.execute("ALTER TABLE nodes CHANGE uuid uuid CHAR({w}) NOT NULL")',
]


def _uuids(app: App) -> dict:
    with app.engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT id, uuid FROM nodes")).all())


def test_a_script_that_turns_strict_mode_off_still_truncates_nothing(tmp_path, db_url, backend, capsys):
    if backend != "mysql":
        pytest.skip("sql_mode is MariaDB/MySQL's")
    seed = int(os.environ.get("MP_SQL_MODE_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    width = rng.randint(4, 35)  # the seeded uuids have 36 characters
    if rng.random() < 0.2:  # MariaDB's per-statement override
        lines = f'op.execute("SET STATEMENT sql_mode=\'\' FOR ALTER TABLE nodes MODIFY uuid VARCHAR({width}) NOT NULL")'
    else:
        lines = rng.choice(NON_STRICT) + "\n" + rng.choice(NARROW).format(w=width)
    route = rng.choice(["dbsync upgrade --expand", "alembic upgrade expand@head"])
    print(f"seed {seed}: {route}, width {width}:\n{lines}")
    forget_example_modules()
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, db_url)
    try:
        app.alembic_upgrade("r1_inventory")
        app.seed_release1()
        expand = app.ini.parent.joinpath(*EXPAND)
        body = "".join(f"    {line}\n" for line in lines.splitlines())
        expand.write_text(expand.read_text().replace("def upgrade() -> None:\n", "def upgrade() -> None:\n" + body, 1))
        before = _uuids(app)
        code, output = run_route(app, route, capsys)
        after = _uuids(app)
        cut = sum(1 for k, v in before.items() if after.get(k) != v)
        assert cut == 0, (seed, f"{cut} of {len(before)} uuids cut", code, output[-600:])
        assert code in (None, 8) and "Traceback" not in output, (seed, code, output[-600:])
    finally:
        app.engine.dispose()
        forget_example_modules()
