"""How fast this server reads a table, measured: the base of ``dbsync plan``'s durations.

For each table a blocking statement scans or rewrites, once per run: a timed
sequential read of its first rows (``SELECT count(*) FROM (SELECT * FROM t LIMIT n)``),
n doubling from 10,000 until the read takes ``SAMPLE_SECONDS`` or the table is read
whole, then read three times (a short sample more, up to ``MAX_READS``, until the reads add up to
``SAMPLE_SECONDS``): the median.  The rate (rows/s) is the table's own: its row width, its place in the buffer
cache or on disk, this server's load now.  A statement's duration is then

    estimated rows / measured rate x the work factor of what it does (``WORK_FACTORS``)

An estimate: the sample is the start of the table (often cached while the rest is
not), a rewrite also writes WAL / redo and rebuilds indexes (the factor of each work,
``work_of``, calibrated with benchmarks/plan.py against the real statements), and
concurrent load changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.policy import model as m

#: Stop doubling the sample once one read took this long (seconds).
SAMPLE_SECONDS = 0.2
FIRST_SAMPLE = 10_000
#: Reads of the final sample; the rate is the median's (the machine may be busy for one of them).
READS = 3
#: A final sample shorter than ``SAMPLE_SECONDS`` (a small table read whole) is read again until its
#: reads add up to ``SAMPLE_SECONDS``, at most this many times: a 30 ms read timed three times on a
#: loaded machine moved 3x between rounds (benchmarks/plan.py, PostgreSQL CREATE INDEX at 200,000
#: rows: estimates 0.13-0.45 s for one real 0.23-0.38 s), the median of more reads far less.
MAX_READS = 9
#: The sample never reads more than this many rows (a bound on the measurement's own cost).
MAX_SAMPLE = 2_000_000

SCAN, FK_CHECK, INDEX = "scan", "foreign key check", "index build"
REWRITE, COMPUTED, REBUILD = "rewrite", "rewrite computing each row", "rebuild in place"
#: Seconds of a statement's work per second of the sample's read of the same rows (the probe above), per
#: dialect and work: a validating scan reads; a foreign key's check also looks up each row's parent; an
#: index build reads and sorts; a rewrite reads, writes the copy (and WAL / redo) and rebuilds the
#: indexes; a rewrite computing each row also evaluates a per-row default (``gen_random_uuid()``); a
#: MariaDB ``ALGORITHM=INPLACE`` rebuild (SET NOT NULL) copies in key order inside the engine, without
#: the row-by-row SQL layer of ``ALGORITHM=COPY``.  Calibrated with benchmarks/plan.py at 200k and 1M
#: rows (2 shared cores, interleaved rounds; the figures in docs/benchmarks.rst): each factor is the
#: middle of what that work measured, so the estimates of every kind came within 2x either way.
#: On MariaDB the probe's derived table is materialized (a temporary table written row by row), so
#: its rate is already close to a rebuild's: hence factors below 1 there.  MariaDB's rewrite computing
#: each row (``ADD COLUMN ... DEFAULT (uuid())``, a COPY evaluating the default per row) had the plain
#: rewrite's 2.7 until ten measured rounds (2026-11-27/28, 200k and 1M) came out at 0.43-1.61x of the
#: real statement, median 0.785x: 2.7 / 0.785 = 3.4.  PostgreSQL's rewrite (type changes) had 9.5 until
#: 24 rounds of 2026-11-28 (varchar shrink and int -> bigint, 200k and 1M) came out at 0.58-1.18x,
#: median 0.79x (1M int -> bigint 0.62x): 9.5 / 0.79 = 12; its foreign key check had 1.8 until 12 rounds
#: of 2026-11-28 came out at 0.45-1.27x, median 0.78x (1M 0.65x): 1.8 / 0.78 = 2.3.
WORK_FACTORS = {
    "postgresql": {SCAN: 1.0, FK_CHECK: 2.3, INDEX: 6.0, REWRITE: 12.0, COMPUTED: 30.0},
    "mysql": {REBUILD: 0.65, REWRITE: 2.7, COMPUTED: 3.4, FK_CHECK: 4.7, SCAN: 1.0, INDEX: 2.7},
    "sqlite": {SCAN: 1.0, INDEX: 10.0, REWRITE: 11.0},
}


def work_of(kind: str, effect, dialect: str) -> str | None:
    """The work a blocking statement of *kind* does while it holds its lock, as the policy's *effect*
    says on *dialect* (None: a catalog change only)."""
    dialect = "mysql" if dialect == "mariadb" else dialect
    if effect.rewrite:
        if dialect == "mysql" and effect.lock == "ALGORITHM=INPLACE":
            return REBUILD
        if kind == m.ADD_FK:
            return FK_CHECK
        if kind == m.ADD_COLUMN:  # a rewrite only for a per-row default (or a stored generated column)
            return COMPUTED
        return REWRITE
    if kind in (m.CREATE_INDEX, m.ADD_UNIQUE, m.ADD_PK):
        return INDEX
    if effect.scan:
        return FK_CHECK if kind == m.ADD_FK else SCAN
    return None


@dataclass(frozen=True)
class ReadRate:
    """Rows per second read sequentially from *table*: *rows* read in *seconds*; *whole*: the
    sample was the whole table (*rows* is then its exact row count)."""

    table: str
    rows: int
    seconds: float
    whole: bool = False

    @property
    def rows_per_second(self) -> float | None:
        return self.rows / self.seconds if self.rows and self.seconds > 0 else None

    def to_dict(self) -> dict:
        return {"table": self.table, "sample_rows": self.rows, "sample_seconds": round(self.seconds, 4),
                "whole_table": self.whole,
                "rows_per_second": None if self.rows_per_second is None else round(self.rows_per_second)}


def measure(conn: Connection, table: str) -> ReadRate:
    """Time sequential reads of *table*'s first rows (see the module docstring): the sample
    grows until one read takes ``SAMPLE_SECONDS``, then is read ``READS`` times; the median."""
    limit = FIRST_SAMPLE
    while True:
        read, seconds = _read(conn, table, limit)
        if read < limit or seconds >= SAMPLE_SECONDS or limit >= MAX_SAMPLE:
            break
        limit = min(limit * 2, MAX_SAMPLE)
    times = [seconds]
    while len(times) < READS or (sum(times) < SAMPLE_SECONDS and len(times) < MAX_READS):
        times.append(_read(conn, table, limit)[1])
    times.sort()
    return ReadRate(table, read, times[len(times) // 2], whole=read < limit)


def _read(conn: Connection, table: str, limit: int) -> tuple[int, float]:
    sample = sa.select(sa.literal_column("*")).select_from(sa.table(table)).limit(limit).subquery()
    started = time.perf_counter()
    read = int(conn.execute(sa.select(sa.func.count()).select_from(sample)).scalar())
    return read, time.perf_counter() - started


class Rates:
    """Measured read rates, one per table and run."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._found: dict[str, ReadRate] = {}

    def of(self, table: str) -> ReadRate:
        if table not in self._found:
            self._found[table] = measure(self._conn, table)
            if self._conn.in_transaction():
                self._conn.rollback()
        return self._found[table]

    def measured(self) -> list[ReadRate]:
        return list(self._found.values())


def seconds_for(rows: int, rate: ReadRate, work: str, dialect: str) -> float | None:
    """Estimated seconds of *work* over *rows* at *rate* (None: no rate could be measured)."""
    if rows == 0:
        return 0.0
    per_second = rate.rows_per_second
    if per_second is None:
        return None
    factors = WORK_FACTORS["mysql" if dialect == "mariadb" else dialect]
    # a work this dialect was not calibrated for: its largest factor (rather too long than too short)
    return rows / per_second * factors.get(work, max(factors.values()))


def method(dialect: str) -> str:
    """One line saying how durations are estimated on *dialect*."""
    factors = WORK_FACTORS["mysql" if dialect == "mariadb" else dialect]
    return ("estimated rows / rows per second read sequentially from the same table on this server (a timed "
            "sample of its first rows) x a factor for the work (" +
            ", ".join(f"{work} {factor:g}" for work, factor in factors.items()) + ")")
