"""A table's live size, read from what the database already knows (no table is scanned
on PostgreSQL or MariaDB).

* PostgreSQL: rows from the planner (``pg_class.reltuples / relpages`` scaled to the
  table's current pages, so close even before the first ANALYZE), bytes from
  ``pg_total_relation_size`` (heap, indexes and TOAST, exact).
* MariaDB / MySQL: ``information_schema.TABLES`` (``TABLE_ROWS``, ``DATA_LENGTH +
  INDEX_LENGTH``): InnoDB's statistics, estimates.
* SQLite: rows counted (``count(*)`` walks the table's smallest b-tree without decoding
  rows: SQLite keeps no statistics to estimate from), bytes from the ``dbstat`` virtual
  table when the library has it (else unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.data.remaining.estimate import planner_rows


@dataclass(frozen=True)
class TableSize:
    """*rows* (an estimate when *estimated*) and *bytes* (None: unknown) of one table;
    ``exists`` False for a table the database does not have (yet)."""

    exists: bool
    rows: int | None = None
    bytes: int | None = None
    estimated: bool = False

    def to_dict(self) -> dict:
        return {"exists": self.exists, "rows": self.rows, "rows_estimated": self.estimated, "bytes": self.bytes}


ABSENT = TableSize(exists=False)

_PG_CLASS = sa.table("pg_class", sa.column("oid"), sa.column("relname"), sa.column("relnamespace"),
                     sa.column("relkind"), schema="pg_catalog")
_PG_NAMESPACE = sa.table("pg_namespace", sa.column("oid"), sa.column("nspname"), schema="pg_catalog")
_MYSQL_TABLES = sa.table("TABLES", sa.column("TABLE_SCHEMA"), sa.column("TABLE_NAME"), sa.column("TABLE_ROWS"),
                         sa.column("DATA_LENGTH"), sa.column("INDEX_LENGTH"), schema="information_schema")
_DBSTAT = sa.table("dbstat", sa.column("name"), sa.column("pgsize"))


def table_size(conn: Connection, name: str) -> TableSize:
    """The live size of table *name* (in the connection's default schema)."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        return _postgresql(conn, name)
    if dialect in ("mysql", "mariadb"):
        return _mysql(conn, name)
    return _sqlite(conn, name)


def _postgresql(conn: Connection, name: str) -> TableSize:
    visible = sa.func.current_schemas(False)
    oid = conn.execute(
        sa.select(_PG_CLASS.c.oid)
        .join(_PG_NAMESPACE, _PG_NAMESPACE.c.oid == _PG_CLASS.c.relnamespace)
        .where(_PG_CLASS.c.relname == name, _PG_CLASS.c.relkind.in_(["r", "p"]),
               _PG_NAMESPACE.c.nspname == sa.any_(visible))
        .order_by(sa.func.array_position(visible, _PG_NAMESPACE.c.nspname)).limit(1)).scalar()
    if oid is None:
        return ABSENT
    size = conn.execute(sa.select(sa.func.pg_total_relation_size(oid))).scalar()
    rows = planner_rows(conn, sa.select(sa.literal_column("1")).select_from(sa.table(name)))
    return TableSize(exists=True, rows=rows, bytes=int(size), estimated=True)


def _mysql(conn: Connection, name: str) -> TableSize:
    t = _MYSQL_TABLES.c
    row = conn.execute(sa.select(t.TABLE_ROWS, t.DATA_LENGTH, t.INDEX_LENGTH)
                       .where(t.TABLE_SCHEMA == sa.func.database(), t.TABLE_NAME == name)).first()
    if row is None:
        return ABSENT
    rows, data, index = row
    known = data is not None
    return TableSize(exists=True, rows=None if rows is None else int(rows),
                     bytes=int(data) + int(index or 0) if known else None, estimated=True)


def _sqlite(conn: Connection, name: str) -> TableSize:
    if not sa.inspect(conn).has_table(name):
        return ABSENT
    rows = conn.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar()
    try:
        with conn.begin_nested():
            size = conn.execute(sa.select(sa.func.sum(_DBSTAT.c.pgsize)).where(_DBSTAT.c.name == name)).scalar()
    except sa.exc.OperationalError:  # a library built without SQLITE_ENABLE_DBSTAT_VTAB
        size = None
    return TableSize(exists=True, rows=int(rows), bytes=None if size is None else int(size))
