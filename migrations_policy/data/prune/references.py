"""Which foreign keys point at a table, read from the catalog of every schema the server knows.

``sa.inspect(conn).get_foreign_keys`` reads one schema (the default one) table by table: a table in
another PostgreSQL schema, or another MariaDB database, referencing the table ``ON DELETE CASCADE``
is invisible to it, and a DELETE of "unreferenced" rows then cascades into it.  So the references
are read where the server keeps them all:

* PostgreSQL: ``pg_catalog.pg_constraint`` (every schema, whatever the session's privileges on the
  referencing tables), keyed by the referenced table's OID;
* MariaDB / MySQL: InnoDB's own dictionary (``information_schema.INNODB_SYS_FOREIGN`` and
  ``..._COLS`` on MariaDB, ``INNODB_FOREIGN`` on MySQL 8), every database; it needs the PROCESS
  privilege.  ``information_schema.KEY_COLUMN_USAGE`` shows only the tables the user may read, so it
  is no substitute: without the privilege the references cannot be read and ``ReferencesUnreadable``
  is raised (the caller refuses to delete);
* SQLite: ``PRAGMA foreign_key_list`` of every table of every attached database.

The statements are constant SQL with bound values (no identifier is formatted into them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.core.errors import PolicyError


class ReferencesUnreadable(PolicyError):
    """The catalog of every schema cannot be read: which rows another table references is unknown."""

    exit_code = 2


@dataclass(frozen=True)
class Reference:
    """A foreign key of ``schema.table (columns)`` referring to the table's ``referred`` columns;
    *schema* is None when it is the connection's default schema (or database)."""

    schema: str | None
    table: str
    columns: tuple[str, ...]
    referred: tuple[str, ...]
    constraint: str = ""
    #: The catalog's identity of the foreign key (PostgreSQL: its OID; InnoDB: its ID).
    ident: object = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table


_PG = sa.text("""
SELECT c.oid AS constraint_oid, c.conname AS constraint_name, n.nspname AS schema_name,
       cl.relname AS table_name, a.attname AS column_name, fa.attname AS referred_name, k.ord AS position,
       current_schema() AS current_schema_name
FROM pg_catalog.pg_constraint c
JOIN pg_catalog.pg_class cl ON cl.oid = c.conrelid
JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace
CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(attnum, fattnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
JOIN pg_catalog.pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = k.fattnum
WHERE c.contype = 'f' AND c.confrelid = to_regclass(quote_ident(:table))
ORDER BY c.oid, k.ord
""")
_MARIADB = sa.text("""
SELECT f.ID AS constraint_name, f.FOR_NAME AS child, f.REF_NAME AS parent, c.FOR_COL_NAME AS column_name,
       c.REF_COL_NAME AS referred_name, c.POS AS position, DATABASE() AS current_database
FROM information_schema.INNODB_SYS_FOREIGN f
JOIN information_schema.INNODB_SYS_FOREIGN_COLS c ON c.ID = f.ID
ORDER BY f.ID, c.POS
""")
_MYSQL8 = sa.text("""
SELECT f.ID AS constraint_name, f.FOR_NAME AS child, f.REF_NAME AS parent, c.FOR_COL_NAME AS column_name,
       c.REF_COL_NAME AS referred_name, c.POS AS position, DATABASE() AS current_database
FROM information_schema.INNODB_FOREIGN f
JOIN information_schema.INNODB_FOREIGN_COLS c ON c.ID = f.ID
ORDER BY f.ID, c.POS
""")
#: InnoDB keeps names as file names: "db/table", other characters than [A-Za-z0-9_] as "@xxxx".
_INNODB_ESCAPE = re.compile(r"@([0-9a-fA-F]{4})")


def read_references(connection: Connection, table: str) -> list[Reference]:
    """Every foreign key, in any schema/database, referring to *table* of the default schema."""
    dialect = connection.dialect.name
    try:
        if dialect == "postgresql":
            return _postgresql(connection, table)
        if dialect in ("mysql", "mariadb"):
            return _innodb(connection, table)
        return _sqlite(connection, table)
    except sa.exc.DBAPIError as exc:
        reason = " ".join(str(getattr(exc, "orig", exc)).split())[:200]
        raise ReferencesUnreadable(
            f"cannot read which tables of every schema reference {table} ({reason}); nothing deleted"
            + (" (MariaDB/MySQL: the user needs the PROCESS privilege to read InnoDB's foreign keys)"
               if dialect in ("mysql", "mariadb") else "")) from None


def _postgresql(connection: Connection, table: str) -> list[Reference]:
    rows = connection.execute(_PG, {"table": table}).all()
    return _group([(r.constraint_oid, None if r.schema_name == r.current_schema_name else r.schema_name,
                    r.table_name, r.column_name, r.referred_name, r.constraint_name) for r in rows])


def _innodb_name(text: str) -> tuple[str, str]:
    database, _, name = text.partition("/")
    decode = lambda part: _INNODB_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), part)  # noqa: E731
    return decode(database), decode(name)


def _innodb(connection: Connection, table: str) -> list[Reference]:
    rows = connection.execute(_MARIADB if getattr(connection.dialect, "is_mariadb", False) else _MYSQL8).all()
    found = []
    for r in rows:
        parent_db, parent = _innodb_name(r.parent)
        if (parent_db.lower(), parent.lower()) != ((r.current_database or "").lower(), table.lower()):
            continue
        child_db, child = _innodb_name(r.child)
        found.append((r.constraint_name, None if child_db.lower() == (r.current_database or "").lower()
                      else child_db, child, r.column_name, r.referred_name, r.constraint_name.partition("/")[2]))
    return _group(found)


def _sqlite(connection: Connection, table: str) -> list[Reference]:
    found = []
    schemas = [row[1] for row in connection.exec_driver_sql("PRAGMA database_list")]
    inspector = sa.inspect(connection)
    for schema in schemas:
        if schema == "temp":
            continue
        for other in inspector.get_table_names(schema=None if schema == "main" else schema):
            for number, fk in enumerate(inspector.get_foreign_keys(other, schema=None if schema == "main"
                                                                    else schema)):
                if fk.get("referred_table") == table and fk.get("constrained_columns"):
                    for column, referred in zip(fk["constrained_columns"], fk["referred_columns"]):
                        found.append(((schema, other, number), None if schema == "main" else schema, other,
                                      column, referred, fk.get("name") or ""))
    return _group(found)


def _group(rows: list[tuple]) -> list[Reference]:
    """(constraint id, schema, table, column, referred, constraint name) rows in key order -> References."""
    by_constraint: dict[object, list[tuple]] = {}
    for row in rows:
        by_constraint.setdefault(row[0], []).append(row)
    return [Reference(schema=parts[0][1], table=parts[0][2], columns=tuple(p[3] for p in parts),
                      referred=tuple(p[4] for p in parts), constraint=parts[0][5] or "", ident=key)
            for key, parts in by_constraint.items()]


_PG_IDENTS = sa.text("SELECT c.oid FROM pg_catalog.pg_constraint c "
                     "WHERE c.contype = 'f' AND c.confrelid = to_regclass(quote_ident(:table))")
_MARIADB_IDENTS = sa.text("SELECT ID, REF_NAME, DATABASE() FROM information_schema.INNODB_SYS_FOREIGN")
_MYSQL8_IDENTS = sa.text("SELECT ID, REF_NAME, DATABASE() FROM information_schema.INNODB_FOREIGN")


def reference_idents(connection: Connection, table: str) -> frozenset:
    """The catalog identities of the foreign keys referring to *table* (``Reference.ident``): one
    cheap read for a batch to tell whether the references it was built on are still all there are.
    A foreign key re-created or added gets a new identity.  Raises ``ReferencesUnreadable``."""
    dialect = connection.dialect.name
    try:
        if dialect == "postgresql":
            return frozenset(connection.execute(_PG_IDENTS, {"table": table}).scalars())
        if dialect in ("mysql", "mariadb"):
            query = _MARIADB_IDENTS if getattr(connection.dialect, "is_mariadb", False) else _MYSQL8_IDENTS
            found = set()
            for ident, parent, database in connection.execute(query):
                parent_db, name = _innodb_name(parent)
                if (parent_db.lower(), name.lower()) == ((database or "").lower(), table.lower()):
                    found.add(ident)
            return frozenset(found)
        return frozenset(r.ident for r in _sqlite(connection, table))
    except sa.exc.DBAPIError as exc:
        reason = " ".join(str(getattr(exc, "orig", exc)).split())[:200]
        raise ReferencesUnreadable(f"cannot read which tables of every schema reference {table} ({reason}); "
                                   "nothing deleted") from None
