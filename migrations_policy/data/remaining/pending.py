"""What remains of each data migration, at the cost of what is pending, not of what is stored.

The contract gate and ``dbsync check`` only need to know *whether* a migration has a
pending row; ``dbsync status`` shows how many, by default as an estimate:

* **whether** (``has_pending``): the first pending row, ``LIMIT 1``: in first windows
  of the key's index (``PROBE_WINDOW`` keys each), then in the rest, so that a predicate
  joining another table is evaluated row by row through indexes where it is most
  likely to find one, instead of reading that whole table first.  A walk that is under
  way left its cursor in the ledger (``last_key``); rows past it are what it has not
  reached yet, so the probe first looks there, and finds one at once however big the
  table.  Only when nothing is pending past the cursor (or there is no cursor) does it
  look behind it: when everything is complete, that is one pass over the table per
  migration — the one cost that still grows with the table.
* **how many, estimated** (``estimate``): a sample of windows of the key's index
  (``estimate.pending_rows``: at most 8,192 rows read, right even for a column an expand
  has just added, which the planner has no statistics for); for a key that is not an
  integer, the planner's row estimate for the pending predicate.  SQLite: it counts.
* **how many, exactly** (``count_pending``): a full count (``status --exact``).

On MariaDB/MySQL each of these runs with subquery materialization off
(``index_lookups``): an anti-join (``NOT EXISTS`` a node) over a whole table was
planned as a materialized copy of the other table, probed per row (1,000,000 ports
and nodes, nothing pending: 17.7 s; as index lookups, 3.2 s).

A completion is remembered only with a proof the database keeps that no row was written
since (``completion``: trigger-maintained dirty marks, read before the probe): the ledger
is never that proof.  Without one (a predicate the marks cannot cover, triggers missing or
not installable), the probe runs every time.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Iterable, Iterator, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.data.remaining.estimate import pending_rows
from migrations_policy.data.remaining import completion
from migrations_policy.data import ledger
from migrations_policy.data.declare import DataMigration, key_bound


class PendingMigration(NamedTuple):
    """A migration's remaining rows (None when inapplicable), its ledger state, and whether
    *remaining* is the planner's estimate (never 0: 0 is always a verified fact)."""

    name: str
    remaining: int | None
    state: str
    estimated: bool = False


#: ``Connection.info`` key: ``index_lookups`` is in force on this connection.
_LOOKUPS = "migrations_policy.index_lookups"
#: A constant of ours (no input reaches it): the one optimizer flag ``index_lookups`` turns off.
_NO_MATERIALIZATION = sa.text("SET SESSION optimizer_switch = 'materialization=off'")
_RESTORE = sa.text("SET SESSION optimizer_switch = :saved")


@contextmanager
def index_lookups(conn: Connection) -> Iterator[None]:
    """On MariaDB/MySQL, for the duration: subqueries as per-row index lookups, never
    materialized (the session's ``optimizer_switch`` is restored afterwards).  MariaDB
    plans ``NOT EXISTS (SELECT ... WHERE other.id = t.fk)`` over many rows by copying
    the whole other table into a temporary table first, which costs several times the
    lookups through its primary key, and for ``LIMIT 1`` reads it all before the first
    row.  Other dialects: nothing.  Nested uses share the outer one."""
    if conn.dialect.name != "mysql" or conn.info.get(_LOOKUPS):
        yield
        return
    saved = conn.execute(sa.select(sa.literal_column("@@session.optimizer_switch"))).scalar()
    conn.execute(_NO_MATERIALIZATION)
    conn.info[_LOOKUPS] = True
    try:
        yield
    finally:
        conn.info.pop(_LOOKUPS, None)
        if not conn.invalidated:
            conn.execute(_RESTORE, {"saved": saved})


def count_pending(conn: Connection, migration: DataMigration, where: Any = None) -> int:
    """Rows matching the pending predicate (and *where*)."""
    condition = migration.pending if where is None else where
    with index_lookups(conn), full_passes(conn):
        return int(conn.execute(sa.select(sa.func.count()).select_from(migration.table).where(condition)).scalar())


def absent(conn: Connection, migration: DataMigration, inspector: Any = None) -> list[tuple[str, str | None]]:
    """``(table, None)`` or ``(table, column)`` the migration uses that the database does not have."""
    inspector = inspector or sa.inspect(conn)
    missing: list[tuple[str, str | None]] = []
    for table, columns in sorted(migration.columns_used().items()):
        if not inspector.has_table(table):
            missing.append((table, None))
            continue
        present = {c["name"].lower() for c in inspector.get_columns(table)}
        missing.extend((table, c) for c in sorted(columns) if c.lower() not in present)
    return missing


def missing_columns(conn: Connection, migration: DataMigration, inspector: Any = None) -> list[str]:
    """``table`` or ``table.column`` the migration uses that the database does not have."""
    return [table if column is None else f"{table}.{column}" for table, column in absent(conn, migration, inspector)]


#: Keys of the first window a probe looks at.  A pending predicate with an anti-join (``NOT
#: EXISTS`` over another table) asked for one row anywhere is planned as a full read of that
#: table (MariaDB materializes it) before the first row comes back; within a window of keys
#: MariaDB looks each row up by index instead (300,000 ports and nodes, an orphan at key
#: 1,000: 24 ms instead of 1.1 s).  Only the first windows: PostgreSQL may hash the other
#: table for every window, so the rest is one probe (one pass when nothing is pending).
PROBE_WINDOW = 10_000
#: The PostgreSQL setting ``one_row_plans`` turns off.
_PARALLEL_WORKERS = "max_parallel_workers_per_gather"
#: ``Connection.info`` key: ``one_row_plans`` is in force; its value is the setting it replaced.
_ONE_ROW = "migrations_policy.one_row_plans"


def has_pending(conn: Connection, migration: DataMigration, last_key: str | None = None,
                inspector: Any = None) -> bool:
    """Whether any row is pending: past the ledger's cursor *last_key*, and behind it.

    The cheap parts first: the first windows of keys past the cursor, then behind it (with
    plans that return their first row early), and only then the rest of each part (when
    nothing is pending: one pass over the table)."""
    nulls = _null_keys(conn, migration, inspector)
    if nulls is not None and conn.execute(nulls.limit(1)).first() is not None:
        return True
    cursor = cursor_value(conn, migration, last_key, inspector)
    parts = [(None, None)] if cursor is None else [(cursor, None), (None, cursor)]
    rests = []
    with index_lookups(conn):
        with one_row_plans(conn):
            for after, through in parts:
                found, rest = _in_windows(conn, migration, after, through)
                if found:
                    return True
                if rest is not None:
                    rests.append(rest)
            with full_passes(conn):
                return any(_pending_where(conn, migration, *rest) for rest in rests)


def _pending_where(conn: Connection, migration: DataMigration, *where: Any) -> bool:
    key = migration.key_column
    return conn.execute(sa.select(key).where(*where, migration.pending).limit(1)).first() is not None


def _in_windows(conn: Connection, migration: DataMigration, after: Any, through: Any) -> tuple[bool, list | None]:
    """Whether a row with ``after < key <= through`` (None: unbounded) is pending in the first
    windows of keys, and the condition of the rest of the range (None: nothing is left):

    1. integer keys: the keys from the first one up to ``PROBE_WINDOW`` past it (the first key
       is one index lookup, so the cost does not depend on the table's size);
    2. the next ``PROBE_WINDOW`` keys that exist (its edge read with ``OFFSET``: the window for
       sparse and non-integer keys).
    """
    key = migration.key_column
    start = [] if after is None else [key > key_bound(after)]
    bound = [] if through is None else [key <= key_bound(through)]
    first = conn.execute(sa.select(sa.func.min(key)).where(*start, *bound)).scalar()
    if first is None:
        return False, None  # no row in the range at all
    if isinstance(first, int) and not isinstance(first, bool):
        edge = key_bound(first + PROBE_WINDOW - 1)
        if _pending_where(conn, migration, *start, *bound, key <= edge):
            return True, None
        start = [key > edge]
    edge = conn.execute(sa.select(key).where(*start, *bound).order_by(key).offset(PROBE_WINDOW - 1).limit(1)).scalar()
    if edge is None:
        return _pending_where(conn, migration, *start, *bound), None
    edge = key_bound(edge)
    return _pending_where(conn, migration, *start, key <= edge), [key > edge, *bound]


@contextmanager
def one_row_plans(conn: Connection) -> Iterator[None]:
    """PostgreSQL, for the duration (in the current transaction): no parallel plans.  For a
    window of 10,000 keys PostgreSQL plans a parallel bitmap scan whose workers take longer to
    start than the probe takes to find its row (1,000,000 ports, an orphan at key 1,000: 23.6
    ms in parallel, 3.9 ms in one process).  ``full_passes`` gives a statement that reads a
    whole table its parallel plans back.  Set with ``set_config(..., true)``: local to the
    transaction, so an error leaves nothing behind once the caller rolls back.  Nested uses
    share the outer one; other dialects: nothing."""
    if conn.dialect.name != "postgresql" or _ONE_ROW in conn.info:
        yield
        return
    saved = conn.execute(sa.select(sa.func.current_setting(_PARALLEL_WORKERS))).scalar()
    _set_parallel_workers(conn, "0")
    conn.info[_ONE_ROW] = saved
    try:
        yield
    finally:
        conn.info.pop(_ONE_ROW, None)
    _set_parallel_workers(conn, saved)  # not after an error: the transaction is aborted


@contextmanager
def full_passes(conn: Connection) -> Iterator[None]:
    """Inside ``one_row_plans``: the parallel plans back for the duration (a count, a probe that
    reads what is left of a table)."""
    saved = conn.info.get(_ONE_ROW)
    if saved is None:
        yield
        return
    _set_parallel_workers(conn, saved)
    yield
    _set_parallel_workers(conn, "0")


def _set_parallel_workers(conn: Connection, value: str) -> None:
    conn.execute(sa.select(sa.func.set_config(_PARALLEL_WORKERS, value, True)))


def remaining(conn: Connection, migration: DataMigration, last_key: str | None = None, exact: bool = False,
              inspector: Any = None) -> tuple[int, bool]:
    """A run's rows still pending, and whether that number is the planner's estimate.

    0 is always verified (``has_pending``: past the ledger's cursor *last_key* first, so
    while work remains it costs a window, not the table).  A pending row found, the rows are
    counted when *exact*, when the table holds at most ``PROBE_WINDOW`` rows (a bounded read),
    or where the database gives no estimate (SQLite); otherwise the planner's estimate, at
    least 1."""
    if exact:
        return count_pending(conn, migration), False
    if not has_pending(conn, migration, last_key, inspector):
        return 0, False
    guess = None if _at_most_one_window(conn, migration) else estimate(conn, migration)
    if guess is None:
        return count_pending(conn, migration), False
    return max(int(guess), 1), True


def _at_most_one_window(conn: Connection, migration: DataMigration) -> bool:
    """Whether the table holds at most ``PROBE_WINDOW`` rows (reads at most one more key)."""
    keys = sa.select(migration.key_column).limit(PROBE_WINDOW + 1).subquery()
    return conn.execute(sa.select(sa.func.count()).select_from(keys)).scalar() <= PROBE_WINDOW


def estimate(conn: Connection, migration: DataMigration) -> int | None:
    """The pending rows, estimated (``estimate.pending_rows``); None where the database gives
    no estimate (SQLite)."""
    return pending_rows(conn, migration.table, migration.key_column, migration.pending)


def pending_migrations(connection: Connection, registry: Iterable[DataMigration],
                       exact: bool = False, stop_at_pending: bool = False,
                       remember: bool = False) -> list[PendingMigration]:
    """Every migration's remaining rows and ledger state, for the gate, ``check`` and ``status``.

    Zero is always verified (no pending row exists).  Otherwise the count is the
    planner's estimate (``estimated``), at least 1, unless *exact* (or the database
    gives no estimate).  A table or column that does not exist: remaining None.

    *stop_at_pending*: for a verdict that one unfinished migration settles (``check``,
    a refusing gate): the migrations the ledger does not say complete are probed
    first, and the list ends at the first with rows remaining; the others are not
    probed (proving a migration complete is the one probe that reads its whole table).

    *remember* (``status`` and ``check``, which report): a completion proven since the last
    write to what the predicate reads is not probed again (``completion``); the mark triggers
    are installed where missing once nothing is pending, and the completions this call proves recorded (in transactions
    of their own, on other connections: never in the caller's, which may be a migration's).
    Without it (the gate of an upgrade, the drop guard, the next release's expand: every
    judgement that lets a statement destroy or strand data) no proof is read: the proofs and
    marks live in tables any user who may write the database can write (an application user
    deleting its marks, or writing a proof row whose fingerprint it computes), so what lets
    data go is recounted live, like the ledger, which is never a proof either.
    """
    registry = list(registry)
    states = ledger.read(connection)
    complete = _install_where_complete(connection, registry, states, stop_at_pending) \
        if remember and not exact else set()
    inspector = sa.inspect(connection)
    with index_lookups(connection), one_row_plans(connection) if not exact else nullcontext():
        return _pending_migrations(connection, registry, exact, stop_at_pending, states, inspector, remember,
                                   complete)


def _install_where_complete(connection: Connection, registry: list[DataMigration], states: dict,
                            stop_at_pending: bool) -> set[str]:
    """The mark triggers of the migrations whose triggers are missing and that have nothing pending
    (``completion``: a pending migration gets none, they would only tax its writes).  Probed on a
    connection of its own, closed before installing (MariaDB: a read holds the table's metadata
    lock until its transaction ends, and ``CREATE TRIGGER`` waits for it).  The names found
    complete: this call reports them without probing again (its next call proves)."""
    missing = completion.missing(connection, registry)
    if not missing:
        return set()
    if stop_at_pending:  # the order the call probes in: it stops at the first pending one
        missing.sort(key=lambda m: states.get(m.name, {}).get("state") == ledger.COMPLETE)
    complete = []
    with connection.engine.connect() as probe:
        with index_lookups(probe), one_row_plans(probe):
            for migration in missing:
                if not has_pending(probe, migration, states.get(migration.name, {}).get("last_key")):
                    complete.append(migration)
                elif stop_at_pending:
                    break
    for migration in complete:
        completion.install(connection.engine, migration)
    if connection.in_transaction() and connection.dialect.name == "sqlite":
        connection.commit()  # reads only: let the installer's writes be seen
    return {m.name for m in complete}


def _pending_migrations(connection: Connection, registry: Iterable[DataMigration], exact: bool,
                        stop_at_pending: bool, states: dict, inspector: Any,
                        remember: bool = False, complete: set[str] = frozenset()) -> list[PendingMigration]:
    found = []
    snap = None
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
            continue
        if migration.name in complete:  # probed a moment ago, its triggers installed since
            found.append(PendingMigration(migration.name, 0, state))
            continue
        if not remember:  # a judgement that lets data go: recounted live, never remembered
            proof = None
        else:
            if snap is None:
                snap = completion.snapshot(connection, inspector)  # once, before the first probe
            proof = completion.read(connection, migration, inspector, snap)
        if proof is not None and proof.valid:
            found.append(PendingMigration(migration.name, 0, state))
        elif not has_pending(connection, migration, row.get("last_key"), inspector):
            found.append(PendingMigration(migration.name, 0, state))
            if proof is not None:
                completion.remember(connection.engine, migration, proof)
        else:
            guess = estimate(connection, migration)
            found.append(PendingMigration(migration.name, count_pending(connection, migration), state)
                         if guess is None else PendingMigration(migration.name, max(guess, 1), state, True))
    return found


def null_keyed(conn: Connection, migration: DataMigration, inspector: Any = None) -> int:
    """The pending rows whose key is NULL (0 unless the key column is nullable).  No probe window,
    walk or claim can reach them (``key > x`` is never true of NULL), so they are looked for
    separately: the gate counts them as pending, and the runner fails the migration on them."""
    nulls = _null_keys(conn, migration, inspector)
    if nulls is None:
        return 0
    with index_lookups(conn):
        return int(conn.execute(sa.select(sa.func.count()).select_from(nulls.subquery())).scalar())


def _null_keys(conn: Connection, migration: DataMigration, inspector: Any = None) -> sa.Select | None:
    """The pending rows whose key is NULL (None when the key column cannot hold one)."""
    column = _key_reflected(conn, migration, inspector)
    if column is None or not column.get("nullable", True):
        return None
    key = migration.key_column
    return sa.select(key).where(key.is_(None), migration.pending)


def _key_reflected(conn: Connection, migration: DataMigration, inspector: Any = None) -> dict | None:
    """The key column as the database reflects it (None: no such column)."""
    inspector = inspector or sa.inspect(conn)
    columns = {c["name"].lower(): c for c in inspector.get_columns(migration.table_name)}
    return columns.get(migration.key.lower())


def cursor_value(conn: Connection, migration: DataMigration, last_key: str | None, inspector: Any = None) -> Any:
    """The ledger's text *last_key* as a value of the key column's type (integer or text keys
    only; None for any other type, or when it does not parse)."""
    if last_key is None:
        return None
    column = _key_reflected(conn, migration, inspector)
    column_type = None if column is None else column["type"]
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
