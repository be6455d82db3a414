"""Batch sizing under a fixed per-batch cost (issue 24): a batch costs ``fixed + per_row * rows``
(round trips, commit, and on a loaded machine the wait for a CPU), with noise.  Batches must
never shrink to where the fixed part is most of their time (prune's batches once collapsed to
1 row under load: 0.11x one DELETE), and must aim at the target where the target leaves room.
The runner measures the batch's migrating statements apart from the whole transaction; part of
the fixed cost (the statement's own round trip) hides in the migrating time.  Pure arithmetic:
the costs are generated, no database is involved."""

from __future__ import annotations

import math
import random
import statistics

from migrations_policy.data.sizing import FIXED_SHARE, BatchSizer


def test_batches_amortise_the_fixed_cost_and_aim_at_the_target():
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    rng = random.Random(seed)
    target = 0.05
    for case in range(40):
        fixed = math.exp(rng.uniform(math.log(0.0002), math.log(0.5)))
        per_row = math.exp(rng.uniform(math.log(2e-7), math.log(5e-5)))
        noise = rng.choice([0.0, 0.1, 0.3])
        inside = rng.uniform(0.0, 0.3)  # share of the fixed part inside the migrating statement (its round trip)
        start = rng.choice([200, 1000, 5000])
        ceiling = 10 * start
        sizer = BatchSizer(target, ceiling)
        size, sizes, times = start, [], []
        for _ in range(80):
            migrating = (inside * fixed + per_row * size) * math.exp(rng.gauss(0, noise))
            seconds = migrating + (1 - inside) * fixed * math.exp(rng.gauss(0, noise))
            sizes.append(size)
            times.append(fixed + per_row * size)
            size = sizer.next(size, seconds, migrating)
            assert 1 <= size <= ceiling
        tail = sizes[-20:]
        what = (f"case {case}: fixed {fixed * 1000:.2f} ms, {per_row * 1e6:.3f} us/row, noise {noise}, "
                f"start {start}: last sizes {tail[-5:]}")
        n = statistics.median(tail)
        if n < ceiling * 0.9:  # the ceiling (10x --batch-size) may stop it first
            share = fixed / (fixed + per_row * n)
            assert share <= 3 * FIXED_SHARE, f"{what}: the fixed part is {share:.0%} of a batch"
        if fixed <= FIXED_SHARE * target / 2 and n < ceiling * 0.9:  # room for the target
            took = statistics.median(times[-20:])
            assert target / 2.5 <= took <= target * 2.5, f"{what}: batches take {took * 1000:.0f} ms"
