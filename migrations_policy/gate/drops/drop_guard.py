"""No revision drops what an unfinished data migration still reads, declared or not.

A contract revision names the data migrations it needs (``gate.py``), but the
name is the author's promise: a contract that forgets it, an expand that drops a
column, or a drop hidden in ``op.get_bind().exec_driver_sql(...)`` would lose the
rows that migration has not moved yet.  So what a revision *does* decides too:

* before the run, ``gate.evaluate`` runs each revision's ``upgrade()`` offline
  (``offline_run``), normalizes what it invokes with the policy knowledge base,
  and asks :func:`readers` which declared data migrations read a table or column
  it drops or renames; those it treats as required.  A migration whose tables or
  columns do not all exist protects what of them holds data (the ledger is never asked:
  any application user can write it): before its expand has run, it has not moved anything yet; gone
  after completing, it is retired and protects nothing;
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
  Names are not enough (a column dropped and added again under its name, a table
  emptied, a type changed): of the rows sampled at the start at both ends of the
  key (``SAMPLE_ROWS``), some must still be there, and each column must keep some of
  its sampled non-NULL values (release N's own writes meanwhile change some, not all).
  PostgreSQL and SQLite roll the revision's transaction back; where the DDL had
  committed (MariaDB/MySQL; SQLite after a script's ``executescript``, which commits
  first) the revision is not recorded and ``refuse(..., committed=True)`` says what
  is gone.

All of them ask one function, :func:`readers`.  ``--force`` lets them through (the
gate records the force).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from migrations_policy.core.reflect import column_names
from migrations_policy.policy import model as m

#: Operations after which a migration reading the table (column None) or column cannot finish
#: (TRUNCATE leaves the table but none of its rows).
_DESTROYING_TABLE = (m.DROP_TABLE, m.RENAME_TABLE, m.TRUNCATE)
#: A type change (not a widening: ``WIDEN_VARCHAR``) may rewrite any value, in any row
#: (``USING``, a lossy cast), so it is judged like a drop of the column.  Not MySQL's raw
#: ``MODIFY``/``CHANGE``, which restate the type to change only the nullability or a default:
#: there the check after ``upgrade()`` compares the values.
_DESTROYING_COLUMN = (m.DROP_COLUMN, m.RENAME_COLUMN, *m.TYPE_CHANGES)
_BATCH_PREFIX = "_alembic_tmp_"

Destroyed = tuple[str, "str | None"]  # (table, column); column None: the whole table


def destroyed(operations: Iterable[m.Operation]) -> list[Destroyed]:
    """The tables and columns these operations drop or rename away."""
    found: list[Destroyed] = []
    for operation in operations:
        if operation.kind in _DESTROYING_TABLE and operation.table:
            found.append((operation.table, None))
        elif operation.kind in _DESTROYING_COLUMN and operation.table and operation.column \
                and not (operation.kind in m.TYPE_CHANGES and operation.only_on == "mysql"):
            found.append((operation.table, operation.column))
    return list(dict.fromkeys(found))


def describe(item: Destroyed) -> str:
    return item[0] if item[1] is None else f"{item[0]}.{item[1]}"


def readers(registry: Iterable[Any], gone: Iterable[Destroyed]) -> dict[str, list[str]]:
    """{data migration name: ["nodes.extra", ...]}: the declared migrations that read (or write)
    a table or column in *gone*: the columns its expressions name; every column of its table when
    it may read some no expression names (the function form, SQL text).  (Not every column its
    ``sa.table`` declares: one such table commonly serves several migrations.)  Names compare
    case-insensitively (MariaDB, SQLite)."""
    gone = list(gone)
    found: dict[str, list[str]] = {}
    for migration in registry:
        used = {table.lower(): {c.lower() for c in columns} for table, columns in migration.columns_used().items()}
        every = migration.table_name.lower() if migration.reads_unnamed_columns else None
        for table, column in gone:
            columns = used.get(table.lower())
            if (table == m.ANY_TABLE and used) or (  # DROP TYPE ... CASCADE: any column read may be of that type
                    columns is not None and (column is None or column.lower() in columns or table.lower() == every)):
                found.setdefault(migration.name, []).append(describe((table, column)))
    return found


def unfinished_readers(connection: Connection, registry: Any, gone: Iterable[Destroyed],
                       known: Iterable[Any] = (), skip: Iterable[str] = ()) -> dict[str, tuple[Any, list[str]]]:
    """{name: (its PendingMigration, what it reads that goes)} for the readers of *gone* that are not
    finished (``_at_stake``); *skip* are left out.  *known*: PendingMigrations just probed by the
    caller (not probed again)."""
    from migrations_policy.data.remaining.pending import pending_migrations

    skip, gone = set(skip), list(gone)
    wanted = {name for name in readers(registry, gone) if name not in skip}
    if not wanted:
        return {}
    probed = {p.name: p for p in known if p.name in wanted}
    probed.update((p.name, p) for p in pending_migrations(
        connection, [registry[name] for name in wanted if name not in probed]))
    return _losing(registry, probed, _at_stake(connection, registry, probed.values()), gone)


def _losing(registry: Any, pending: dict[str, Any], stakes: dict[str, set[Destroyed] | None],
            gone: list[Destroyed]) -> dict[str, tuple[Any, list[str]]]:
    """{name: (its PendingMigration, what of *gone* it may not lose)} of the migrations in *stakes*."""
    found = {}
    for name, stake in stakes.items():
        what = readers([registry[name]], [g for g in gone if stake is None or _key(g) in stake]).get(name)
        if what:
            found[name] = (pending[name], what)
    return found


def _at_stake(connection: Connection, registry: Any, probed: Iterable[Any]) -> dict[str, set[Destroyed] | None]:
    """{name: what a revision may not destroy (None: all it reads)} of the migrations not finished:

    * rows pending: all it reads;
    * its tables or columns do not all exist (``remaining`` None) and it has not started (``_unstarted``: its expand has not run yet): the tables
      and columns it uses that hold data (a row; a non-NULL value) are still the only copy;
    * complete, or gone after completing (retired): nothing."""
    from migrations_policy.data.remaining.pending import absent

    probed = list(probed)
    stakes: dict[str, set[Destroyed] | None] = {}
    inspector = sa.inspect(connection)
    for p in probed:
        if p.remaining:
            stakes[p.name] = None
        elif p.remaining is None:  # the ledger is never asked: any application user can write it
            migration = registry[p.name]
            missing = {_key(item) for item in absent(connection, migration, inspector)}
            if not _unstarted(migration, missing):
                continue
            held = {_key(item) for item in _holding_data(connection, migration) if _key(item) not in missing}
            if held:
                stakes[p.name] = held
    return stakes


def _unstarted(migration: Any, missing: set[Destroyed]) -> bool:
    """Whether a migration some of whose tables or columns are *missing* may not have moved its
    data yet: its own table is there, and what is missing is a column it writes (a ``values``
    target: its expand has not run), or cannot be told apart from one (the function form).  A
    set-based migration missing only columns it reads was retired by the contract that dropped
    them (its ledger row may predate the framework's: an adopted history)."""
    table = migration.table_name.lower()
    if (table, None) in missing:
        return False
    if migration.values is None:
        return True
    targets = {(table, column.lower()) for column in migration.values}
    return any(item in targets for item in missing)


def _holding_data(connection: Connection, migration: Any) -> list[Destroyed]:
    """The tables (a row) and columns (a non-NULL value) *migration* uses that hold data; a table or
    column that does not exist holds none."""
    inspector = sa.inspect(connection)
    held: list[Destroyed] = []
    for table, columns in sorted(migration.columns_used().items()):
        present = column_names(inspector, table)
        if not present:
            continue
        names = [present[c.lower()] for c in sorted(columns) if c.lower() in present]
        target = sa.table(table, *(sa.column(name) for name in names))
        if connection.execute(sa.select(sa.literal(1)).select_from(target).limit(1)).first() is None:
            continue
        held.append((table, None))
        held.extend((table, name) for name in names if connection.execute(
            sa.select(sa.literal(1)).select_from(target).where(target.c[name].is_not(None)).limit(1)).first())
    return held


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


#: Rows whose values the final check compares: a column dropped and added again under its name,
#: a table emptied, a type changed (values cast or set to NULL) change every row, so rows at both
#: ends of the key show it: up to ``SAMPLE_ROWS`` holding a value, among the first and the last
#: ``PROBE_WINDOW`` rows by key (a bounded read, whatever the table's size).
SAMPLE_ROWS = 64


class _Sample(NamedTuple):
    """Rows of a migration's table as a revision starts: *columns* (those at stake, present) and
    {key: values} of the sampled rows."""

    table: str
    columns: tuple[str, ...]
    rows: dict[Any, tuple]


def _sample(connection: Connection, migration: Any, stake: set[Destroyed] | None) -> _Sample | None:
    """Rows holding values at stake in the migration's own table (None: none there)."""
    from migrations_policy.data.remaining.pending import PROBE_WINDOW

    table = migration.table_name
    present = column_names(sa.inspect(connection), table)
    declared = migration.table.c  # the migration's own columns, as its expressions name them
    columns = tuple(sorted(c.name for c in declared if c.name != migration.key and c.name.lower() in present
                           and (stake is None or (table.lower(), c.name.lower()) in stake)))
    if not columns or migration.key.lower() not in present:
        return None
    key = migration.key_column
    rows: dict[Any, tuple] = {}
    for order in (key, key.desc()):
        window = sa.select(key.label("k"), *(declared[c] for c in columns)).where(key.is_not(None)) \
            .order_by(order).limit(PROBE_WINDOW).subquery()
        held = sa.or_(*(window.c[c].is_not(None) for c in columns))
        rows.update((row[0], tuple(row[1:])) for row in connection.execute(
            sa.select(window).where(held).limit(SAMPLE_ROWS)))
    return _Sample(table, columns, rows) if rows else None


def _changed(connection: Connection, migration: Any, sample: _Sample) -> list[Destroyed]:
    """What of *sample* the revision destroyed: its table when every sampled row is gone; a column
    when every sampled non-NULL value of it changed (set to NULL, cast to another type, added
    again empty or with a default).  Release N keeps writing while a revision runs (PostgreSQL's
    and MariaDB's statements see its commits): it updates and deletes some rows, not all."""
    present = column_names(sa.inspect(connection), sample.table)
    if migration.key.lower() not in present:  # also: the table is gone
        return [(sample.table, None)]
    gone = [(sample.table, c) for c in sample.columns if c.lower() not in present]
    kept = [(i, c) for i, c in enumerate(sample.columns) if c.lower() in present]
    key, declared = migration.key_column, migration.table.c
    now = {row[0]: tuple(row[1:]) for row in connection.execute(
        sa.select(key, *(declared[c] for _, c in kept)).where(key.in_(list(sample.rows))))}
    if not now:
        return [(sample.table, None)]
    changed = []
    for j, (i, column) in enumerate(kept):
        held = [(k, before[i]) for k, before in sample.rows.items() if before[i] is not None and k in now]
        if held and not any(_same(now[k][j], value) for k, value in held):
            changed.append((sample.table, column))
    return gone + changed


def _same(now: Any, before: Any) -> bool:
    return now == before or (now != now and before != before)  # NaN is NaN


def home_schema(connection: Connection) -> str:
    """The schema (PostgreSQL), database (MariaDB/MySQL) or ``main`` (SQLite) the run's unqualified
    table names resolve to as it starts."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        return connection.execute(sa.select(sa.func.current_schema())).scalar()
    if dialect in ("mysql", "mariadb"):
        return connection.execute(sa.select(sa.func.database())).scalar()
    return "main"


def _shadowed(connection: Connection, home: str, tables: Iterable[str]) -> list[str]:
    """Of *tables*, those whose unqualified name no longer resolves to the one in *home*: a
    temporary table of that name (PostgreSQL, SQLite), a changed ``search_path`` (PostgreSQL) or
    current database (``USE``, MariaDB/MySQL).  The guard's probes read unqualified names, so they
    would judge that other table while the revision drops the real one."""
    tables = sorted({t.lower() for t in tables})
    dialect = connection.dialect.name
    if dialect in ("mysql", "mariadb"):
        return tables if connection.execute(sa.select(sa.func.database())).scalar() != home else []
    if dialect == "postgresql":
        c = sa.table("pg_class", sa.column("oid"), sa.column("relnamespace"))
        n = sa.table("pg_namespace", sa.column("oid"), sa.column("nspname"))
        found = []
        for table in tables:
            resolved = connection.execute(sa.select(n.c.nspname).select_from(c.join(n, n.c.oid == c.c.relnamespace))
                                          .where(c.c.oid == sa.func.to_regclass(sa.func.quote_ident(table)))).scalar()
            if resolved is not None and resolved != home:
                found.append(table)
        return found
    if dialect == "sqlite":
        temp = sa.table("sqlite_temp_master", sa.column("type"), sa.column("name"))
        names = {name.lower() for name in connection.execute(sa.select(temp.c.name).where(temp.c.type.in_(
            ("table", "view")))).scalars()}
        return [t for t in tables if t in names]
    return []


class _Watch:
    """One revision's watch: every path it can drop by asks :func:`readers` (see the module doc)."""

    def __init__(self, connection: Connection, registry: Any, revision: str, refuse: Callable[..., BaseException],
                 settled: Iterable[str], home: str | None = None):
        self.connection, self.registry, self.revision, self.refuse = connection, registry, revision, refuse
        self.settled = set(settled)
        self.home = home if home is not None else home_schema(connection)
        self.busy = False  # the guard's own probes run on this connection
        self.sqlalchemy_depth = 0  # SQLAlchemy is executing a statement judged at before_cursor_execute
        self.allowed: set[Destroyed] = set()  # what a statement check let go (its readers were finished)
        self.refused: dict[str, tuple[Any, list[str]]] = {}  # kept: a swallowed refusal still refuses
        self.unfinished: dict[str, Any] = {}  # {name: PendingMigration} unfinished as the revision starts
        self.stakes: dict[str, set[Destroyed] | None] = {}  # {name: what it may not lose} (``_at_stake``)
        self.absent_at_start: dict[str, set[Destroyed]] = {}  # {name: its tables/columns missing at the start}
        self.samples: dict[str, _Sample | None] = {}  # {name: rows' values at the start (``_sample``)}
        self.unfinished_tables: set[str] = set()  # the tables the unfinished migrations use (lower case)

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
        from migrations_policy.data.remaining.pending import absent, pending_migrations

        with self._probing():
            self._refuse_shadows([m for m in self.registry if m.name not in self.settled])
            probed = pending_migrations(self.connection, [m for m in self.registry
                                                          if m.name not in self.settled and m.name not in complete])
            complete.update(p.name for p in probed if p.remaining == 0)
            self.stakes = _at_stake(self.connection, self.registry, probed)
            self.unfinished = {p.name: p for p in probed if p.name in self.stakes}
            inspector = sa.inspect(self.connection)
            self.absent_at_start = {name: {_key(item) for item in absent(self.connection, self.registry[name],
                                                                           inspector)} for name in self.unfinished}
            self.samples = {name: _sample(self.connection, self.registry[name], self.stakes[name])
                            for name in self.unfinished}
            self.unfinished_tables = {t.lower() for name in self.unfinished
                                      for t in self.registry[name].columns_used()}

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
        from migrations_policy.policy.sql import from_sql

        if self.busy:
            return
        with self._probing():  # no query unless the statement drops or shadows (autocommit blocks)
            operations = from_sql(statement, (self.connection.dialect.name,))
            watched = [self.registry[name] for name in self.unfinished]  # as probed before any shadow
            created = {o.table.lower() for o in operations if o.kind == m.CREATE_TABLE and o.table} \
                & self.unfinished_tables
            if created:  # a temporary twin of a table a migration uses
                self._refuse_shadows(watched, [t for t in created if sa.inspect(self.connection).has_table(t)])
            table_drops = [o for o in operations if o.kind == m.DROP_TABLE]
            gone = destroyed(o for o in operations if o.kind != m.DROP_TABLE)
            if table_drops:
                gone += (_batch_drops(self.connection, table_drops) if self.connection.dialect.name == "sqlite"
                         else destroyed(table_drops))
            if gone:
                self._refuse_shadows(watched)
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

    def _refuse_shadows(self, migrations: list[Any], creating: Iterable[str] = (), committed: bool = False) -> None:
        """Refuse when a table one of *migrations* uses is, or is about to be (*creating*), hidden
        behind another of its name (``_shadowed``): nothing the guard reads there could be trusted.
        As a revision starts, for every migration the gate did not judge (its probe would be the
        one fooled); later in the revision, for those unfinished as it started."""
        uses = {mg.name: {t.lower() for t in mg.columns_used()} for mg in migrations}
        used = set().union(*uses.values())
        hidden = sorted(set(_shadowed(self.connection, self.home, used)) | (set(creating) & used))
        if not hidden:
            return
        found = {name: (_NotJudged(name), [f"{t} (hidden behind another table of that name: a temporary "
                                           f"table, search_path or USE; the guard reads {self.home}.{t})"
                                           for t in hidden if t in tables]) for name, tables in uses.items()}
        raise self._refuse({name: item for name, item in found.items() if item[1]},
                           **({"committed": not _rolls_back(self.connection)} if committed else {}))

    def _found(self, gone: list[Destroyed]) -> dict[str, tuple[Any, list[str]]]:
        return _losing(self.registry, self.unfinished, self.stakes, gone)

    def verify(self) -> None:
        """After ``upgrade()``: every table and column an unfinished migration read at the start is
        still there, unless a statement check let it go.  Catches any path the hooks miss."""
        from migrations_policy.data.remaining.pending import absent

        with self._probing():
            self._refuse_shadows([self.registry[name] for name in self.unfinished], committed=True)
            inspector = sa.inspect(self.connection)
            vanished = [item for name in self.unfinished for item in absent(self.connection, self.registry[name],
                                                                              inspector)
                        if _key(item) not in self.allowed and _key(item) not in self.absent_at_start[name]]
            found = self._found(vanished)
            if not found:  # the names are there: are they still what the migrations read?
                found = self._found(list(dict.fromkeys(
                    item for name, sample in self.samples.items() if sample is not None
                    for item in _changed(self.connection, self.registry[name], sample)
                    if _key(item) not in self.allowed)))
        if found:
            raise self._refuse(found, committed=not _rolls_back(self.connection))


class _NotJudged(NamedTuple):
    """A migration the guard could not probe (its tables hidden): what a refusal names it by."""

    name: str
    remaining: None = None
    state: str = "not judged"
    estimated: bool = False


def _rolls_back(connection: Connection) -> bool:
    """Whether rolling back the run's transaction undoes the revision's DDL: PostgreSQL in a
    transaction; SQLite while its driver holds one open (``sqlite_transactions``: a revision is one
    transaction, unless a script's ``executescript`` committed it); never MariaDB/MySQL."""
    from migrations_policy.expand.lock_timeout import in_real_transaction

    if connection.dialect.name == "sqlite":
        return bool(getattr(connection.connection.driver_connection, "in_transaction", False))
    return in_real_transaction(connection)


@contextlib.contextmanager
def watching(connection: Connection, registry: Any, revision: str,
             refuse: Callable[..., BaseException], settled: Iterable[str] = (),
             complete: set[str] | None = None, home: str | None = None) -> Iterator[None]:
    """While the block runs *revision*, refuse (raise ``refuse(revision, found)``) anything on
    *connection* that drops or renames what an unfinished migration reads: each statement SQLAlchemy
    sends (``before_cursor_execute``), each one sent to the driver directly (``raw_paths``), and,
    after the block, whatever is gone though no check let it go (``refuse(..., committed=...)``:
    whether the drop is beyond the transaction's rollback).  *settled*: migrations the gate judged
    before the run (complete, or forced), which are not probed again — the gate's verdict stands for
    them (a contract that removed the sync triggers first lets release N+1's writes leave the old
    columns behind, on purpose).  *complete*: the run's migrations found complete by an earlier
    revision's watch (see ``_Watch.start``); pass the same set to every revision of a run.  *home*:
    ``home_schema`` as the run started (a revision may change what unqualified names resolve to:
    such a change is refused, ``_shadowed``)."""
    from migrations_policy.gate.drops import raw_paths

    watch = _Watch(connection, registry, revision, refuse, settled, home)
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
