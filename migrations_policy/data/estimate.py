"""The query planner's row estimate for a query: no rows are read.

PostgreSQL ``EXPLAIN (FORMAT JSON)`` scales ``pg_class.reltuples / relpages`` to the
table's current number of pages (so it is close even before the first ANALYZE);
MariaDB/MySQL ``EXPLAIN FORMAT=JSON`` answers from InnoDB's statistics.  SQLite has
no estimate (None).  Used by ``status`` (pending rows) and ``dbsync plan`` (table sizes).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Connection


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
