"""How many rows the runner's next batch takes, from how long the last ones took.

A batch costs a fixed part and a part per row: ``seconds = fixed + per_row * rows``.  The fixed
part (round trips, the batch's bookkeeping, the commit, and under load the wait for a CPU
between them) does not shrink with the batch.  Scaling the size by ``target / seconds`` alone
shrinks batches toward one row once the fixed part alone exceeds the target (measured on a
loaded machine: prune batches of 1..29,533 rows, 0.11x one ``DELETE``); each halving then makes
the run slower without making a batch shorter.

The fixed part may sit anywhere: in bookkeeping statements around the migrating one, or inside
it (its own round trip, the lock wait it sets, the claim's advance and the ledger folded into it
as ``WITH`` parts).  So neither part is read off one batch: both are **fitted** over the recent
batches (``WINDOW``) as ``seconds = fixed + per_row * rows``.  A load's noise is proportional
to a batch's time (and some batches wait 3-10x longer for a CPU), so the fit is weighted by
``1 / seconds**2`` (relative errors), and the batches it leaves furthest out (``OUTLIER`` times
the median relative residual) are dropped before fitting again.

At the size the sizer settles on, the fixed part is a tenth of a batch or less: sizes near it
cannot tell it from noise.  So while the fit decides the size (not the ceiling, nor the 2x limit
of a size still growing or shrinking toward it), every ``PROBE_EVERY``-th batch is a **probe**
of ``1 / PROBE_DIVISOR`` of the size, where the fixed part is most of its time; the walk then
goes back to its size (the probes cost ~2 % of the throughput).  Until the batches give a fit (the
first ones), the per-row part is read as before, its upper bound: the migrating time per row
(the fixed part is then at worst underestimated).  The fitted per-row part stays within
``MIN_SLOPE_SHARE`` .. 1 times that bound (noise must not make rows look free).  The next batch

* takes about the target: ``(target - fixed) / per_row`` rows;
* but never fewer than the rows at which the fixed part is ``FIXED_SHARE`` of a batch's time
  (``fixed / per_row * (1 - FIXED_SHARE) / FIXED_SHARE``): where the fixed part alone is too
  close to the target, batches take longer than the target rather than spend most of their
  time on what does not move a row -- up to ``FLOOR_TARGETS`` times the target, or five times
  the fixed part if that is longer (``floor_rows``: a fit over a loaded machine's batches can
  read the load's drift as a fixed part; measured: 90 ms where a round trip costs a few, which
  made every batch of a 300,000-row run take 0.6-1.1 s);
* changes by at most 2x per batch, within 1 .. the ceiling.
"""

from __future__ import annotations

import statistics
from collections import deque

#: A batch's fixed part is at most this share of its time (the floor of the batch size).
FIXED_SHARE = 0.1
#: The floor never makes a batch take longer than this many times the target (see ``floor_rows``).
FLOOR_TARGETS = 4
#: Recent batches the two parts are fitted over.
WINDOW = 24
#: A fit needs two batches whose sizes differ by at least this factor.
SPREAD = 2.0
#: Every this many batches, one probe ...
PROBE_EVERY = 6
#: ... of this fraction of the size.
PROBE_DIVISOR = 8
#: A batch whose relative residual is over this many times the median one is left out of the fit.
OUTLIER = 3.0
#: The fitted per-row part is at least this share of the migrating time per row.
MIN_SLOPE_SHARE = 0.1


def next_batch_size(size: int, seconds: float, target: float, ceiling: int) -> int:
    """The size-only rule: *size* rows took *seconds*; scaled by ``target / seconds``, by at
    most 2x up or down per batch, within 1..*ceiling*."""
    factor = 2.0 if seconds <= 0 else min(max(target / seconds, 0.5), 2.0)
    return max(1, min(ceiling, int(size * factor)))


def floor_rows(fixed: float, per_row: float, target: float) -> float:
    """The fewest rows a batch takes: where the fixed part is ``FIXED_SHARE`` of its time, but no
    more rows than make it take ``FLOOR_TARGETS`` times the target (or five times the fixed part,
    if that is longer: the fixed part at most a fifth): a fixed part that is mostly a loaded
    machine's wait must not make every batch hold its row locks for a second."""
    rows = fixed / per_row * (1 - FIXED_SHARE) / FIXED_SHARE
    return min(rows, max(FLOOR_TARGETS * target - fixed, 4 * fixed) / per_row)


def _weighted(batches: list[tuple[int, float, float]]) -> tuple[float, float] | None:
    """The least-squares (fixed, per_row) of seconds against rows, weighted by 1 / seconds**2."""
    w = [1.0 / max(s, 1e-9) ** 2 for _, s, _ in batches]
    sw = sum(w)
    mn = sum(wi * n for wi, (n, _, _) in zip(w, batches)) / sw
    ms = sum(wi * s for wi, (_, s, _) in zip(w, batches)) / sw
    sxx = sum(wi * (n - mn) ** 2 for wi, (n, _, _) in zip(w, batches))
    if sxx <= 0:
        return None
    per_row = sum(wi * (n - mn) * (s - ms) for wi, (n, s, _) in zip(w, batches)) / sxx
    return ms - per_row * mn, per_row


def fit(batches: list[tuple[int, float, float]]) -> tuple[float, float] | None:
    """(fixed, per_row) seconds fitted over *batches* of (rows, seconds, migrating seconds) (see
    the module); None when they hold no two sizes ``SPREAD`` apart."""
    sizes = [n for n, _, _ in batches]
    bound = statistics.median(m / n for n, _, m in batches)
    if max(sizes) < SPREAD * min(sizes) or bound <= 0:
        return None
    fitted = _weighted(batches)
    if fitted is None:
        return None
    fixed, per_row = fitted
    residuals = [abs(s - fixed - per_row * n) / max(s, 1e-9) for n, s, _ in batches]
    limit = OUTLIER * max(statistics.median(residuals), 0.01)
    kept = [b for b, r in zip(batches, residuals) if r <= limit]
    if len(kept) < len(batches) and max(n for n, _, _ in kept) >= SPREAD * min(n for n, _, _ in kept):
        fixed, per_row = _weighted(kept) or fitted
    else:
        kept = batches
    per_row = min(max(per_row, MIN_SLOPE_SHARE * bound), bound)
    w = [1.0 / max(s, 1e-9) ** 2 for _, s, _ in kept]
    fixed = sum(wi * (s - per_row * n) for wi, (n, s, _) in zip(w, kept)) / sum(w)
    return max(fixed, 0.0), per_row


class BatchSizer:
    """Sizes one migration's batches toward *target* seconds (see the module)."""

    def __init__(self, target: float, ceiling: int):
        self.target = target
        self.ceiling = ceiling
        self.batches: deque[tuple[int, float, float]] = deque(maxlen=WINDOW)
        self.fixed: float | None = None  # the fitted seconds of a batch that its rows do not explain
        self.per_row: float | None = None  # the fitted seconds per row
        self.size: int | None = None  # the size chosen (a probe's batch is smaller)
        self.fitted = 0  # batches in a row whose size the fit decided
        self.probe: int | None = None  # the size of the probe just asked for

    def observe(self, rows: int, seconds: float, migrating: float) -> None:
        """A full batch of *rows* rows took *seconds*, *migrating* of them in its migrating statements."""
        seconds = max(seconds, 0.0)
        self.batches.append((max(rows, 1), seconds, min(max(migrating, 0.0), seconds)))
        fitted = fit(list(self.batches))
        if fitted is None:  # no fit yet: the migrating time per row bounds the per-row part
            n, s, m = self.batches[-1]
            fitted = s - m, m / n
        self.fixed, self.per_row = fitted

    def next(self, rows: int, seconds: float, migrating: float) -> int:
        """After a full batch (see ``observe``): the next batch's size."""
        self.observe(rows, seconds, migrating)
        fixed, per_row = self.fixed, self.per_row
        last = self.size if self.probe is not None and rows == self.probe else rows  # after a probe: the size
        self.probe = None
        fitted = False  # the size is the fit's (not its limits')
        if not per_row or per_row <= 0:  # rows cost nothing measurable: grow
            size = 2.0 * last
        else:
            wanted = (self.target - fixed) / per_row if fixed < self.target else 0.0
            floor = floor_rows(fixed, per_row, self.target)
            size = max(wanted, floor)
            fitted = last / 2.0 <= size <= 2.0 * last and size < self.ceiling
            size = max(min(size, 2.0 * last), last / 2.0)
        self.size = max(1, int(min(size, float(self.ceiling))))
        self.fitted = self.fitted + 1 if fitted else 0
        if self.fitted and self.fitted % PROBE_EVERY == 0:
            self.probe = max(1, self.size // PROBE_DIVISOR)
            return self.probe
        return self.size
