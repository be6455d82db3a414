"""A revision that creates sync triggers and then re-creates their table in the same revision
(``batch_alter_table``: SQLite's "move and copy", or ``recreate="always"`` anywhere) keeps them
(issue 27): the triggers are those present when the table is dropped, not only those present before
the revision.  Generated: the batch's operations, its ``recreate`` mode and its place in the
release-2 expand; then release 1 writes the old columns and every write must reach the new ones.
Seeded: ``MP_PROVE_SEED``.
"""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy.window.sync_triggers import sync_triggers

from ..gate.conftest import App
from ..helpers import copy_example, forget_example_modules, set_ini_option
from .test_sync_trigger_attacks import release_n_writes

R2 = "0002_r2_meta_display_name_version.py"
BATCH_OPS = [
    'batch.alter_column("provision_state", type_=sa.String(32), existing_type=sa.String(15), '
    'existing_nullable=False, existing_server_default="enroll")',
    'batch.add_column(sa.Column("note", sa.String(20), nullable=True))',
    'batch.create_index("ix_nodes_uuid", ["uuid"])',
]


def _expand_with_batch(app: App, rng: random.Random) -> str:
    path = app.ini.parent / "migrations" / "versions" / "expand" / R2
    text = path.read_text()
    head, rest = text.split("def upgrade() -> None:\n", 1)
    body, tail = rest.split("\n\ndef downgrade()", 1)
    lines = body.rstrip("\n").split("\n")
    recreate = rng.choice(["auto", "always"])
    ops = rng.sample(BATCH_OPS, rng.randint(1, len(BATCH_OPS)))
    block = [f'    with op.batch_alter_table("nodes", recreate={recreate!r}) as batch:'] + \
        [f"        {o}" for o in ops]
    # after the sync triggers (the case that lost them), or between the two pairs
    first_pair = next(i for i, line in enumerate(lines) if "create_sync_trigger" in line)
    at = rng.choice([len(lines), first_pair + 1])
    lines[at:at] = block
    path.write_text(head + "def upgrade() -> None:\n" + "\n".join(lines) + "\n\ndef downgrade()" + tail)
    return f"recreate={recreate} ops={ops} at={'end' if at == len(lines) - len(block) else 'between'}"


@pytest.mark.parametrize("round_", range(3))
# SQLite: the batch re-creates the table (PostgreSQL/MariaDB alter in place; a forced rebuild there is
# refused or fails on the foreign key this same revision adds to nodes).
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_triggers_created_then_table_rebuilt_in_one_revision_are_kept(tmp_path, db_url, backend, capsys, round_):
    seed = int(os.environ.get("MP_PROVE_SEED", random.randrange(10**6))) + round_
    print(f"MP_PROVE_SEED={seed - round_} (round {round_})")
    rng = random.Random(seed)
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "5")
    forget_example_modules()
    app = App(ini, db_url)
    try:
        app.alembic_upgrade("r1_inventory")
        app.seed_release1()
        shape = _expand_with_batch(app, rng)
        capsys.readouterr()
        code = app.dbsync("upgrade", "--expand")
        err = capsys.readouterr().err
        assert code == 0, (seed, shape, err)
        with app.engine.connect() as conn:
            pairs = {(t.table, t.old, t.new) for t in sync_triggers(conn)}
        assert {("nodes", "extra", "meta"), ("nodes", "name", "display_name")} <= pairs, (seed, shape, pairs)
        assert release_n_writes(app, rng) == [], (seed, shape)
    finally:
        app.engine.dispose()
        forget_example_modules()
