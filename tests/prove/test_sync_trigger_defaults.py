"""Sync triggers and server defaults: a default is nobody's write, and must never win over one.

A pair (old, new) on a table where the old column, the new one, both or neither has a server
default (drawn), with the copy data migration the split generates (pending while they differ).
Release N inserts writing the old column or leaving it to its default; release N+1 inserts writing
the new column or leaving it to its default; then the copy runs.  Every value a release wrote must
be the value of both columns afterwards (a row where neither wrote: the defaults, whatever they
are, in step).  Where both columns have a default, an INSERT cannot tell a write from a default:
``create_sync_trigger`` must refuse, installing nothing.  ``MP_SYNC_DEFAULTS_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from migrations_policy.data import DataMigration, Registry, run
from migrations_policy.data.ledger import metadata as ledger_metadata
from migrations_policy.window import sync_triggers  # registers op.create_sync_trigger
from migrations_policy.window.sync_triggers import SyncPairRefused


def _seed() -> int:
    return int(os.environ.get("MP_SYNC_DEFAULTS_SEED") or random.SystemRandom().randrange(1 << 30))


def test_a_server_default_never_wins_over_a_write(db_url, backend):
    seed = _seed()
    rng = random.Random(seed)
    old_default = rng.choice([None, "od"])
    new_default = rng.choice([None, "nd"])
    print(f"seed {seed}: old default {old_default!r}, new default {new_default!r}")
    engine = sa.create_engine(db_url)
    metadata = sa.MetaData()
    table = sa.Table("pairs", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                     sa.Column("old", sa.String(20), server_default=old_default),
                     sa.Column("new", sa.String(20), server_default=new_default))
    try:
        metadata.create_all(engine)
        ledger_metadata.create_all(engine)
        if old_default and new_default:  # ambiguous on INSERT: refused, nothing installed
            with pytest.raises(SyncPairRefused, match="both have a server default"):
                with engine.begin() as conn:
                    Operations(MigrationContext.configure(conn)).create_sync_trigger("pairs", old="old", new="new")
            with engine.connect() as conn:
                assert sync_triggers.sync_triggers(conn) == []
            return
        with engine.begin() as conn:
            Operations(MigrationContext.configure(conn)).create_sync_trigger("pairs", old="old", new="new")
        wrote = {}
        with engine.begin() as conn:
            for key in range(1, rng.randint(6, 14)):
                value = rng.choice(["w" + str(rng.randrange(100)), None])
                if rng.random() < 0.5:  # release N: the old column (or its default)
                    row = {"id": key} if value is None else {"id": key, "old": value}
                else:  # release N+1: the new column (or its default)
                    row = {"id": key} if value is None else {"id": key, "new": value}
                conn.execute(sa.insert(table).values(**row))
                wrote[key] = value
        copy = DataMigration("pairs_new_from_old", table=sa.table("pairs", sa.column("id"), sa.column("old"),
                                                                   sa.column("new")),
                             key="id", values={"new": sa.column("old")})
        assert run(engine, Registry([copy])).exit_code == 0
        with engine.connect() as conn:
            rows = {r.id: (r.old, r.new) for r in conn.execute(sa.select(table))}
        for key, value in wrote.items():
            old, new = rows[key]
            if value is not None:
                assert (old, new) == (value, value), (seed, key, value, rows[key])
            else:
                assert old == new, (seed, key, rows[key])
    finally:
        with engine.begin() as conn:
            Operations(MigrationContext.configure(conn)).drop_sync_trigger("pairs", old="old", new="new")
        metadata.drop_all(engine)
        engine.dispose()
