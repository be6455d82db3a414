"""The example's first expands (``expand_root``: the framework's ledger; ``r1_inventory``: the
application's tables), run on an empty database as the quickstart does, killed before or during each
of their statements on PostgreSQL and MariaDB (where each ``CREATE TABLE`` commits on its own), then
resumed with the documented command.

Afterwards ``dbsync check`` must say what to do (exit 3: expand pending; 5 when the kill landed after the
run had finished, as the process was exiting), ``dbsync upgrade --expand``
must reach the head with every table present once, and the run that finished the install must still
be the install: ``dbsync rollback`` refuses it (exit 4, "root") — a rollback never reverts to the
root, and a resumed install is no less an install than an uninterrupted one.

Seeded: ``MP_PROVE_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa

from .test_example_expand_interrupted import R2, _dbsync, _example, _interrupt, _planned

REVISIONS = ("expand_root", "r1_inventory")


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_the_install_interrupted_at_every_statement_resumes_and_stays_an_install(tmp_path, backend, server_for,
                                                                                  capsys):
    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6)))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    trials = []
    probe_url = server.create_database()
    try:
        probe_engine = sa.create_engine(probe_url)
        for revision in REVISIONS:
            texts = _planned(_example(tmp_path / f"probe_{revision}", probe_url), probe_engine, revision)
            trials += [(revision, at, len(texts)) for at in range(1, len(texts) + 1)]
        probe_engine.dispose()
    finally:
        server.drop_database(probe_url)
    outcomes = []
    for n, (revision, at, total) in enumerate(trials):
        url = server.create_database()
        engine = sa.create_engine(url)
        try:
            ini = _example(tmp_path / f"trial{n}", url)
            code, err = _interrupt(ini, engine, at, "nodes", "kill", rng, tmp_path / f"gate{n}",
                                   revision=revision)
            assert "Traceback" not in err, (seed, revision, at, err)
            outcomes.append((revision, at, code))
            if code == 0:
                continue
            with engine.connect() as conn:  # a kill may land after the run finished (process exit)
                finished = sa.inspect(conn).has_table("alembic_version") and R2 in conn.execute(
                    sa.text("SELECT version_num FROM alembic_version")).scalars().all()
            check, check_err = _dbsync(ini, capsys, "check")
            assert check == (5 if finished else 3), (seed, revision, at, finished, check, check_err)
            resumed, resume_err = _dbsync(ini, capsys, "upgrade", "--expand")
            assert resumed == 0, (seed, revision, at, resume_err)
            tables = sa.inspect(engine).get_table_names()
            assert {"nodes", "ports"} <= set(tables), tables
            rollback, rollback_err = _dbsync(ini, capsys, "rollback", "--dry-run")
            assert rollback == 4 and "root" in rollback_err, (seed, revision, at, rollback, rollback_err)
        finally:
            engine.dispose()
            server.drop_database(url)
    print("outcomes (revision, statement, exit code of the interrupted run):", outcomes)
