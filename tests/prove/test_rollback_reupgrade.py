"""Rollback, then the same upgrade again: every value release N+1 wrote is back, or the rollback
was refused.

The inventory example's ``nodes_name_to_display_name`` copies ``name`` into ``display_name``; here it
gains a condition drawn at random (the rows of some provisioning states, of some key parity, or of
names with some prefix), as a project's migration may.  Release 2 then writes display names that
fit in ``name`` (the sync trigger keeps ``name`` in step): dropping ``display_name`` loses nothing
the migration derives *and would derive again* — but a row outside the condition is never selected
by the migration after the re-upgrade, so its display name would come back NULL.  By a random route
(``dbsync rollback``, ``--to r1_inventory``, plain ``alembic downgrade``), the rollback either
refuses (exit 4, the values in place), or after ``dbsync upgrade --expand`` and
``dbsync online_data_migrations`` every display name release 2 wrote is there again, and no row is
duplicated.

``MP_REUPGRADE_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random

import sqlalchemy as sa

from ..gate.conftest import ROWS
from ..helpers import forget_example_modules
from .test_release_state import _alembic, _app

CONDITIONS = {
    "state": 'nodes_c_state.in_(["active", "enroll"])',
    "parity": "(nodes.c.id % 2) == 0",
    "prefix": 'nodes.c.name.like("keep%")',
}


def _add_condition(app, label: str) -> None:
    path = app.ini.parent / "inventory" / "data_migrations.py"
    text = path.read_text()
    text = text.replace('sa.column("name", sa.String), sa.column("display_name", sa.String),',
                        'sa.column("name", sa.String), sa.column("display_name", sa.String),\n'
                        '    sa.column("provision_state", sa.String),')
    condition = CONDITIONS[label].replace("nodes_c_state", "nodes.c.provision_state")
    old = "    pending=differs(nodes.c.name, sa.func.substr(nodes.c.display_name, 1, 64)),"
    assert old in text
    text = text.replace(old, f"    pending=sa.and_(differs(nodes.c.name, sa.func.substr(nodes.c.display_name, 1, 64)),\n"
                             f"                    {condition}),")
    path.write_text(text)


def _display_names(app) -> dict:
    with app.engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT id, display_name FROM nodes WHERE display_name IS NOT NULL")).all())


def test_a_rollback_and_the_upgrade_again_lose_nothing(tmp_path, db_url, backend, capsys):
    seed = int(os.environ.get("MP_REUPGRADE_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        label = rng.choice(sorted(CONDITIONS))
        route = rng.choice(["dbsync rollback", "dbsync rollback --to r1_inventory", "alembic downgrade"])
        print(f"seed {seed}: condition {label}, route {route}")
        _add_condition(app, label)
        forget_example_modules()
        with app.engine.begin() as conn:  # release 2 writes display names name can hold
            for i in rng.sample(range(1, ROWS + 1), rng.randint(5, 40)):
                name = rng.choice(["keep", "node", "x"]) + f"-{i}-" + "d" * rng.randint(0, 30)
                conn.execute(sa.text("UPDATE nodes SET display_name = :d, provision_state = :s WHERE id = :i"),
                             {"d": name, "s": rng.choice(["active", "enroll", "manageable"]), "i": i})
        written = _display_names(app)
        with app.engine.connect() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar_one()
        capsys.readouterr()
        if route.startswith("dbsync"):
            code = app.dbsync(*route.split()[1:])
            output = capsys.readouterr().err
        else:
            output = _alembic(app, "downgrade", "r1_inventory")
            code = 4 if "downgrade refused" in output else 0
        assert "Traceback" not in output, output
        if code == 4:
            assert _display_names(app) == written, (seed, label, route, output)
            return
        assert code == 0, (seed, label, route, code, output)
        assert app.dbsync("upgrade", "--expand") == 0
        assert app.dbsync("online_data_migrations") == 0
        with app.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar_one() == count
        now = _display_names(app)
        assert {k: now.get(k) for k in written} == written, (seed, label, route)
    finally:
        app.engine.dispose()
        forget_example_modules()
