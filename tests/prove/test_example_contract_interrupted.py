"""The example's own release-3 contract (``examples/inventory``: the foreign key validated, the sync
triggers dropped, ``nodes.extra`` and ``nodes.name`` dropped), interrupted at every one of its
statements on PostgreSQL and MariaDB, then resumed with the documented command.

Release 1 holds rows; release 2's expand ran and its data migrations are complete, so the contract is
allowed (``check`` 5).  A child ``dbsync upgrade --contract`` pauses before statement *k* of the
contract (the journal's statement counter, as ``test_example_expand_interrupted`` does) while the test
holds a real lock the statement needs; then the statement's ``lock_timeout`` gives up (``timeout``), or
the child is SIGKILLed a random moment later (``kill``).  Afterwards ``dbsync check`` must still say
the contract is allowed (5; 0 when a kill landed after the revision committed) and ``dbsync upgrade
--contract`` must reach the head: ``extra``/``name`` gone, every ``meta``/``display_name`` value as
release 2 copied it, no sync trigger left, no row lost.  ``MP_PROVE_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa

from .test_example_expand_interrupted import _dbsync, _example, _interrupt, _planned, _release1, _table_of

R3 = "r3_drop_extra_name"
KILLS = 2


def _assert_release3(engine: sa.Engine, nodes: int) -> None:
    inspector = sa.inspect(engine)
    columns = [c["name"] for c in inspector.get_columns("nodes")]
    assert "extra" not in columns and "name" not in columns, columns
    assert columns.count("meta") == 1 and columns.count("display_name") == 1, columns
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, meta, display_name FROM nodes ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [(i, f"e{i}", f"n{i}") for i in range(1, nodes + 1)]
        assert conn.execute(sa.text("SELECT count(*) FROM ports")).scalar() == nodes
        if engine.dialect.name == "postgresql":
            triggers = conn.execute(sa.text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'nodes'::regclass "
                                            "AND NOT tgisinternal AND tgname NOT LIKE 'mp_done_%'")).scalars().all()
            invalid = conn.execute(sa.text("SELECT count(*) FROM pg_constraint WHERE NOT convalidated")).scalar()
            assert invalid == 0
        else:
            triggers = conn.execute(sa.text("SELECT trigger_name FROM information_schema.triggers "
                                            "WHERE event_object_schema = DATABASE() AND event_object_table = 'nodes' "
                                            "AND trigger_name NOT LIKE 'mp_done_%'")).scalars().all()
        assert triggers == [], triggers


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_example_release3_contract_interrupted_at_every_statement_resumes(tmp_path, backend, server_for, capsys):
    server = server_for(backend)
    seed = int(os.environ.get("MP_PROVE_SEED") or random.randrange(10**6))
    print(f"MP_PROVE_SEED={seed}")
    rng = random.Random(seed)
    trials, texts, outcomes = None, [], []
    n = 0
    while trials is None or n < len(trials):
        url = server.create_database()
        engine = sa.create_engine(url)
        try:
            ini = _example(tmp_path / f"trial{n}", url)
            nodes = _release1(ini, engine, rng)
            assert _dbsync(ini, capsys, "upgrade", "--expand")[0] == 0
            assert _dbsync(ini, capsys, "online_data_migrations")[0] in (0, 3)
            assert _dbsync(ini, capsys, "check")[0] == 5
            if trials is None:
                texts = _planned(ini, engine, R3)
                trials = [("timeout", k) for k in range(1, len(texts) + 1)]
                trials += [("kill", rng.randint(1, len(texts))) for _ in range(KILLS)]
            mode, at = trials[n]
            code, err = _interrupt(ini, engine, at, _table_of(texts[at - 1]), mode, rng, tmp_path / f"gate{n}", R3,
                                   "--contract")
            assert "Traceback" not in err, (seed, mode, at, err)
            outcomes.append((mode, at, code))
            if code != 0:
                with engine.connect() as conn:
                    finished = R3 in conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
                check, check_err = _dbsync(ini, capsys, "check")
                assert check == (0 if finished else 5), \
                    f"seed {seed}, {mode} at {at} ({texts[at - 1]}), finished {finished}: check {check}: {check_err}"
                resumed, resume_err = _dbsync(ini, capsys, "upgrade", "--contract")
                assert resumed == 0, (seed, mode, at, texts[at - 1], resume_err)
            _assert_release3(engine, nodes)
            assert _dbsync(ini, capsys, "check")[0] == 0, (seed, mode, at)
        finally:
            engine.dispose()
            server.drop_database(url)
        n += 1
    print("outcomes (mode, statement, exit code of the interrupted run):", outcomes)
    assert sum(code not in (0, None) or mode == "kill" for mode, _, code in outcomes) >= len(texts) // 2
