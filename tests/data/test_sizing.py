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

from migrations_policy.data.walk.sizing import FIXED_SHARE, BatchSizer, floor_rows


def _walk(rng: random.Random, sizer: BatchSizer, start: int, ceiling: int, fixed: float, per_row: float,
          noise: float, inside: float, outliers: float = 0.0) -> tuple[list[int], list[float]]:
    """80 batches sized by *sizer* from *start*: each batch's size and its time without noise.  A batch costs
    ``fixed + per_row * rows``, *inside* of the fixed part in the migrating statement, with the load's
    proportional *noise*; a share *outliers* of the statements waits 3-10x longer (a CPU the load took)."""
    size, sizes, times = start, [], []
    for _ in range(80):
        spike = rng.uniform(3, 10) if outliers and rng.random() < outliers else 1.0
        migrating = (inside * fixed + per_row * size) * math.exp(rng.gauss(0, noise)) * spike
        seconds = migrating + (1 - inside) * fixed * math.exp(rng.gauss(0, noise))
        sizes.append(size)
        times.append(fixed + per_row * size)
        size = sizer.next(size, seconds, migrating)
        assert 1 <= size <= ceiling
    return sizes, times


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
        sizes, times = _walk(rng, BatchSizer(target, ceiling), start, ceiling, fixed, per_row, noise, inside)
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


def _ideal(fixed: float, per_row: float, target: float, ceiling: int) -> float:
    """The size a sizer that knew both parts would choose: about the target, but never so small
    that the fixed part is over ``FIXED_SHARE`` of a batch's time (up to ``floor_rows``' limit)."""
    wanted = (target - fixed) / per_row if fixed < target else 0.0
    return min(max(wanted, floor_rows(fixed, per_row, target)), ceiling)


def test_a_statements_own_fixed_cost_is_not_read_as_per_row_cost():
    """The fixed part may sit anywhere: in the bookkeeping round trips outside the migrating
    statement, or inside it (its round trip, its lock-wait setting, the claim's advance and the
    ledger folded into it as ``WITH`` parts: then nothing outside but the commit).  Wherever it
    is, the sizer must see it as fixed: batches of about the size a sizer knowing both parts
    would choose (``_ideal``): the fixed part at most twice ``FIXED_SHARE`` of a batch (so at
    least 80 % of what rows-only batches would move), and never three times the ideal size,
    whatever the load's noise and its outliers (a batch now and then waiting 3-10x longer for a
    CPU).  A sizer reading the statement's fixed part as per-row aims its whole time at the
    target instead: with 15 ms fixed, 30 % of every 50 ms batch does not move a row."""
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    rng = random.Random(seed)
    target = 0.05
    for case in range(40):
        fixed = math.exp(rng.uniform(math.log(0.002), math.log(0.3)))
        per_row = math.exp(rng.uniform(math.log(5e-7), math.log(2e-5)))
        noise = rng.choice([0.0, 0.1, 0.25])
        outliers = rng.choice([0.0, 0.05, 0.1])
        inside = rng.choice([1.0, rng.uniform(0.5, 1.0)])  # most or all of the fixed part in the statement
        start = rng.choice([500, 1000, 5000])
        ceiling = 10 * start
        sizes, times = _walk(rng, BatchSizer(target, ceiling), start, ceiling, fixed, per_row, noise, inside,
                             outliers)
        tail = sizes[-30:]
        n = statistics.median(tail)
        ideal = _ideal(fixed, per_row, target, ceiling)
        what = (f"case {case}: fixed {fixed * 1000:.2f} ms ({inside:.0%} inside the statement), "
                f"{per_row * 1e6:.3f} us/row, noise {noise}, outliers {outliers}, start {start}: "
                f"median size {n:.0f} of the ideal {ideal:.0f}; last sizes {tail[-5:]}")
        share, ideal_share = fixed / (fixed + per_row * n), fixed / (fixed + per_row * ideal)
        # under-sized: the fixed part eats the throughput
        assert share <= 2 * max(FIXED_SHARE, ideal_share), f"{what}: the fixed part is {share:.0%} of a batch"
        assert n <= 3 * ideal, f"{what}: over-sized"  # batches hold their row locks too long
