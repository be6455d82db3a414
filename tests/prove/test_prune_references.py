"""``dbsync prune`` keeps every row another table references, whichever schema (PostgreSQL) or
database (MariaDB) that table lives in, and whatever its ``ON DELETE`` action (issue 27).

Generated: a few referencing tables, each in the default schema or another one, each with a random
``ON DELETE`` action (CASCADE, SET NULL, SET DEFAULT, RESTRICT, NO ACTION; MariaDB's InnoDB has no
SET DEFAULT) and random references into ``parents``, of which a random part is prunable.  After the
prune: every referencing row is unchanged (none cascaded away, none set to NULL or its default), the
referenced prunable parents are kept and reported as kept, every other prunable parent is gone.
Seeded: ``MP_PROVE_SEED`` replays a run.
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
import sqlalchemy as sa

from migrations_policy.data import ledger

from ..data.support import dbsync_argv
from ..helpers import write_data_project

PRUNES = '''
import sqlalchemy as sa
from migrations_policy.data import Prune

parents = sa.table("parents", sa.column("id", sa.Integer), sa.column("deleted", sa.Integer))
prune_parents = Prune("old_parents", table=parents, key="id", where=parents.c.deleted.is_not(None))
'''
ACTIONS = {"postgresql": ["CASCADE", "SET NULL", "SET DEFAULT", "RESTRICT", "NO ACTION"],
           "mysql": ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION"]}
ROUNDS = 3


def _schemas(backend: str, rng: random.Random, database: str) -> list[str]:
    """Schemas (PostgreSQL, in the test database) or databases (MariaDB) for referencing tables."""
    return [f"ref_{database[-6:]}_{i}_{rng.randrange(10**6)}" for i in range(2)]


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_prune_keeps_rows_referenced_from_any_schema_with_any_on_delete_action(tmp_path, backend, server_for):
    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    project = write_data_project(tmp_path, "prunes_app", PRUNES)
    env = {**os.environ, "PYTHONPATH": str(project)}
    for round_ in range(ROUNDS):
        url = server.create_database()
        engine = sa.create_engine(url)
        admin = server.engine()
        default = "public" if backend == "postgresql" else url.database
        others = _schemas(backend, rng, url.database)
        try:
            metadata = sa.MetaData()
            parents = sa.Table("parents", metadata,
                               sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                               sa.Column("deleted", sa.Integer), schema=default)
            count = rng.randint(20, 80)
            rows = [{"id": i, "deleted": 1 if rng.random() < 0.6 else None} for i in range(1, count + 1)]
            children, child_rows = [], {}
            for n in range(rng.randint(2, 4)):
                schema = rng.choice([default, *others])
                action = rng.choice(ACTIONS[backend])
                child = sa.Table(f"child_{n}", metadata,
                                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                                 sa.Column("parent_id", sa.Integer,
                                           sa.ForeignKey(parents.c.id, ondelete=action), nullable=True),
                                 schema=schema)
                children.append((child, action))
                child_rows[child] = [{"id": i, "parent_id": rng.randint(1, count)}
                                     for i in range(1, rng.randint(1, count // 3) + 1)]
            with engine.begin() as conn:
                for schema in others:
                    conn.execute(sa.schema.CreateSchema(schema))
                metadata.create_all(conn)
                ledger.metadata.create_all(conn)
                conn.execute(sa.insert(parents), rows)
                for child, values in child_rows.items():
                    conn.execute(sa.insert(child), values)
            referenced = {r["parent_id"] for values in child_rows.values() for r in values}
            prunable = {r["id"] for r in rows if r["deleted"] is not None}
            layout = [(child.schema == default, action) for child, action in children]

            done = subprocess.run(dbsync_argv(project, url, "--format", "json", "prune", "--batch-size",
                                              str(rng.choice([3, 10, 1000]))),
                                  capture_output=True, text=True, env=env, timeout=300)
            assert done.returncode == 0, (seed, round_, layout, done.stderr)
            report = json.loads(done.stdout)
            with engine.connect() as conn:
                left = set(conn.execute(sa.select(parents.c.id)).scalars())
                for child, values in child_rows.items():
                    now = sorted(tuple(r) for r in conn.execute(sa.select(child.c.id, child.c.parent_id)))
                    assert now == sorted((r["id"], r["parent_id"]) for r in values), (seed, round_, layout)
            assert left == {r["id"] for r in rows} - (prunable - referenced), (seed, round_, layout)
            assert report["kept_referenced"]["old_parents"] == len(prunable & referenced), (seed, round_, layout)
        finally:
            engine.dispose()
            if backend == "mysql":  # PostgreSQL's schemas go with the test database
                with admin.connect() as conn:
                    for schema in others:
                        conn.execute(sa.schema.DropSchema(schema, if_exists=True))
                    conn.commit()
            admin.dispose()
            server.drop_database(url)


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_a_foreign_key_added_while_prune_runs_loses_no_row(tmp_path, backend, server_for):
    """A table (in another schema/database) referencing ``parents ON DELETE CASCADE`` is created while
    the prune runs, and rows referencing prunable parents are inserted: none may be lost.  The batch's
    own transaction reads the references again under its lock: it rolls back (exit 2, "changed while
    it ran") or never meets them."""
    import time

    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    project = write_data_project(tmp_path, "prunes_app", PRUNES)
    url = server.create_database()
    engine = sa.create_engine(url)
    default = "public" if backend == "postgresql" else url.database
    other = _schemas(backend, rng, url.database)[0]
    try:
        metadata = sa.MetaData()
        parents = sa.Table("parents", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                           sa.Column("deleted", sa.Integer), schema=default)
        count = 120
        with engine.begin() as conn:
            metadata.create_all(conn)
            ledger.metadata.create_all(conn)
            conn.execute(sa.insert(parents), [{"id": i, "deleted": 1} for i in range(1, count + 1)])
        proc = subprocess.Popen(dbsync_argv(project, url, "prune", "--batch-size", "1", "--batch-seconds", "0",
                                            "--sleep", str(rng.choice([0.02, 0.05]))),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(project)})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if conn.execute(sa.select(sa.func.count()).select_from(parents)).scalar() <= count - rng.randint(2, 6):
                    break
            time.sleep(0.01)
        child = sa.Table("late_child", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                         sa.Column("parent_id", sa.Integer, sa.ForeignKey(parents.c.id, ondelete="CASCADE")),
                         schema=other)
        with engine.begin() as conn:
            conn.execute(sa.schema.CreateSchema(other))
            child.create(conn)
        with engine.begin() as conn:  # the last parents the walk reaches: still there
            top = sorted(conn.execute(sa.select(parents.c.id)).scalars())[-10:]
            conn.execute(sa.insert(child), [{"id": n, "parent_id": p} for n, p in enumerate(top, 1)])
        out, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 8) and "Traceback" not in err, (seed, proc.returncode, err)
        if proc.returncode == 8:  # the run's report names the prune and why it stopped
            assert "changed while it ran" in out + err, (seed, out, err)
        with engine.connect() as conn:
            kept = sorted(conn.execute(sa.select(child.c.parent_id)).scalars())
        assert kept == top, (seed, proc.returncode, kept, top)
    finally:
        engine.dispose()
        if backend == "mysql":
            with server.engine().connect() as conn:
                conn.execute(sa.schema.DropSchema(other, if_exists=True))
                conn.commit()
        server.drop_database(url)
