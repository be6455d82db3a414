"""How many rows the runner's next batch takes, from how long the last ones took.

A batch costs a fixed part and a part per row: ``seconds = fixed + per_row * rows``.  The fixed
part (the round trips of the batch's bookkeeping statements, the commit, and under load the
wait for a CPU between them) does not shrink with the batch.  Scaling the size by
``target / seconds`` alone shrinks batches toward one row once the fixed part alone exceeds
the target (measured on a loaded machine: prune batches of 1..29,533 rows, 0.11x one
``DELETE``); each halving then makes the run slower without making a batch shorter.

Both parts are *measured*, not inferred: the runner times the batch's migrating statements
(the UPDATE, the project's function, the prune's DELETE) apart from the whole transaction.
The rest of the transaction is the fixed part; the migrating time per row the per-row part
(its own round trip counted in it, so the fixed part is if anything underestimated).  Both
are smoothed over the recent batches (``SMOOTHING``).  The next batch

* takes about the target: ``(target - fixed) / per_row`` rows;
* but never fewer than the rows at which the fixed part is ``FIXED_SHARE`` of a batch's time
  (``fixed / per_row * (1 - FIXED_SHARE) / FIXED_SHARE``): where the fixed part alone is too
  close to the target, batches take longer than the target rather than spend most of their
  time on what does not move a row;
* changes by at most 2x per batch, within 1 .. the ceiling.
"""

from __future__ import annotations

#: A batch's fixed part is at most this share of its time (the floor of the batch size).
FIXED_SHARE = 0.1
#: Weight of the newest batch in the smoothed parts.
SMOOTHING = 0.3


def next_batch_size(size: int, seconds: float, target: float, ceiling: int) -> int:
    """The size-only rule: *size* rows took *seconds*; scaled by ``target / seconds``, by at
    most 2x up or down per batch, within 1..*ceiling*."""
    factor = 2.0 if seconds <= 0 else min(max(target / seconds, 0.5), 2.0)
    return max(1, min(ceiling, int(size * factor)))


class BatchSizer:
    """Sizes one migration's batches toward *target* seconds (see the module)."""

    def __init__(self, target: float, ceiling: int):
        self.target = target
        self.ceiling = ceiling
        self.fixed: float | None = None  # smoothed seconds of a batch outside its migrating statements
        self.per_row: float | None = None  # smoothed seconds of the migrating statements per row

    def observe(self, rows: int, seconds: float, migrating: float) -> None:
        """A full batch of *rows* rows took *seconds*, *migrating* of them in its migrating statements."""
        migrating = min(max(migrating, 0.0), seconds)
        fixed, per_row = seconds - migrating, migrating / max(rows, 1)
        a = SMOOTHING
        self.fixed = fixed if self.fixed is None else (1 - a) * self.fixed + a * fixed
        self.per_row = per_row if self.per_row is None else (1 - a) * self.per_row + a * per_row

    def next(self, rows: int, seconds: float, migrating: float) -> int:
        """After a full batch (see ``observe``): the next batch's size."""
        self.observe(rows, seconds, migrating)
        fixed, per_row = self.fixed, self.per_row
        if not per_row or per_row <= 0:  # rows cost nothing measurable: grow
            return max(1, min(self.ceiling, 2 * rows))
        wanted = (self.target - fixed) / per_row if fixed < self.target else 0.0
        floor = fixed / per_row * (1 - FIXED_SHARE) / FIXED_SHARE
        size = min(max(wanted, floor), 2.0 * rows, float(self.ceiling))
        return max(1, int(max(size, rows / 2.0)))
