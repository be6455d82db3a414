"""Where a walk starts and how it ends: the survey of what is pending before the first batch
(range stepping or keyset, resuming past the ledger's cursor), and the live count of what
remains after the last one, which decides the state the ledger and the report record.

``Survey`` is a part of the runner's walk (``runner._Walk``); the batch loop stays in ``runner``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from migrations_policy.core.errors import interrupt_behind
from migrations_policy.data.walk import claim_table

from migrations_policy.data.remaining import completion

from migrations_policy.data import ledger
from migrations_policy.data.remaining import pending as probes
from migrations_policy.data.declare import key_bound
from migrations_policy.data.remaining.pending import (count_pending,
    cursor_value,
    index_lookups,
    missing_columns,
    null_keyed,
    one_row_plans,
    remaining)

#: Range stepping is used when at least this share of the pending key range is pending.
DENSE_THRESHOLD = 0.5


class Survey:
    """The start and the end of a walk (see the module); mixed into ``runner._Walk``."""

    def prepare(self, engine: Engine) -> None:
        """Count what is pending, choose range stepping or keyset, mark the ledger."""
        m, report = self.migration, self.report
        with engine.connect() as conn:
            missing = missing_columns(conn, m)
            if missing:
                report.state, self.finished = ledger.INAPPLICABLE, True
                report.strategy_note = (f"{', '.join(missing)} does not exist "
                                        "(not created yet, or dropped by a contract): skipped")
                return
            state, self.ledger_key = ledger.position(conn, m.name)
            if state == ledger.RETIRED:  # a forced contract downgrade re-created its source empty
                report.state, self.finished = ledger.INAPPLICABLE, True
                report.strategy_note = ("retired: a contract that dropped what it reads was reverted (forced); its "
                                        "source came back empty, and copying it again would overwrite what it copied")
                return
            conn.rollback()
            if not m.remembers_completion:  # a prune: mark triggers an older release installed only
                completion.uninstall(engine, m)  # cost writes (the others: installed at the end, if done)
            resume = cursor_value(conn, m, self.ledger_key) if state in ledger.RESUMABLE else None
            with index_lookups(conn), one_row_plans(conn):
                low, high, density, resumed = self._survey(conn, resume)
                count, estimated = (0, False) if low is None else \
                    remaining(conn, m, self.ledger_key, self.run.exact)
            conn.rollback()
            ledger.record_start(conn, m.name)
        report.remaining_before, report.remaining_before_estimated = count, estimated
        report.state = ledger.RUNNING
        if low is None:
            self.finished = self.walked_to_end = True
            return
        self.first_key = low
        self.integer_keys = claim_table.usable_key(low, high)
        if resumed:
            self.resumed_from = resume
            report.strategy_note = f"resumed after {m.key} {resume} (where the last run stopped)"
        if density is not None:
            if density >= DENSE_THRESHOLD and self.integer_keys:  # steps stay within BIGINT
                report.strategy, self.cursor, self.high = "range", low - 1, high
                return
            why = (f"batches follow the pending rows one after another: few are pending "
                   f"({density:.1%} of {m.key} {low}..{min(high, low + probes.PROBE_WINDOW - 1)})")
        else:
            why = f"batches follow the pending rows in {m.key} order ({m.table_name}.{m.key} is not a number)"
        self.note(why)
        report.strategy = "keyset"
        self.cursor = resume if resumed else None

    def _survey(self, conn: Connection, resume: Any) -> tuple[Any, Any, float | None, bool]:
        """The first and last pending keys, the density of pending keys in the first window
        (None: not integer keys), and whether the walk resumes past *resume*.

        No count of the table: the ends are read in key order (one index lookup each where
        rows are pending there), the density from the first ``PROBE_WINDOW`` keys.  A walk
        that the last run left midway (``ledger.RESUMABLE``) resumes past its cursor *resume*,
        so a ``--max-count`` loop does not read again what earlier runs finished; rows behind
        the cursor are walked once it reaches the end (``_walk_behind``)."""
        m = self.migration
        key = m.key_column
        low = None if resume is None else self._first_pending(conn, key > key_bound(resume))
        resumed = low is not None
        if low is None:
            low = self._first_pending(conn)  # nothing past the cursor: from the start
        if low is None:
            return None, None, None, False  # verified: nothing is pending
        high = conn.execute(sa.select(key).where(key.is_not(None), m.pending).order_by(key.desc()).limit(1)).scalar()
        if high is None:  # migrated by another runner since the first read (no snapshot across reads)
            high = low
        if not isinstance(low, int) or isinstance(low, bool):
            return low, high, None, resumed
        edge = min(high, low + probes.PROBE_WINDOW - 1)
        sample = conn.execute(sa.select(sa.func.count()).select_from(m.table).where(
            key >= key_bound(low), key <= key_bound(edge), m.pending)).scalar()
        return low, high, sample / (edge - low + 1), resumed

    def _first_pending(self, conn: Connection, *where: Any) -> Any:
        """The smallest pending key (and *where*), in key order: one index lookup where it is near.
        Rows with a NULL key (first in SQLite's and MariaDB's order) are left to ``finish``."""
        m = self.migration
        key = m.key_column
        return conn.execute(sa.select(key).where(*where, key.is_not(None), m.pending).order_by(key).limit(1)).scalar()

    def finish(self, engine: Engine) -> None:
        """Count what remains (live) and record the final state."""
        report = self.report
        walked = self.walked_to
        try:
            with engine.connect() as conn:
                stuck = 0
                if report.state != ledger.INAPPLICABLE:
                    proof = completion.read(conn, self.migration) \
                        if self.migration.remembers_completion else None  # before the probe
                    report.remaining_after, report.remaining_after_estimated = remaining(
                        conn, self.migration, self.ledger_key, self.run.exact)
                    if report.remaining_after == 0 and proof is not None and proof.installed:
                        # never installs the mark triggers itself: other runners of the migration may still
                        # walk its table, and DDL on it fails their statements (MariaDB 1684) or makes them
                        # wait; status/check install them once nothing is pending (``completion``)
                        conn.rollback()
                        completion.remember(engine, self.migration, proof)
                    nulls = null_keyed(conn, self.migration)
                    if nulls and report.state != ledger.ERROR:
                        m = self.migration
                        self.fail(RuntimeError(
                            f"{nulls} pending row{'s' if nulls > 1 else ''} of {m.table_name} "
                            f"{'have' if nulls > 1 else 'has'} a NULL {m.key}, which no batch can reach: "
                            "a data migration walks its rows by key, which must be unique and NOT NULL"))
                    if self.migration.unmigratable is not None and walked is not None and report.remaining_after:
                        key = self.migration.key_column  # the rows this run walked
                        since = () if self.first_key is None else (key >= key_bound(self.first_key),)
                        stuck = count_pending(conn, self.migration, sa.and_(
                            *since, key <= key_bound(walked), self.migration.pending, self.migration.unmigratable))
                        report.stuck += stuck
                    conn.rollback()
                if report.state not in (ledger.ERROR, ledger.INAPPLICABLE, ledger.WAITING):
                    report.state = (ledger.STUCK if report.stuck else
                                    ledger.COMPLETE if report.remaining_after == 0 else
                                    ledger.CAUGHT_UP if self.walked_to_end else ledger.INCOMPLETE)
                ledger.record_finish(conn, self.migration.name, report.state, report.error, stuck=stuck)
        except Exception as exc:
            if (interrupt := interrupt_behind(exc)) is not None:  # not finalized: ``interrupted`` records it
                raise interrupt from None
            self.fail(exc)
        self.finalized = True

    def interrupted(self, engine: Engine) -> None:
        """After Ctrl-C / SIGTERM: record ``interrupted`` (an error or inapplicable stays what it is),
        without counting what remains (the operator asked us to stop)."""
        if self.finalized:
            return
        if self.walked_to_end and self.report.state == ledger.RUNNING:
            self.finish(engine)  # its walk had ended before the stop: what it is, not "interrupted"
            return
        self.finalized = True
        report = self.report
        if report.state not in (ledger.ERROR, ledger.INAPPLICABLE):
            report.state = ledger.INTERRUPTED
        if report.state == ledger.INAPPLICABLE or report.remaining_before is None and not report.error:
            return  # never started: nothing of it to record
        with engine.connect() as conn:
            ledger.record_finish(conn, self.migration.name, report.state, report.error)
