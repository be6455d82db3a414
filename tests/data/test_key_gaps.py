"""Range stepping across gaps in the keys: a walk's batches follow the pending rows, never the
empty keys between them.

A table whose first keys are dense is walked by range stepping (``key > a AND key <= a + n``).
Keys past a gap (rows an old release inserted far past the end, ids from another sequence, a
bulk import at 10**9) used to be reached one empty batch of *n* keys at a time: 1,000 rows at
10**6 behind 6,000 dense ones, batches of 50, meant 20,000 empty batches, minutes of
``0 rows/s`` (the live-writer test's ``MP_PROVE_SEED=481293``: stopped at 50 of 7,280 rows
until its 300 s timeout).  The number of batches is what the runner controls, whatever the
machine's speed: here it must be bounded by the rows and the number of gaps, never by the
gaps' width.
"""

from __future__ import annotations

import math
import os
import random

import pytest
import sqlalchemy as sa

from migrations_policy.data import DataMigration, Registry, RunOptions, data_migration, run

from .support import create_schema, items, scalar

t = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
PENDING = sa.and_(t.c.dst.is_(None), t.c.src.is_not(None))
SEEDS = int(os.environ.get("MP_GAP_SEEDS", "2"))


def set_based() -> DataMigration:
    return DataMigration("copy_items", table=t, key="id", pending=PENDING, values={"dst": t.c.src, "n": t.c.n + 1})


def function_form() -> DataMigration:
    @data_migration("copy_items", table=t, key="id", pending=PENDING)
    def copy_items(connection, batch):
        rows = connection.execute(sa.select(t.c.id, t.c.src, t.c.n).where(batch.where)).all()
        for key, src, n in rows:
            connection.execute(sa.update(t).where(t.c.id == key).values(dst=src, n=n + 1))
        return len(rows)
    return copy_items


def layout(rng: random.Random) -> list[tuple[int, int]]:
    """Blocks of consecutive keys (first key, rows): a dense first block (range stepping is chosen
    from the first 10,000 keys), then 1 to 3 blocks each behind a gap of 10**3 to 10**9 keys."""
    blocks = [(1, rng.randint(5_000, 6_000))]
    for _ in range(rng.randint(1, 3)):
        start, rows = blocks[-1]
        gap = int(10 ** rng.uniform(3, 9))
        if start + rows + gap + 1_000 >= 2**31:
            break
        blocks.append((start + rows + gap, rng.randint(1, 800)))
    return blocks


@pytest.mark.parametrize("draw", range(SEEDS))
def test_range_walk_steps_over_gaps_in_the_keys(db_engine, draw):
    seed = int(os.environ.get("MP_GAP_SEED", random.randrange(10**9)))
    print(f"MP_GAP_SEED={seed}")
    rng = random.Random(seed)
    blocks = layout(rng)
    width = rng.choice((50, 120, 400))
    workers = rng.choice((1, 2))
    migration = rng.choice((set_based, function_form))()
    create_schema(db_engine)
    with db_engine.begin() as conn:
        for start, rows in blocks:
            conn.execute(sa.insert(items), [{"id": start + i, "src": f"v{start + i}"} for i in range(rows)])
    total = sum(rows for _, rows in blocks)
    report = run(db_engine, Registry([migration]), RunOptions(batch_size=width, batch_seconds=None, workers=workers))
    m = report.migrations[0]
    context = (seed, blocks, width, workers, m.strategy, m.strategy_note)
    assert (report.exit_code, m.state, m.migrated) == (0, "complete", total), context
    assert scalar(db_engine, sa.select(sa.func.count()).select_from(items).where(items.c.n == 1)) == total
    # Each block takes its rows / width batches (+1 where a batch straddles its start); each gap
    # costs at most a few batches (the one that finds it empty, a claim's end), never gap / width.
    bound = sum(math.ceil(rows / width) + 1 for _, rows in blocks) + 3 * (len(blocks) - 1) + 2
    assert m.batches <= bound, (m.batches, bound, context)
