"""A framework table (``migrations_policy_*``) of another shape -- created by hand, by another tool, or left by a
broken restore -- is bad input like any other: every dbsync command gives one line naming the table and a
documented exit code, never a traceback, and an upgrade it stops applies nothing.

``MP_SHAPES_SEED`` (default: random, printed) draws ``MP_SHAPES_CASES`` (table, shape, command) cases per backend.
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest
import sqlalchemy as sa

from migrations_policy.core import framework_tables
from migrations_policy.data.remaining import completion
from migrations_policy.data import ledger

from ..helpers import console_script, copy_example, forget_example_modules, set_ini_option

SEED = int(os.environ.get("MP_SHAPES_SEED") or random.randrange(10 ** 9))
CASES = int(os.environ.get("MP_SHAPES_CASES") or 6)
print(f"test_framework_table_shapes: MP_SHAPES_SEED={SEED}")

TABLES = sorted({t.name for t in framework_tables.metadata.sorted_tables}
                | {ledger.ledger.name, completion.dirty.name, completion.proofs.name})
COMMANDS = [["status"], ["check"], ["upgrade", "--expand"], ["upgrade"], ["online_data_migrations"],
            ["rollback"], ["current"], ["version"], ["prune"], ["plan"]]
#: Each command's documented exit codes besides 2 and 8 (docs/cli.rst): 2 is bad input refused before anything
#: ran, 8 a revision or data migration that stopped on it while it ran.
ANSWERS = {"status": {0}, "check": {0, 3, 4, 5}, "upgrade": {0, 4, 7}, "online_data_migrations": {0, 1, 3},
           "rollback": {0, 4}, "current": {0}, "version": {0}, "prune": {0, 1, 3}, "plan": {0, 6}}


def _shape(rng: random.Random, name: str) -> sa.Table:
    """*name* with other columns: one unrelated column, or the real table's first column only."""
    columns = rng.choice([[sa.Column("x", sa.Integer)], [sa.Column("id", sa.Integer, primary_key=True),
                                                         sa.Column("note", sa.String(20))]])
    return sa.Table(name, sa.MetaData(), *columns)


def _version(engine) -> list:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return []
        return sorted(conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())


@pytest.mark.parametrize("case", range(CASES))
def test_a_framework_table_of_another_shape_is_one_line(case, tmp_path, db_url, db_engine):
    rng = random.Random(f"{SEED}-{case}-{db_url.get_backend_name()}")
    table, command = rng.choice(TABLES), rng.choice(COMMANDS)
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = db_url.render_as_string(hide_password=False)
    set_ini_option(ini, "alembic", "sqlalchemy.url", url.replace("%", "%%"))
    dbsync = [console_script("dbsync"), "-c", str(ini)]
    first = subprocess.run([console_script("alembic"), "-c", str(ini), "upgrade", "r1_inventory"],
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    with db_engine.begin() as conn:
        if sa.inspect(conn).has_table(table):
            conn.execute(sa.schema.DropTable(sa.Table(table, sa.MetaData())))
        _shape(rng, table).create(conn)
    before = _version(db_engine)
    proc = subprocess.run(dbsync + command, capture_output=True, text=True, timeout=600)
    where = (proc.stdout[-3000:], SEED, case, table, command, proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, where
    assert proc.returncode in ANSWERS[command[0]] | {2, 8}, where
    if proc.returncode in (2, 8):  # refused before anything ran, or a running migration stopped on it
        # (an upgrade's progress lines come first: "upgrade: running ...")
        errors = [line for line in proc.stderr.strip().splitlines() if not line.startswith(command[0] + ": ")]
        if proc.returncode == 8 and command[0] in ("online_data_migrations", "prune"):
            # a data migration failed, said in the run's report (its errors column and a line naming it),
            # the others still ran (docs/cli.rst)
            assert "error" in proc.stdout.lower(), where
            return
        assert len(errors) == 1 and errors[0].startswith("dbsync: error:") and table in errors[0], where
        assert _version(db_engine) == before, where  # nothing applied
