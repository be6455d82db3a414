"""A walk's claims: the key ranges one runner takes for itself beside other runners on the same
migration (``claims`` stores them), and the batches it walks inside them.

``Claiming`` is a part of the runner's walk (``runner._Walk``): under the migration's lock it
claims the next range (a dead runner's claim first), moves a claim to the session migrating
it, and cuts the batches of a claim; the batch loop itself stays in ``runner``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.data.walk import claim_table, locks

from migrations_policy.data import ledger
from migrations_policy.data.declare import Batch, key_bound

#: A runner alone on a migration claims up to this many batches at a time.
CLAIM_BATCHES = 16


class Chunk(NamedTuple):
    """What remains of a claim: ``low < key <= high`` (no lower bound when None); *own*: this
    walk's next keys (False: a dead runner's claim, taken over); *holder*: the token of the
    session that holds it (a walk's steps may run on any worker thread's connection)."""

    low: Any
    high: Any
    own: bool
    holder: int



class Claiming:
    """The claim-taking part of a walk (see the module); mixed into ``runner._Walk``."""

    def _rehome(self, conn: Connection, chunk: Chunk, token: int) -> bool:
        """First in a batch's transaction, when this step runs on another worker thread's
        connection than the one that claimed *chunk*: make the claim this session's, so that it
        lives and dies with the connection migrating it (the row stays locked until the batch
        commits: a runner that found the old session gone waits, then sees the new holder).
        False: the old session died and another runner took the claim over: leave it to them."""
        held = claim_table.Claim(chunk.low, chunk.high, chunk.holder, False)
        if claim_table.take_over(conn, self.migration.name, held, token):
            return True
        self.chunk = None
        return False

    def _claim(self, conn: Connection, width: int, token: int) -> bool:
        """Under the migration's lock, claim the next key range for this runner (``self.chunk``);
        False: nothing left to claim.

        The range is a dead runner's claim when there is one (its batch rolled back: its keys
        are walked again), else the walk's next ``claim_batches`` batches, stopping short of the
        first claim it would overlap, or starting past it.  A runner alone claims more batches at
        a time (1, 2, 4 ... ``CLAIM_BATCHES``), so that claiming costs one short transaction per
        several batches; with other runners about, or a ``--max-count``, one batch at a time."""
        name = self.migration.name
        with locks.batch_transaction(conn, name, self._ledger_read) as current:
            self._follow_other_runner(current)
            held = claim_table.others(conn, name, token)
            self.peers = any(not c.free for c in held)
            dead = next((c for c in held if c.free), None)
            if dead is not None:
                if claim_table.take_over(conn, name, dead, token):
                    self.chunk = Chunk(dead.low, dead.high, own=False, holder=token)
                    self._took_over(self.chunk)
                    return True
                self.peers = True  # a batch is migrating it right now (its walk moved it to another session)
            wanted = width * self.claim_batches
            alone = not self.peers and self.run.max_count is None
            self.claim_batches = min(2 * self.claim_batches, CLAIM_BATCHES) if alone else 1
            batch = self._outside(conn, held, width, wanted)
            if batch is None:
                return False
            claim_table.record(conn, name, batch.lower, batch.upper, token)
            ledger.record_claim(conn, name, batch.upper)
            self.ledger_key = ledger.as_key_text(batch.upper)
            self.chunk = Chunk(batch.lower, batch.upper, own=True, holder=token)
            return True

    def _outside(self, conn: Connection, held: list[claim_table.Claim], width: int, wanted: int) -> Batch | None:
        """The walk's next batch of about *wanted* keys, kept out of the claims *held*: it stops
        short of the first one it would overlap, or starts past it (None: nothing left)."""
        while True:
            batch = self._next_batch(conn, wanted)
            if batch is None:
                return None
            if self.report.strategy == "range" and wanted > width:  # not past the last pending key
                batch = Batch(self.migration, batch.lower, min(batch.upper, max(self.high, batch.lower + width)),
                              self.options)
            hit = claim_table.first_overlap(held, batch.lower, batch.upper)
            if hit is None:
                return batch
            if hit.low is not None and (batch.lower is None or hit.low > batch.lower):
                return Batch(self.migration, batch.lower, hit.low, self.options)
            self.cursor = hit.high  # past the other runner's keys

    def _batch_in(self, chunk: Chunk, conn: Connection, width: int) -> tuple[Batch, bool]:
        """The next batch of the claimed *chunk*: *width* keys (range stepping) or pending keys
        (keyset) past its start, and whether it has that many (the chunk's last batch may be
        cut short: its time does not size the next batch)."""
        m = self.migration
        key = m.key_column
        if self.report.strategy == "range" and chunk.low is not None:
            low = chunk.low
            if self.gap:  # the last batch found nothing to migrate: on to the claim's next pending key
                self.gap = False
                first = self._first_pending(conn, key > key_bound(low), key <= key_bound(chunk.high))
                low = chunk.high if first is None else max(low, first - 1)
                if low >= chunk.high:  # nothing pending in the rest of the claim: an empty batch ends it
                    return Batch(m, chunk.high, chunk.high, self.options), False
            upper = low + width
            return Batch(m, low, min(upper, chunk.high), self.options), upper <= chunk.high
        after = () if chunk.low is None else (key > key_bound(chunk.low),)
        keys = sa.select(key.label("k")).where(*after, key <= key_bound(chunk.high), m.pending) \
            .order_by(key).limit(width).subquery()
        last, found = conn.execute(sa.select(sa.func.max(keys.c.k), sa.func.count())).one()
        return Batch(m, chunk.low, chunk.high if found < width else last, self.options), found >= width

    def _took_over(self, chunk: Chunk) -> None:
        """A dead runner's claim is this walk's: ``finish`` counts its stuck rows with this walk's."""
        low = "" if chunk.low is None else f"{chunk.low} < "
        note = f"walked again {low}{self.migration.key} <= {chunk.high}: its runner died mid-batch"
        self.note(note)
        if self.first_key is not None:
            self.first_key = None if chunk.low is None else min(self.first_key, chunk.low + 1)
        self.walked_to = chunk.high if self.walked_to is None else max(self.walked_to, chunk.high)
