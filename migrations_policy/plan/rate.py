"""How fast this server reads a table, measured: the base of ``dbsync plan``'s durations.

For each table a blocking statement scans or rewrites, once per run: a timed
sequential read of its first rows (``SELECT count(*) FROM (SELECT * FROM t LIMIT n)``),
n doubling from 10,000 until the read takes ``SAMPLE_SECONDS`` or the table is read
whole, then read three times: the median.  The rate (rows/s) is the table's own: its row width, its place in the buffer
cache or on disk, this server's load now.  A statement's duration is then

    estimated rows / measured rate x the work factor of what it does (``WORK_FACTORS``)

An estimate: the sample is the start of the table (often cached while the rest is
not), a rewrite also writes WAL / redo and rebuilds indexes (the factors, calibrated
with benchmarks/plan.py on this project's CI machine), and concurrent load changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

#: Stop doubling the sample once one read took this long (seconds).
SAMPLE_SECONDS = 0.2
FIRST_SAMPLE = 10_000
#: Reads of the final sample; the rate is the median's (the machine may be busy for one of them).
READS = 3
#: The sample never reads more than this many rows (a bound on the measurement's own cost).
MAX_SAMPLE = 2_000_000

SCAN, INDEX, REWRITE = "scan", "index build", "rewrite"
#: Seconds of a statement's work per second of sequential read of the same rows, per dialect:
#: a validating scan reads; an index build reads and sorts; a rewrite reads, writes the copy
#: (and WAL / redo) and rebuilds the indexes.  Measured by benchmarks/plan.py at 200k and 500k
#: rows (2 shared cores): PostgreSQL scan 0.8-0.9, index build 7.4-9.7, rewrite 16.5-24.6;
#: MariaDB ALGORITHM=COPY 4.8-9.5 (an INPLACE rebuild 0.7-3.1, also called a rewrite by the
#: policy); SQLite batch recreate 9.9-10.8.  The factors are the upper end: an estimate
#: should rather say too long than too short.
WORK_FACTORS = {
    "postgresql": {SCAN: 1.0, INDEX: 10.0, REWRITE: 25.0},
    "mysql": {SCAN: 1.0, INDEX: 10.0, REWRITE: 10.0},
    "sqlite": {SCAN: 1.0, INDEX: 10.0, REWRITE: 11.0},
}


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
    times = sorted([seconds] + [_read(conn, table, limit)[1] for _ in range(READS - 1)])
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
    return rows / per_second * factors[work]


def method(dialect: str) -> str:
    """One line saying how durations are estimated on *dialect*."""
    factors = WORK_FACTORS["mysql" if dialect == "mariadb" else dialect]
    return ("estimated rows / rows per second read sequentially from the same table on this server (a timed "
            "sample of its first rows) x a factor for the work (" +
            ", ".join(f"{work} {factor:g}" for work, factor in factors.items()) + ")")
