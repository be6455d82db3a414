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
  new table lacks are the dropped ones;
* what a revision sends to the DB-API driver itself
  (``op.get_bind().connection.dbapi_connection.cursor()``, sqlite3's
  ``executescript``, psycopg's ``connection.execute``, PyMySQL's ``query``) is
  judged by a hook on the driver (``raw_paths``): the statement text, or on SQLite
  what the database itself reports it is about to drop (its authorizer);
* after the revision's ``upgrade()``, before its version row is written, every
  table and column an unfinished migration read when the revision started must
  still be there unless a check above let it go: whatever path no hook saw (a
  cursor class built by hand, libpq, a driver's private call) is refused there.
  PostgreSQL and SQLite roll the revision's transaction back; where the DDL had
  committed (MariaDB/MySQL; SQLite after a script's ``executescript``, which commits
  first) the revision is not recorded and ``refuse(..., committed=True)`` says what
  is gone.

All of them ask one function, :func:`readers`.  ``--force`` lets them through (the
gate records the force).
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
            if (table == m.ANY_TABLE and used) or (  # DROP TYPE ... CASCADE: any column read may be of that type
                    columns is not None and (column is None or column.lower() in columns)):
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


def _key(item: Destroyed) -> Destroyed:
    return item[0].lower(), None if item[1] is None else item[1].lower()


class _Watch:
    """One revision's watch: every path it can drop by asks :func:`readers` (see the module doc)."""

    def __init__(self, connection: Connection, registry: Any, revision: str, refuse: Callable[..., BaseException],
                 settled: Iterable[str]):
        self.connection, self.registry, self.revision, self.refuse = connection, registry, revision, refuse
        self.settled = set(settled)
        self.busy = False  # the guard's own probes run on this connection
        self.sqlalchemy_depth = 0  # SQLAlchemy is executing a statement judged at before_cursor_execute
        self.allowed: set[Destroyed] = set()  # what a statement check let go (its readers were finished)
        self.refused: dict[str, tuple[Any, list[str]]] = {}  # kept: a swallowed refusal still refuses
        self.unfinished: dict[str, Any] = {}  # {name: PendingMigration} unfinished as the revision starts

    def passing(self) -> bool:
        return self.busy or self.sqlalchemy_depth > 0

    @contextlib.contextmanager
    def _probing(self) -> Iterator[None]:
        busy, self.busy = self.busy, True
        try:
            yield
        finally:
            self.busy = busy

    def start(self, complete: set[str]) -> None:
        """Probe, before the revision runs, the migrations the gate did not judge: the driver hooks
        that cannot query (SQLite's authorizer) and the final check decide against these.  *complete*:
        those an earlier revision of the run found complete, not probed again (proving a migration
        complete reads its table; like the gate's verdict, it stands for the run); grows."""
        from .data.pending import pending_migrations

        with self._probing():
            probed = pending_migrations(self.connection, [m for m in self.registry
                                                          if m.name not in self.settled and m.name not in complete])
        complete.update(p.name for p in probed if p.remaining == 0)
        self.unfinished = {p.name: p for p in probed if p.remaining}

    def _refuse(self, found: dict[str, tuple[Any, list[str]]], **how: Any) -> BaseException:
        self.refused.update(found)
        error = self.refuse(self.revision, found, **how)
        error.drop_guard_refusal = True  # type: ignore[attr-defined]
        return error

    def refusal(self) -> BaseException:
        """The refusal of what a check refused (raised again when the script caught it)."""
        return self._refuse(dict(self.refused))

    def judge_statement(self, statement: str) -> None:
        """A statement about to run (``before_cursor_execute``, or a driver hook): refused when it
        drops what an unfinished migration reads, probed live."""
        from .policy.sql import from_sql

        if self.busy:
            return
        with self._probing():
            operations = from_sql(statement, (self.connection.dialect.name,))
            table_drops = [o for o in operations if o.kind == m.DROP_TABLE]
            gone = destroyed(o for o in operations if o.kind != m.DROP_TABLE)
            if table_drops:
                gone += (_batch_drops(self.connection, table_drops) if self.connection.dialect.name == "sqlite"
                         else destroyed(table_drops))
            found = unfinished_readers(self.connection, self.registry, gone, skip=self.settled) if gone else {}
        if found:
            raise self._refuse(found)
        self.allowed.update(_key(item) for item in gone)

    def judge_gone(self, gone: list[Destroyed]) -> bool:
        """What the database reports it is about to drop (no query possible): refused (True) when an
        unfinished migration (as probed at the start) reads it."""
        found = self._found(gone)
        if found:
            self.refused.update(found)
        return bool(found)

    def _found(self, gone: list[Destroyed]) -> dict[str, tuple[Any, list[str]]]:
        migrations = [self.registry[name] for name in self.unfinished]
        return {name: (self.unfinished[name], what) for name, what in readers(migrations, gone).items()}

    def verify(self) -> None:
        """After ``upgrade()``: every table and column an unfinished migration read at the start is
        still there, unless a statement check let it go.  Catches any path the hooks miss."""
        from .data.pending import absent

        with self._probing():
            inspector = sa.inspect(self.connection)
            vanished = [item for name in self.unfinished for item in absent(self.connection, self.registry[name],
                                                                              inspector)
                        if _key(item) not in self.allowed]
        found = self._found(vanished)
        if found:
            raise self._refuse(found, committed=not _rolls_back(self.connection))


def _rolls_back(connection: Connection) -> bool:
    """Whether rolling back the run's transaction undoes the revision's DDL: PostgreSQL in a
    transaction; SQLite while its driver holds one open (``sqlite_transactions``: a revision is one
    transaction, unless a script's ``executescript`` committed it); never MariaDB/MySQL."""
    from .lock_timeout import in_real_transaction

    if connection.dialect.name == "sqlite":
        return bool(getattr(connection.connection.driver_connection, "in_transaction", False))
    return in_real_transaction(connection)


@contextlib.contextmanager
def watching(connection: Connection, registry: Any, revision: str,
             refuse: Callable[..., BaseException], settled: Iterable[str] = (),
             complete: set[str] | None = None) -> Iterator[None]:
    """While the block runs *revision*, refuse (raise ``refuse(revision, found)``) anything on
    *connection* that drops or renames what an unfinished migration reads: each statement SQLAlchemy
    sends (``before_cursor_execute``), each one sent to the driver directly (``raw_paths``), and,
    after the block, whatever is gone though no check let it go (``refuse(..., committed=...)``:
    whether the drop is beyond the transaction's rollback).  *settled*: migrations the gate judged
    before the run (complete, or forced), which are not probed again — the gate's verdict stands for
    them (a contract that removed the sync triggers first lets release N+1's writes leave the old
    columns behind, on purpose).  *complete*: the run's migrations found complete by an earlier
    revision's watch (see ``_Watch.start``); pass the same set to every revision of a run."""
    from . import raw_paths

    watch = _Watch(connection, registry, revision, refuse, settled)
    watch.start(set() if complete is None else complete)

    def before_cursor_execute(conn, cursor, statement, parameters, context, executemany):
        if isinstance(statement, str):
            watch.judge_statement(statement)

    event.listen(connection, "before_cursor_execute", before_cursor_execute)
    try:
        with raw_paths.installed(connection, watch):
            try:
                yield
            except BaseException as exc:
                if watch.refused and not getattr(exc, "drop_guard_refusal", False):
                    raise watch.refusal() from exc  # e.g. SQLite's "not authorized"
                raise
            if watch.refused:  # a refusal the script caught and went on
                raise watch.refusal()
            watch.verify()
    finally:
        event.remove(connection, "before_cursor_execute", before_cursor_execute)
