"""A downgrade that drops through the DB-API driver is judged like one that drops through SQLAlchemy.

The inventory example is expanded to release 2 and migrated; release 2 then writes display names
``name`` cannot hold (the only copy of those values is ``nodes.display_name``).  Release 2's
``downgrade()`` is rewritten so that ``display_name`` goes through the migration connection's
driver, in a random form drawn per dialect (the DB-API cursor of the pool's connection, the
driver connection's own ``execute``/``executescript``/``query``), at a random place among the
example's other downgrade statements.  By a random route (``dbsync rollback``, ``dbsync rollback
--to r1_inventory``, plain ``alembic downgrade``), the values must survive: the run refused
(exit 4 for dbsync), ``display_name`` still there with every value.

``MP_DRIVER_DOWNGRADE_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random
import textwrap

import sqlalchemy as sa

from ..gate.conftest import ROWS
from ..helpers import forget_example_modules
from .test_release_state import EXPAND_FILE, _app, _display_names, _roll_back


def _driver_forms(dialect: str) -> list[str]:
    drop = "ALTER TABLE nodes DROP COLUMN display_name"
    forms = [f'op.get_bind().connection.dbapi_connection.cursor().execute("{drop}")',
             f'op.get_bind().connection.cursor().execute("{drop}")',
             f'cursor = op.get_bind().connection.driver_connection.cursor()\ncursor.execute("{drop.lower()}")']
    if dialect == "postgresql":
        forms.append(f'op.get_bind().connection.driver_connection.execute("{drop}")')
    if dialect == "sqlite":
        forms.append(f'op.get_bind().connection.driver_connection.executescript("SELECT 1; {drop};")')
    if dialect == "mysql":
        forms.append(f'op.get_bind().connection.driver_connection.query("{drop}")')
    return forms


def rewrite_downgrade(app, rng: random.Random) -> str:
    path = app.ini.parent.joinpath(*EXPAND_FILE)
    head, _, _ = path.read_text().partition("def downgrade() -> None:\n")
    dialect = app.engine.dialect.name
    drops = [rng.choice(_driver_forms(dialect)), 'op.drop_column("nodes", "meta")',
             'op.drop_index("ix_nodes_version", "nodes")\nop.drop_column("nodes", "version")']
    rng.shuffle(drops)
    body = "\n".join(['op.drop_sync_trigger("nodes", old="name", new="display_name")',
                      'op.drop_sync_trigger("nodes", old="extra", new="meta")',
                      'if op.get_context().dialect.name in ("postgresql", "mysql"):\n'
                      '    op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")',
                      'op.drop_index("ix_ports_node_id", "ports")',
                      'op.drop_index("ix_ports_version", "ports")\nop.drop_column("ports", "version")', *drops])
    path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(body, "    ") + "\n")
    return body


def test_a_downgrade_dropping_through_the_driver_is_judged(tmp_path, db_url, backend, capsys):
    seed = int(os.environ.get("MP_DRIVER_DOWNGRADE_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        body = rewrite_downgrade(app, rng)
        route = rng.choice(["dbsync rollback", "dbsync rollback --to r1_inventory", "alembic downgrade"])
        print(f"seed {seed}: route {route}\n{body}")
        forget_example_modules()
        long_rows = rng.sample(range(1, ROWS + 1), rng.randint(1, 9))
        with app.engine.begin() as conn:
            for i in long_rows:
                display = f"node {i} " + "q" * rng.randint(65, 120)
                conn.execute(sa.text("UPDATE nodes SET display_name = :d, name = :n WHERE id = :i"),
                             {"d": display, "n": display[:64], "i": i})
        names = _display_names(app)
        capsys.readouterr()
        code, output = _roll_back(app, route, capsys)
        assert "display_name" in app.columns("nodes"), (seed, route, code, output)
        assert _display_names(app) == names, (seed, route, code, output)
        assert code == 4 and "Traceback" not in output, (seed, route, code, output)
    finally:
        app.engine.dispose()
        forget_example_modules()
