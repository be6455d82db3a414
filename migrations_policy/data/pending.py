"""What remains of each data migration, at the cost of what is pending, not of what is stored.

The contract gate and ``dbsync check`` only need to know *whether* a migration has a
pending row; ``dbsync status`` shows how many, by default as an estimate:

* **whether** (``has_pending``): the first pending row, ``LIMIT 1``.  A walk that is under
  way left its cursor in the ledger (``last_key``); rows past it are what it has not
  reached yet, so the probe first looks there, in key order through the key's index,
  and finds one at once however big the table.  Only when nothing is pending past the
  cursor (or there is no cursor) does it look anywhere: when everything is complete,
  that is one pass over the table per migration (sequential, or through an index the
  pending predicate can use) — the one cost that still grows with the table.
* **how many, estimated** (``estimate``): the planner's row estimate for the pending
  predicate (PostgreSQL ``EXPLAIN``, MariaDB/MySQL ``EXPLAIN FORMAT=JSON``): no scan,
  as good as the table's statistics.  SQLite has none: it counts.
* **how many, exactly** (``count_pending``): a full count (``status --exact``).

A completion is never remembered: the probe runs every time, because release-N code
can make rows pending again at any moment and only the rows themselves can say so.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..planner import planner_rows
from . import ledger
from .declare import DataMigration


class PendingMigration(NamedTuple):
    """A migration's remaining rows (None when inapplicable), its ledger state, and whether
    *remaining* is the planner's estimate (never 0: 0 is always a verified fact)."""

    name: str
    remaining: int | None
    state: str
    estimated: bool = False


def count_pending(conn: Connection, migration: DataMigration, where: Any = None) -> int:
    """Rows matching the pending predicate (and *where*)."""
    condition = migration.pending if where is None else where
    return int(conn.execute(sa.select(sa.func.count()).select_from(migration.table).where(condition)).scalar())


def missing_columns(conn: Connection, migration: DataMigration, inspector: Any = None) -> list[str]:
    """``table`` or ``table.column`` the migration uses that the database does not have."""
    inspector = inspector or sa.inspect(conn)
    missing = []
    for table, columns in sorted(migration.columns_used().items()):
        if not inspector.has_table(table):
            missing.append(table)
            continue
        present = {c["name"].lower() for c in inspector.get_columns(table)}
        missing.extend(f"{table}.{c}" for c in sorted(columns) if c.lower() not in present)
    return missing


def has_pending(conn: Connection, migration: DataMigration, last_key: str | None = None,
                inspector: Any = None) -> bool:
    """Whether any row is pending: past the ledger's cursor *last_key* first, then anywhere."""
    key, pending = migration.key_column, migration.pending
    cursor = _cursor(conn, migration, last_key, inspector)
    if cursor is not None:
        ahead = sa.select(key).where(key > cursor, pending).order_by(key).limit(1)
        if conn.execute(ahead).first() is not None:
            return True
    return conn.execute(sa.select(key).where(pending).limit(1)).first() is not None


def estimate(conn: Connection, migration: DataMigration) -> int | None:
    """The planner's estimate of the pending rows; None where the database gives none (SQLite)."""
    return planner_rows(conn, sa.select(migration.key_column).where(migration.pending))


def pending_migrations(connection: Connection, registry: Iterable[DataMigration],
                       exact: bool = False, stop_at_pending: bool = False) -> list[PendingMigration]:
    """Every migration's remaining rows and ledger state, for the gate, ``check`` and ``status``.

    Zero is always verified (no pending row exists).  Otherwise the count is the
    planner's estimate (``estimated``), at least 1, unless *exact* (or the database
    gives no estimate).  A table or column that does not exist: remaining None.

    *stop_at_pending*: for a verdict that one unfinished migration settles (``check``,
    a refusing gate): the migrations the ledger does not say complete are probed
    first, and the list ends at the first with rows remaining; the others are not
    probed (proving a migration complete is the one probe that reads its whole table).
    """
    states = ledger.read(connection)
    inspector = sa.inspect(connection)
    found = []
    migrations = list(registry)
    if stop_at_pending:
        migrations.sort(key=lambda m: states.get(m.name, {}).get("state") == ledger.COMPLETE)
    for migration in migrations:
        if stop_at_pending and found and found[-1].remaining:
            break
        if missing_columns(connection, migration, inspector):
            found.append(PendingMigration(migration.name, None, ledger.INAPPLICABLE))
            continue
        row = states.get(migration.name, {})
        state = row.get("state", ledger.NEVER_RUN)
        if exact:
            found.append(PendingMigration(migration.name, count_pending(connection, migration), state))
        elif not has_pending(connection, migration, row.get("last_key"), inspector):
            found.append(PendingMigration(migration.name, 0, state))
        else:
            guess = estimate(connection, migration)
            found.append(PendingMigration(migration.name, count_pending(connection, migration), state)
                         if guess is None else PendingMigration(migration.name, max(guess, 1), state, True))
    return found


def _cursor(conn: Connection, migration: DataMigration, last_key: str | None, inspector: Any) -> Any:
    """The ledger's text *last_key* as a value of the key column's type (integer or text keys
    only; None for any other type, or when it does not parse)."""
    if last_key is None:
        return None
    inspector = inspector or sa.inspect(conn)
    columns = {c["name"].lower(): c["type"] for c in inspector.get_columns(migration.table_name)}
    column_type = columns.get(migration.key.lower())
    try:
        python_type = column_type.python_type if column_type is not None else None
    except NotImplementedError:
        return None
    if python_type is int:
        try:
            return int(last_key)
        except ValueError:
            return None
    return last_key if python_type is str else None
