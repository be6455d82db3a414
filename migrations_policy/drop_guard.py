"""No revision drops what an unfinished data migration still reads, declared or not.

A contract revision names the data migrations it needs (``gate.py``), but the
name is the author's promise: a contract that forgets it, an expand that drops a
column, or a drop hidden in ``op.get_bind().exec_driver_sql(...)`` would lose the
rows that migration has not moved yet.  So what a revision *does* decides too:

* before the run, ``gate.evaluate`` runs each revision's ``upgrade()`` offline
  (``offline_run``), normalizes what it invokes with the policy knowledge base,
  and asks :func:`readers` which declared data migrations read a table or column
  it drops or renames; those it treats as required (a migration whose table or
  columns are already gone is retired: it protects nothing);
* while the run applies a revision, :func:`watching` looks at every statement
  the migration connection sends (``before_cursor_execute``: alembic's operations,
  ``op.execute``, ``bind.execute``, ``exec_driver_sql`` alike) and refuses, before
  it reaches the database, a statement that drops or renames what an unfinished
  migration reads.  On SQLite a batch operation recreates the table
  (``DROP TABLE t`` once ``_alembic_tmp_t`` holds the new shape): the columns the
  new table lacks are the dropped ones.

Both ask one function, :func:`readers`.  ``--force`` lets both through (the gate
records the force).  Not covered: SQL sent through the raw DB-API cursor
(``connection.connection.cursor()``), which no SQLAlchemy event sees.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from .policy import model as m

#: Operations after which a migration reading the table (column None) or column cannot finish.
_DESTROYING_TABLE = (m.DROP_TABLE, m.RENAME_TABLE)
_DESTROYING_COLUMN = (m.DROP_COLUMN, m.RENAME_COLUMN)
_BATCH_PREFIX = "_alembic_tmp_"

Destroyed = tuple[str, "str | None"]  # (table, column); column None: the whole table


def destroyed(operations: Iterable[m.Operation]) -> list[Destroyed]:
    """The tables and columns these operations drop or rename away."""
    found: list[Destroyed] = []
    for operation in operations:
        if operation.kind in _DESTROYING_TABLE and operation.table:
            found.append((operation.table, None))
        elif operation.kind in _DESTROYING_COLUMN and operation.table and operation.column:
            found.append((operation.table, operation.column))
    return list(dict.fromkeys(found))


def describe(item: Destroyed) -> str:
    return item[0] if item[1] is None else f"{item[0]}.{item[1]}"


def readers(registry: Iterable[Any], gone: Iterable[Destroyed]) -> dict[str, list[str]]:
    """{data migration name: ["nodes.extra", ...]}: the declared migrations that read (or write)
    a table or column in *gone*.  Names compare case-insensitively (MariaDB, SQLite)."""
    gone = list(gone)
    found: dict[str, list[str]] = {}
    for migration in registry:
        used = {table.lower(): {c.lower() for c in columns} for table, columns in migration.columns_used().items()}
        for table, column in gone:
            columns = used.get(table.lower())
            if columns is not None and (column is None or column.lower() in columns):
                found.setdefault(migration.name, []).append(describe((table, column)))
    return found


def unfinished_readers(connection: Connection, registry: Any, gone: Iterable[Destroyed],
                       known: Iterable[Any] = (), skip: Iterable[str] = ()) -> dict[str, tuple[Any, list[str]]]:
    """{name: (its PendingMigration, what it reads that goes)} for the readers of *gone* that have
    rows pending; retired ones (their table or a column already gone) and *skip* are left out.
    *known*: PendingMigrations just probed by the caller (not probed again)."""
    from .data.pending import pending_migrations

    skip = set(skip)
    wanted = {name: what for name, what in readers(registry, gone).items() if name not in skip}
    if not wanted:
        return {}
    probed = {p.name: p for p in known if p.name in wanted}
    probed.update((p.name, p) for p in pending_migrations(
        connection, [registry[name] for name in wanted if name not in probed]))
    return {name: (p, wanted[name]) for name, p in probed.items() if p.remaining}


# -- while a revision runs ----------------------------------------------------------
def _batch_drops(connection: Connection, operations: list[m.Operation]) -> list[Destroyed]:
    """SQLite's batch mode: ``DROP TABLE t`` while ``_alembic_tmp_t`` exists drops the columns the
    new shape lacks, not the table."""
    found: list[Destroyed] = []
    inspector = sa.inspect(connection)
    for operation in operations:
        if operation.kind != m.DROP_TABLE or not operation.table:
            continue
        table = operation.table
        if not inspector.has_table(_BATCH_PREFIX + table):
            found.append((table, None))
            continue
        new = {c["name"].lower() for c in inspector.get_columns(_BATCH_PREFIX + table)}
        found.extend((table, c["name"]) for c in inspector.get_columns(table) if c["name"].lower() not in new)
    return found


@contextlib.contextmanager
def watching(connection: Connection, registry: Any, revision: str,
             refuse: Callable[[str, dict[str, tuple[Any, list[str]]]], BaseException],
             settled: Iterable[str] = ()) -> Iterator[None]:
    """While the block runs *revision*, refuse (raise ``refuse(revision, found)``) any statement on
    *connection* that drops or renames what an unfinished migration reads.  *settled*: migrations
    the gate judged before the run (complete, or forced), which are not probed again — the gate's
    verdict stands for them (a contract that removed the sync triggers first lets release N+1's
    writes leave the old columns behind, on purpose)."""
    from .policy.sql import from_sql

    busy = False

    def before_cursor_execute(conn, cursor, statement, parameters, context, executemany):
        nonlocal busy
        if busy or not isinstance(statement, str):
            return
        busy = True  # the probes below execute on this connection too
        try:
            operations = from_sql(statement)
            table_drops = [o for o in operations if o.kind == m.DROP_TABLE]
            gone = destroyed(o for o in operations if o.kind != m.DROP_TABLE)
            if table_drops:
                gone += _batch_drops(conn, table_drops) if conn.dialect.name == "sqlite" else destroyed(table_drops)
            found = unfinished_readers(conn, registry, gone, skip=settled) if gone else {}
        finally:
            busy = False
        if found:
            raise refuse(revision, found)

    event.listen(connection, "before_cursor_execute", before_cursor_execute)
    try:
        yield
    finally:
        event.remove(connection, "before_cursor_execute", before_cursor_execute)
