"""``dbsync prune`` never deletes a row that a concurrently committed row references.

Generated: ``parents`` with a random share prunable; a table ``children`` (in the default or another
schema/database) referencing it ``ON DELETE CASCADE`` or ``SET NULL`` (the actions that destroy
quietly).  While the prune runs with small random batches, application writers insert children of
random prunable parents, each holding its transaction open a random moment before committing.  A
writer whose parent was pruned first gets a foreign-key error (the parent is gone: the application
sees it); every child a writer committed must still exist afterwards, pointing at its parent, and
that parent must exist.

PostgreSQL under READ COMMITTED: a DELETE whose ``NOT EXISTS (child)`` was evaluated in a snapshot
taken before a child's insert committed, and that waited for the child's key-share lock on the
parent, deleted the parent anyway, and the foreign key's action then removed (or nulled) the
committed child.  ``MP_PROVE_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time

import pytest
import sqlalchemy as sa

from migrations_policy.data import ledger

from ..data.support import dbsync_argv
from ..helpers import write_data_project
from .test_prune_references import PRUNES


def _writer(engine: sa.Engine, children: sa.Table, ids: list[int], rng: random.Random, first_id: int,
            stop: threading.Event, committed: list, errors: list) -> None:
    key = first_id
    while not stop.is_set():
        key += 1
        parent = rng.choice(ids)
        try:
            with engine.begin() as conn:
                conn.execute(sa.insert(children).values(id=key, parent_id=parent))
                time.sleep(rng.uniform(0, 0.05))
            committed.append((key, parent))
        except sa.exc.IntegrityError:
            pass  # the parent was pruned before this insert: the application is told
        except sa.exc.OperationalError as exc:  # a deadlock or lock wait the application would retry
            errors.append(str(exc.orig)[:160])


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_prune_keeps_parents_of_children_committed_while_it_runs(tmp_path, backend, server_for):
    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED") or random.randrange(10**6))
    rng = random.Random(seed)
    project = write_data_project(tmp_path, "prunes_app", PRUNES)
    env = {**os.environ, "PYTHONPATH": str(project)}
    url = server.create_database()
    engine = sa.create_engine(url, pool_size=4)
    admin = server.engine()
    default = "public" if backend == "postgresql" else url.database
    other = f"ref_{url.database[-6:]}_{rng.randrange(10**6)}"
    schema = rng.choice([default, other])
    action = rng.choice(["CASCADE", "SET NULL"])
    batch = rng.choice([5, 20, 50])
    print(f"MP_PROVE_SEED={seed}: children in {'the default' if schema == default else 'another'} "
          f"schema, ON DELETE {action}, batch size {batch}")
    try:
        metadata = sa.MetaData()
        parents = sa.Table("parents", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                           sa.Column("deleted", sa.Integer), schema=default)
        children = sa.Table("children", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                            sa.Column("parent_id", sa.Integer, sa.ForeignKey(parents.c.id, ondelete=action)),
                            schema=schema)
        count = rng.randint(600, 1200)
        rows = [{"id": i, "deleted": 1 if rng.random() < 0.8 else None} for i in range(1, count + 1)]
        with engine.begin() as conn:
            if schema != default:
                conn.execute(sa.schema.CreateSchema(other))
            metadata.create_all(conn)
            ledger.metadata.create_all(conn)
            conn.execute(sa.insert(parents), rows)
        prunable = [r["id"] for r in rows if r["deleted"] is not None]
        stop, committed, errors = threading.Event(), [], []
        writers = [threading.Thread(target=_writer, args=(engine, children, prunable, random.Random(seed + n),
                                                          n * 10**6, stop, committed, errors))
                   for n in range(2)]
        for w in writers:
            w.start()
        try:
            time.sleep(0.2)
            done = subprocess.run(dbsync_argv(project, url, "prune", "--batch-size", str(batch)),
                                  capture_output=True, text=True, env=env, timeout=600)
        finally:
            stop.set()
            for w in writers:
                w.join()
        with engine.connect() as conn:
            left = set(conn.execute(sa.select(parents.c.id)).scalars())
            now = dict(conn.execute(sa.select(children.c.id, children.c.parent_id)).all())
        lost = [(k, p) for k, p in committed if now.get(k, "gone") != p]
        orphaned = [(k, p) for k, p in committed if p not in left]
        print(f"{len(committed)} children committed during the prune; exit {done.returncode}; "
              f"{len(errors)} writer lock errors")
        assert not lost, (seed, action, f"{len(lost)} committed children lost or changed", lost[:10], done.stderr[-500:])
        assert not orphaned, (seed, action, f"{len(orphaned)} parents of committed children pruned", orphaned[:10])
        assert done.returncode == 0, (seed, done.stderr[-800:])
        assert committed, "no child was committed while the prune ran: the test proved nothing"
    finally:
        engine.dispose()
        if backend == "mysql" and schema != default:
            with admin.connect() as conn:
                conn.execute(sa.schema.DropSchema(other, if_exists=True))
                conn.commit()
        admin.dispose()
        server.drop_database(url)
