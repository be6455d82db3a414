"""``dbsync upgrade --expand`` of a generated history killed again and again, each rerun interrupted in
turn (the resume of a partly applied revision killed too), then resumed to the head.

Each case draws (a printed seed) a chain of two to four expand revisions of several operations each
(``expand_history.py``: columns, plain and ``CONCURRENTLY`` indexes in autocommit blocks on
PostgreSQL, tables with foreign keys, widened varchars, sync triggers, NOT VALID constraints; on
MariaDB every DDL commits on its own), installs release 1 and a random prefix, lets release N write,
then interrupts ``upgrade --expand`` one to three times in a row with the modes of
``test_rollback_kill`` (SIGKILL as the journal reaches a drawn statement, as a drawn object shows in
the catalog, after a delay, while a statement waits for a lock an application transaction holds, or
a lock wait that gives up).  After every interruption ``status`` and ``check`` tell what the catalog
holds and release N writes again; then one ``upgrade --expand`` must reach the head with the schema of
a fresh database migrated straight there, an empty journal and every row release N wrote.
Seeded: ``MP_EXPAND_KILL_SEED``; ``MP_EXPAND_KILL_CASES`` cases per backend (default 2).
"""

from __future__ import annotations

import os
import random

import pytest
from alembic import command as alembic_command
from alembic.config import Config

from ..gate.expand_project import ExpandProject
from . import expand_history as history
from .test_rollback_kill import EXPAND, UP, App, Attack, Databases, dbsync, fresh_schema

CASES = int(os.environ.get("MP_EXPAND_KILL_CASES", "2"))


def _case(seed: int, backend: str, tmp_path, server_for, capsys) -> list[str]:
    rng = random.Random(seed)
    dbs = Databases(backend, tmp_path, server_for)
    proj = None
    try:
        proj = ExpandProject(tmp_path / "project", dbs.new(), "pass", extra_tables=history.BASE_TABLES)
        revs = history.generate(rng, proj.engine.dialect.name, rng.randint(2, 4))
        history.write(proj.directory / "migrations" / "versions", revs)
        attack = Attack(proj, revs, rng, capsys)
        attack.target = rng.randrange(0, len(attack.chain) - 1)
        alembic_command.upgrade(Config(str(proj.ini)), attack.chain[attack.target])
        app = App(proj.engine, rng)
        app.write()
        for _ in range(rng.randint(1, 3)):
            if attack.position() == len(attack.chain) - 1 and not attack.partly():
                break  # a kill landed after the run finished: nothing left to interrupt
            attack.interrupt(EXPAND, UP)
            attack.check_truth()
            app.write()
        code, _, err = dbsync(proj, capsys, *EXPAND)
        assert code == 0, (err, attack.log)
        assert attack.position() == len(attack.chain) - 1, attack.log
        assert proj.journal() == [], attack.log
        assert attack.check_truth() == [], attack.log
        assert history.schema(proj.engine) == fresh_schema(proj, dbs, attack.chain[-1]), attack.log
        app.write()
        app.verify()
        return attack.log
    finally:
        if proj is not None:
            proj.engine.dispose()
        dbs.drop_all()


@pytest.mark.parametrize("backend", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_an_expand_killed_again_and_again_resumes_to_the_head(tmp_path, backend, server_for, capsys):
    base = int(os.environ.get("MP_EXPAND_KILL_SEED") or random.randrange(10**6))
    with capsys.disabled():
        print(f"\nMP_EXPAND_KILL_SEED={base} MP_EXPAND_KILL_CASES={CASES} ({backend})")
    for number in range(CASES):
        seed = base + number
        try:
            log = _case(seed, backend, tmp_path / f"case{number}", server_for, capsys)
        except Exception as failed:  # the seed in the failure itself (xdist keeps no stdout)
            raise AssertionError(f"MP_EXPAND_KILL_SEED={seed} MP_EXPAND_KILL_CASES=1 ({backend}): "
                                 f"{type(failed).__name__}: {failed}") from failed
        with capsys.disabled():
            print(f"  seed {seed}: " + "; ".join(log))
