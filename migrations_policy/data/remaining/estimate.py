"""How many rows a query would return, without reading them all.

``pending_rows``: a data migration's pending rows, from a sample of its key's index where
the key is an integer, else the planner's estimate (``planner_rows``).  The planner alone
is not enough: right after an expand adds a column, it has no statistics for it and answers
a default selectivity (PostgreSQL: 0.5% of the rows for ``IS NULL``, so ``~995`` pending of
200,000; MariaDB: every row), and its statistics lag behind a migration under way (``~233,959``
pending where 136,000 were).  The sample reads ``SAMPLE_WINDOWS`` windows of
``SAMPLE_WIDTH`` keys spread over the key range (one statement, index range scans: at most
8,192 rows whatever the table's size) and scales the pending rows found by the key range:
right for a fresh column, for a half-done walk (its pending rows are past a key) and for
rows migrated here and there, within a few percent.

``planner_rows``: the planner's row estimate for a query; no rows are read.  PostgreSQL ``EXPLAIN (FORMAT JSON)`` scales ``pg_class.reltuples / relpages`` to the
table's current number of pages (so it is close even before the first ANALYZE);
MariaDB/MySQL ``EXPLAIN FORMAT=JSON`` answers from InnoDB's statistics.  SQLite has
no estimate (None).  Used by ``status`` (pending rows) and ``dbsync plan`` (table sizes).
"""

from __future__ import annotations

import json
import random
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.data.declare import key_bound

#: Windows of keys the sample reads, spread evenly over the key range (one in each stride).
SAMPLE_WINDOWS = 32
#: Keys per window: with SAMPLE_WINDOWS, the most rows a sample reads.
SAMPLE_WIDTH = 256
#: Dialects with a planner estimate (the others count).
_PLANNED = ("postgresql", "mysql", "mariadb")


def pending_rows(conn: Connection, table: Any, key: Any, pending: Any) -> int | None:
    """The rows of *table* where *pending* holds, estimated (see the module doc); None where
    the database gives no estimate (SQLite, which counts instead)."""
    if conn.dialect.name not in _PLANNED:
        return None
    sampled = sampled_rows(conn, table, key, pending)
    if sampled is not None:
        return sampled
    return planner_rows(conn, sa.select(key).where(pending))


def sampled_rows(conn: Connection, table: Any, key: Any, pending: Any) -> int | None:
    """The pending rows, from ``SAMPLE_WINDOWS`` windows of the integer *key*'s range; None
    when the key is not an integer.  A key range no wider than the sample is counted."""
    low, high = conn.execute(sa.select(sa.func.min(key), sa.func.max(key)).select_from(table)).one()
    if low is None:
        return 0
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        return None
    span = high - low + 1
    count = sa.select(sa.func.count()).select_from(table)
    if span <= SAMPLE_WINDOWS * SAMPLE_WIDTH:
        return conn.execute(count.where(pending)).scalar()
    stride = span // SAMPLE_WINDOWS
    draw = random.Random()
    starts = [low + i * stride + draw.randrange(stride - SAMPLE_WIDTH + 1) for i in range(SAMPLE_WINDOWS)]
    windows = sa.or_(*(sa.and_(key >= key_bound(start), key <= key_bound(start + SAMPLE_WIDTH - 1))
                       for start in starts))
    found = conn.execute(count.where(windows, pending)).scalar()
    if found:
        return round(found * span / (SAMPLE_WINDOWS * SAMPLE_WIDTH))
    # none in the sample: fewer than about 1 row in 8,192 keys; the planner may know better
    ceiling = max(span // (SAMPLE_WINDOWS * SAMPLE_WIDTH), 1)
    planned = planner_rows(conn, sa.select(key).where(pending))
    return min(planned or 1, ceiling)


def planner_rows(conn: Connection, query: Any) -> int | None:
    """Rows the planner expects *query* (a SELECT) to return; None where the database gives none."""
    dialect = conn.dialect.name
    prefix = {"postgresql": "EXPLAIN (FORMAT JSON) ", "mysql": "EXPLAIN FORMAT=JSON ",
              "mariadb": "EXPLAIN FORMAT=JSON "}.get(dialect)
    if prefix is None:
        return None
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    plan = conn.exec_driver_sql(prefix + str(compiled), compiled.params).scalar()
    plan = json.loads(plan) if isinstance(plan, (str, bytes)) else plan
    if dialect == "postgresql":
        return int(plan[0]["Plan"]["Plan Rows"])
    table = _first_with(plan, "rows")
    if table is None:
        return None
    return int(float(table["rows"]) * float(table.get("filtered", 100)) / 100)


def _first_with(node: Any, key: str) -> dict | None:
    """The first object in a JSON plan that has *key* (depth first)."""
    if isinstance(node, dict):
        if key in node:
            return node
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _first_with(child, key)
        if found is not None:
            return found
    return None
