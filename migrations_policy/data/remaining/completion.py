"""A data migration's completion, proven once and remembered only while nothing can have changed it.

Proving that nothing is pending reads the whole table (``pending.has_pending`` finds nothing
only after one pass), so a ``check`` in a deployment loop, a ``status`` and the gate would pay
a full pass per call, per migration, for as long as the migration stays declared.  Instead,
a completion is remembered with a proof that no row has been written since, kept by the
database itself:

* **dirty marks** (``migrations_policy_data_dirty``, one row per migration and writing
  session): triggers on every table the pending predicate reads (and the parents whose
  ``ON DELETE``/``ON UPDATE`` actions write those tables) bump the writing session's mark in
  the writer's own transaction.  PostgreSQL: one statement-level trigger per table (``INSERT
  OR UPDATE OR DELETE OR TRUNCATE``), a ``SECURITY DEFINER`` function (the application user
  needs no grant); MariaDB/MySQL and SQLite: row triggers.  Marks are per session, so
  writers never wait for one another on them;
* **the proof** (``migrations_policy_data_proofs``): a probe that found nothing pending,
  with a fingerprint of what it judged (the pending predicate's SQL, the columns of every
  table it reads, the triggers' names).

A migration is complete without a probe only when its proof's fingerprint matches, its
triggers are all present (and enabled), and it has no dirty mark.  Recording a proof is
race-free by visibility, not by locks: the marks are read *before* the probe, in a snapshot
the probe's own snapshots follow, so every mark read belongs to a transaction whose writes
the probe saw; only those marks are deleted, each only if its ``seq`` is still the one read
(a mark bumped meanwhile stays).  A writer that commits after the probe's snapshot leaves a
mark that survives, and the next call probes again.  Installing the triggers writes a mark of
its own, so a probe whose snapshot predates the triggers cannot prove anything.

**When they are installed**: once a probe of ``status``/``check`` finds nothing pending
(``pending.pending_migrations`` with *remember*), not before, and never by a runner (other runners
of the migration may still walk its table: DDL on it failed their statements on MariaDB, 1684).  A proof is only ever recorded for a migration with
nothing pending, so while rows are pending the triggers would only tax every write: the walk's
own batches (MariaDB/MySQL and SQLite: a row trigger per migrated row; MariaDB, 300,000 rows:
the runner's ``UPDATE``s took 1.4-2.2x as long with them) and the application's.  The call
that installs them does not remember (its probe's snapshot may predate them); the next proves.

The ledger is never part of the proof: a ledger row saying ``complete`` switches nothing off.
What is not covered, so never remembered (probed every time, as before): a pending predicate
with SQL text, a column of no table, or a function that is not a known side-effect-free
built-in (a user function may read any table; ``now()`` changes without any write).
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager, nullcontext
from typing import Any, Iterable, Iterator, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql import functions as sa_functions

from migrations_policy.core.framework_tables import TABLE_PREFIX
from migrations_policy.data.declare import DataMigration

DIRTY_TABLE = f"{TABLE_PREFIX}data_dirty"
PROOFS_TABLE = f"{TABLE_PREFIX}data_proofs"
#: PostgreSQL: the one trigger function every mark trigger calls (the migration: its argument).
MARK_FUNCTION = f"{TABLE_PREFIX}dirty_mark"
TRIGGER_PREFIX = "mp_done_"
#: MariaDB/MySQL: a runner of a set-based migration whose predicate reads its own table only names
#: it in this session variable while its batches run; that migration's triggers then leave no mark
#: (row triggers there cost one upsert per row: 1M rows, 1M upserts).  Such a batch only updates
#: rows that were pending, so it cannot make one pending; the probe after the walk decides.
QUIET_VARIABLE = "migrations_policy_quiet"
#: Seconds a proof's writes (trigger DDL, marks) wait for a lock before giving up: remembering
#: is an optimisation, it never makes live traffic wait.
LOCK_WAIT = 0.5  # MariaDB/MySQL: 1 (whole seconds)

metadata = sa.MetaData()
dirty = sa.Table(
    DIRTY_TABLE, metadata,
    sa.Column("migration", sa.String(128), primary_key=True),
    sa.Column("session_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
)
proofs = sa.Table(
    PROOFS_TABLE, metadata,
    sa.Column("migration", sa.String(128), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
)

#: Functions a rememberable pending predicate may call: deterministic, reading no table.
_PURE = {"coalesce", "lower", "upper", "length", "char_length", "concat", "abs", "trim", "ltrim", "rtrim",
         "substr", "substring", "replace", "nullif", "greatest", "least", "cast", "round", "floor", "ceil",
         "count", "max", "min", "sum", "json_extract", "jsonb_typeof", "json_typeof"}


def rememberable(migration: DataMigration | Subject) -> bool:
    """Whether every table and function the pending predicate reads is known (fail closed)."""
    if getattr(migration, "schema_qualified", False) or not migration.columns_used():
        return False
    for element in sa.sql.visitors.iterate(migration.pending):
        if isinstance(element, sa.TextClause):
            return False
        if isinstance(element, sa.ColumnClause) and element.table is None and element.name != "*":  # EXISTS's *
            return False
        if isinstance(element, sa_functions.FunctionElement):
            name = getattr(element, "name", "") or ""
            if name.lower() not in _PURE:
                return False
    return True


class Subject:
    """Something other than a data migration whose emptiness a proof remembers: the rows of
    *query*, a SELECT over tables of the current schema (a contract's precondition: the rows
    a constraint it adds would reject).  Quacks like the ``DataMigration`` parts used here."""

    values = None

    def __init__(self, label: str, query: Any, dialect: Any):
        compiled = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        self.name = f"{label} {_digest(compiled)[:24]}"[:128]
        self.pending = query
        self._used: dict[str, set[str]] = {}
        self.schema_qualified = False
        for element in sa.sql.visitors.iterate(query):
            table = getattr(element, "table", None) if isinstance(element, sa.ColumnClause) else None
            while isinstance(table, sa.sql.selectable.Alias) and isinstance(table.element, sa.TableClause):
                table = table.element
            if isinstance(table, sa.TableClause) and not isinstance(table, sa.sql.selectable.Subquery):
                self.schema_qualified = self.schema_qualified or table.schema is not None
                self._used.setdefault(table.name, set()).add(element.name)

    @property
    def table_name(self) -> str:
        return next(iter(self._used), "")

    def columns_used(self) -> dict[str, set[str]]:
        return self._used


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


class Snapshot(NamedTuple):
    """What one call reads once, before any probe: the marks, the proofs, the mark triggers
    present (and enabled), and on MariaDB/MySQL the cascading foreign keys."""

    ready: bool  # the framework tables exist
    marks: dict[str, tuple[tuple[int, int], ...]]  # migration: ((session_id, seq), ...)
    proofs: dict[str, str]  # migration: fingerprint
    triggers: dict[str, str]  # trigger name: its table (lower case)
    parents: dict[str, set[str]]  # table (lower case): tables whose FK actions write it (MariaDB/MySQL)
    #: The marks and proofs as committed now, read after the triggers (validity).  Differs from
    #: *marks*/*proofs* on MariaDB/MySQL only, whose REPEATABLE READ snapshot may predate the
    #: catalog's state (a trigger re-installed since): there, read on a connection of their own.
    current: tuple[dict, dict] | None = None


_TRIGGERS = {
    "postgresql": "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                  "WHERE t.tgname LIKE :prefix AND t.tgenabled IN ('O', 'A') AND c.relnamespace = "
                  "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())",
    "mysql": "SELECT trigger_name, event_object_table FROM information_schema.triggers "
             "WHERE trigger_schema = DATABASE() AND trigger_name LIKE :prefix",
    "sqlite": "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE :prefix",
}
#: MariaDB/MySQL run no trigger for the rows a foreign key's action changes: the tables those
#: actions come from get mark triggers too.  (PostgreSQL and SQLite run the child's triggers.)
_CASCADES = ("SELECT table_name, referenced_table_name FROM information_schema.referential_constraints "
             "WHERE constraint_schema = DATABASE() AND (delete_rule NOT IN ('RESTRICT', 'NO ACTION') "
             "OR update_rule NOT IN ('RESTRICT', 'NO ACTION'))")


def _dialect(conn: Connection | Engine) -> str:
    return "mysql" if conn.dialect.name == "mariadb" else conn.dialect.name


def snapshot(conn: Connection, inspector: Any = None) -> Snapshot:
    """Read once per call, before any probe (a handful of statements whatever the registry)."""
    inspector = inspector or sa.inspect(conn)
    dialect = _dialect(conn)
    parents: dict[str, set[str]] = {}
    if dialect == "mysql":
        for child, parent in conn.execute(sa.text(_CASCADES)):
            parents.setdefault(child.lower(), set()).add(parent)
    triggers = {name: table.lower() for name, table in
                conn.execute(sa.text(_TRIGGERS[dialect]), {"prefix": TRIGGER_PREFIX + "%"})}
    try:  # a user who may not read them (privileges), or MariaDB's 1412 (the tables are newer than
        if not (inspector.has_table(DIRTY_TABLE) and inspector.has_table(PROOFS_TABLE)):  # this
            return Snapshot(False, {}, {}, triggers, parents)                          # transaction's
        with conn.begin_nested() if dialect == "postgresql" else nullcontext():  # snapshot): no proof
            marks, stored = _marks_and_proofs(conn)
        current = None
        if dialect == "mysql":
            with conn.engine.connect() as fresh:
                current = _marks_and_proofs(fresh)
    except sa.exc.DBAPIError:
        return Snapshot(False, {}, {}, triggers, parents)
    return Snapshot(True, marks, stored, triggers, parents, current)


def _marks_and_proofs(conn: Connection) -> tuple[dict, dict]:
    marks: dict[str, tuple] = {}
    for name, session_id, seq in conn.execute(sa.select(dirty.c.migration, dirty.c.session_id, dirty.c.seq)):
        marks[name] = (*marks.get(name, ()), (session_id, seq))
    return marks, dict(conn.execute(sa.select(proofs.c.migration, proofs.c.fingerprint)).all())


def _tables(migration: DataMigration, snap: Snapshot) -> list[str]:
    """The tables whose writes can change the pending predicate: the ones it reads, and on
    MariaDB/MySQL the tables whose cascading foreign keys write them, transitively."""
    found = {t.lower(): t for t in migration.columns_used()}
    todo = list(found)
    while todo:
        for parent in snap.parents.get(todo.pop(), ()):
            if parent.lower() not in found:
                found[parent.lower()] = parent
                todo.append(parent.lower())
    return sorted(found.values())


def trigger_name(migration: str, table: str) -> str:
    return f"{TRIGGER_PREFIX}{_digest(migration, table)[:20]}"


def _suffixes(dialect: str) -> tuple[str, ...]:
    return ("",) if dialect == "postgresql" else ("_ai", "_au", "_ad")


def _installed(dialect: str, migration: DataMigration, snap: Snapshot) -> bool:
    return all(snap.triggers.get(trigger_name(migration.name, t) + suffix) == t.lower()
               for t in _tables(migration, snap) for suffix in _suffixes(dialect))


class Proof(NamedTuple):
    """What a call read before probing: whether the remembered completion still holds, and
    what recording a new one needs."""

    valid: bool
    fingerprint: str | None  # None: not rememberable here
    marks: tuple[tuple[int, int], ...]  # (session_id, seq) read before the probe
    installed: bool  # every trigger present (and enabled)


_NO = Proof(False, None, (), False)


def supported(conn: Connection | Engine, migration: DataMigration) -> bool:
    return conn.dialect.name in ("postgresql", "mysql", "mariadb", "sqlite") and rememberable(migration)


def read(conn: Connection, migration: DataMigration, inspector: Any = None, snap: Snapshot | None = None) -> Proof:
    """The migration's proof as it stands; read *before* probing (see the module's docstring).
    *snap*: this call's ``snapshot``, taken before any probe (read now when None)."""
    if not supported(conn, migration):
        return _NO
    inspector = inspector or sa.inspect(conn)
    snap = snap or snapshot(conn, inspector)
    fingerprint = _fingerprint(conn, migration, inspector, snap)
    if fingerprint is None:
        return _NO
    if not snap.ready:
        return _NO._replace(fingerprint=fingerprint)
    marks = snap.marks.get(migration.name, ())
    installed = _installed(_dialect(conn), migration, snap)
    now_marks, now_proofs = snap.current or (snap.marks, snap.proofs)
    valid = installed and not marks and not now_marks.get(migration.name) \
        and now_proofs.get(migration.name) == fingerprint
    return Proof(valid, fingerprint, marks, installed)


#: MariaDB / MySQL 8: InnoDB's identity of each table.  ``TRUNCATE`` re-creates the table and runs no
#: ``DELETE`` trigger (so leaves no mark): a ``NOT EXISTS`` over the truncated table, or a predicate
#: true for no row left, would then stand on a proof of rows that are gone.  The new table has a new
#: ``TABLE_ID``, which the fingerprint holds.  Reading it needs the PROCESS privilege (as the prune's
#: references do): without it no completion is remembered (probed every time).
_INNODB_IDS = {"mariadb": "SELECT name, table_id FROM information_schema.INNODB_SYS_TABLES WHERE name IN :names",
               "mysql": "SELECT name, table_id FROM information_schema.INNODB_TABLES WHERE name IN :names"}


def _identities(conn: Connection, tables: list[str]) -> list | None:
    """The tables' InnoDB identities (MariaDB/MySQL; ``[]`` elsewhere); None when they cannot be read."""
    if _dialect(conn) != "mysql" or not tables:
        return []
    database = conn.execute(sa.text("SELECT DATABASE()")).scalar()
    names = {f"{database}/{t}".lower(): t for t in tables}
    query = sa.text(_INNODB_IDS["mariadb" if conn.dialect.name == "mariadb" or getattr(
        conn.dialect, "is_mariadb", False) else "mysql"]).bindparams(sa.bindparam("names", expanding=True))
    try:
        with conn.begin_nested() if conn.in_transaction() else nullcontext():
            found = {name.lower(): table_id for name, table_id in conn.execute(query, {"names": list(names)})}
    except sa.exc.DBAPIError:  # no PROCESS privilege, or no such table in this server version
        return None
    if set(found) != set(names):  # a name InnoDB encodes differently (or a table of another engine)
        return None
    return sorted(found.items())


def _fingerprint(conn: Connection, migration: DataMigration, inspector: Any, snap: Snapshot) -> str | None:
    """What a proof judged; None when it cannot be told (then nothing is remembered)."""
    pending = str(migration.pending.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    tables = _tables(migration, snap)
    columns = {t: [(c["name"], str(c["type"]), c.get("nullable"), str(c.get("default")))
                   for c in inspector.get_columns(t)] if inspector.has_table(t) else None for t in tables}
    identities = _identities(conn, [t for t in tables if columns[t] is not None])
    if identities is None:
        return None
    return _digest(conn.dialect.name, migration.name, pending, columns,
                   [trigger_name(migration.name, t) for t in tables], *([identities] if identities else []))


# -- writing: triggers, proofs ------------------------------------------------------------
def _lit(value: str, dialect: Any) -> str:
    return str(sa.literal(value, sa.String()).compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def _ddl(conn: Connection, text: str) -> None:
    """*text* as ``DDL`` (which %-formats it: where the driver formats with ``%`` too, the dialect's
    quoting already escaped identifiers and literals, as in ``window.sync_triggers``)."""
    if "%%" not in conn.dialect.identifier_preparer.quote("%"):
        text = text.replace("%", "%%")
    conn.execute(sa.DDL(text))


@contextmanager
def _short_lock_wait(conn: Connection) -> Iterator[None]:
    """For the duration: waits for locks of at most ``LOCK_WAIT`` seconds (PostgreSQL: local to
    the transaction; MariaDB/MySQL: the session's settings, restored afterwards, since the
    connection goes back to the pool)."""
    name = conn.dialect.name
    if name == "postgresql":
        conn.execute(sa.select(sa.func.set_config("lock_timeout", f"{int(LOCK_WAIT * 1000)}ms", True)))
        yield
        return
    if name not in ("mysql", "mariadb"):
        yield
        return
    saved = conn.execute(sa.text("SELECT @@session.lock_wait_timeout, @@session.innodb_lock_wait_timeout")).one()
    conn.execute(sa.text("SET SESSION lock_wait_timeout = 1, innodb_lock_wait_timeout = 1"))
    try:
        yield
    finally:
        if not conn.invalidated:
            conn.execute(sa.text("SET SESSION lock_wait_timeout = :a, innodb_lock_wait_timeout = :b"),
                         {"a": saved[0], "b": saved[1]})


def install(engine: Engine, migration: DataMigration) -> bool:
    """Create the framework tables and the migration's mark triggers where missing, and leave a
    mark (so that no probe whose snapshot predates the triggers proves anything).  False when
    they cannot be installed here (privileges, a lock not granted in ``LOCK_WAIT`` seconds):
    completion is then probed every time, as without them."""
    if not supported(engine, migration):
        return False
    try:
        with engine.connect() as conn:
            metadata.create_all(conn, checkfirst=True)
            conn.commit()
            snap = snapshot(conn)
            if _installed(_dialect(conn), migration, snap):
                return True
            tables = _tables(migration, snap)
            conn.rollback()
            with conn.begin():  # first: the triggers run as this user (MariaDB's DEFINER, PostgreSQL's
                _mark(conn, migration.name)  # SECURITY DEFINER): one that may not write the marks would
            with conn.begin(), _short_lock_wait(conn):  # make every write of the application fail
                _create_triggers(conn, migration, tables)
                _mark(conn, migration.name)
        return True
    except sa.exc.DBAPIError:
        return False


def uninstall(engine: Engine, migration: DataMigration) -> int:
    """Drop *migration*'s mark triggers, marks and proof where an older release installed them
    for a migration that keeps no proof now (a prune): writes to its tables stop paying a mark
    each.  The number of triggers dropped; 0 when there are none, or they cannot be dropped here
    (privileges, a lock not granted in ``LOCK_WAIT`` seconds: the next run tries again).
    Dropping is always safe: a proof holds only while its triggers are all present."""
    dialect = _dialect(engine)
    if dialect not in _TRIGGERS:
        return 0
    try:
        with engine.connect() as conn:
            listed = conn.execute(sa.text(_TRIGGERS[dialect]), {"prefix": TRIGGER_PREFIX + "%"}).all()
            tables = {table for _, table in listed} | set(migration.columns_used())
            ours = {trigger_name(migration.name, table) + suffix for table in tables for suffix in _suffixes(dialect)}
            going = [(name, table) for name, table in listed if name in ours]
            conn.rollback()
            if not going:
                return 0
            q = conn.dialect.identifier_preparer.quote
            with conn.begin(), _short_lock_wait(conn):
                for name, table in going:
                    _ddl(conn, f"DROP TRIGGER IF EXISTS {q(name)}" + (f" ON {q(table)}" if dialect == "postgresql" else ""))
            with conn.begin():
                conn.execute(sa.delete(dirty).where(dirty.c.migration == migration.name))
                conn.execute(sa.delete(proofs).where(proofs.c.migration == migration.name))
        return len(going)
    except sa.exc.DBAPIError:
        return 0


def missing(connection: Connection, registry: Iterable[DataMigration]) -> list[DataMigration]:
    """The migrations of *registry* that could keep a proof here but whose triggers are missing
    (their tables and columns present)."""
    chosen = [m for m in registry if supported(connection, m)]
    if not chosen:
        return []
    inspector = sa.inspect(connection)
    snap = snapshot(connection, inspector)
    return [m for m in chosen if _applicable(inspector, m) and not _installed(_dialect(connection), m, snap)]


def _applicable(inspector: Any, migration: DataMigration | Subject) -> bool:
    """Every table and column the migration uses exists (an inapplicable one gets no triggers:
    a database past its contract is left as it is)."""
    for table, columns in migration.columns_used().items():
        if not inspector.has_table(table):
            return False
        present = {c["name"].lower() for c in inspector.get_columns(table)}
        if any(c.lower() not in present for c in columns if c != "*"):
            return False
    return True


def _mark(conn: Connection, name: str) -> None:
    """A mark of session 0 (not a real session on any dialect), bumped if present."""
    updated = conn.execute(sa.update(dirty).where(dirty.c.migration == name, dirty.c.session_id == 0)
                           .values(seq=dirty.c.seq + 1)).rowcount
    if not updated:
        conn.execute(sa.insert(dirty).values(migration=name, session_id=0, seq=1))


def _create_triggers(conn: Connection, migration: DataMigration, tables: Iterable[str]) -> None:
    dialect = conn.dialect
    q = dialect.identifier_preparer.quote
    name = _lit(migration.name, dialect)
    if dialect.name == "postgresql":
        schema = conn.execute(sa.select(sa.func.current_schema())).scalar()
        target = f"{q(schema)}.{q(DIRTY_TABLE)}"
        function = f"{q(schema)}.{q(MARK_FUNCTION)}"
        _ddl(conn, f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
                   f"SECURITY DEFINER SET search_path = pg_catalog AS $mp_done$\nBEGIN\n"
                   f"  INSERT INTO {target} AS d (migration, session_id, seq) VALUES (TG_ARGV[0], pg_backend_pid(), 1)\n"
                   f"  ON CONFLICT (migration, session_id) DO UPDATE SET seq = d.seq + 1;\n"
                   f"  RETURN NULL;\nEND\n$mp_done$")
        for table in tables:
            trigger = q(trigger_name(migration.name, table))
            _ddl(conn, f"DROP TRIGGER IF EXISTS {trigger} ON {q(table)}")
            _ddl(conn, f"CREATE TRIGGER {trigger} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {q(table)} "
                       f"FOR EACH STATEMENT EXECUTE FUNCTION {function}({name})")
        return
    if dialect.name in ("mysql", "mariadb"):
        database = conn.execute(sa.select(sa.func.database())).scalar()
        target = f"{q(database)}.{q(DIRTY_TABLE)}"
        for table in tables:
            for suffix, event in (("_ai", "INSERT"), ("_au", "UPDATE"), ("_ad", "DELETE")):
                trigger = q(trigger_name(migration.name, table) + suffix)
                _ddl(conn, f"DROP TRIGGER IF EXISTS {trigger}")
                _ddl(conn, f"CREATE TRIGGER {trigger} AFTER {event} ON {q(table)} FOR EACH ROW\n"
                           f"BEGIN /* migrations_policy completion mark */\n"
                           f"  IF @{QUIET_VARIABLE} IS NULL OR @{QUIET_VARIABLE} <> {name} THEN\n"
                           f"    INSERT INTO {target} (migration, session_id, seq) VALUES ({name}, CONNECTION_ID(), 1)\n"
                           f"    ON DUPLICATE KEY UPDATE seq = seq + 1;\n"
                           f"  END IF;\nEND")
        return
    for table in tables:  # SQLite: one writer at a time; session 1 (0 is the installer's)
        for suffix, event in (("_ai", "INSERT"), ("_au", "UPDATE"), ("_ad", "DELETE")):
            trigger = q(trigger_name(migration.name, table) + suffix)
            _ddl(conn, f"DROP TRIGGER IF EXISTS {trigger}")
            _ddl(conn, f"CREATE TRIGGER {trigger} AFTER {event} ON {q(table)} FOR EACH ROW\n"
                       f"BEGIN\n  INSERT INTO {q(DIRTY_TABLE)} (migration, session_id, seq) VALUES ({name}, 1, 1)\n"
                       f"  ON CONFLICT (migration, session_id) DO UPDATE SET seq = seq + 1;\nEND")


def remember(engine: Engine, migration: DataMigration, proof: Proof) -> bool:
    """After a probe that found nothing pending (and read *proof* before it): record the
    completion, and delete the marks read before the probe (each only if not bumped since).
    Not when the triggers were missing at *proof*'s read (installed now: the next call proves)."""
    if proof.fingerprint is None:
        return False
    if not proof.installed:
        install(engine, migration)
        return False
    try:
        with engine.connect() as conn:
            with conn.begin(), _short_lock_wait(conn):
                for session_id, seq in proof.marks:
                    conn.execute(sa.delete(dirty).where(dirty.c.migration == migration.name,
                                                        dirty.c.session_id == session_id, dirty.c.seq == seq))
                updated = conn.execute(sa.update(proofs).where(proofs.c.migration == migration.name)
                                       .values(fingerprint=proof.fingerprint)).rowcount
                if not updated:
                    conn.execute(sa.insert(proofs).values(migration=migration.name, fingerprint=proof.fingerprint))
        return True
    except sa.exc.DBAPIError:
        return False


def quiet(conn: Connection, migration: DataMigration | None) -> None:
    """MariaDB/MySQL, a runner's batch connection: its set-based batches of *migration* leave no
    mark (None: every write marks again).  Sent only when the session's value changes (remembered
    per DBAPI connection: one statement per connection, not one per batch).  Other dialects:
    nothing (one mark per statement)."""
    if conn.dialect.name not in ("mysql", "mariadb"):
        return
    value = migration.name if migration is not None and migration.values is not None \
        and set(migration.columns_used()) == {migration.table_name} else None
    info = conn.connection.info
    if _QUIET_SENT in info and info[_QUIET_SENT] == value:
        return
    info.pop(_QUIET_SENT, None)  # unknown until the SET below has run
    conn.execute(sa.text(f"SET @{QUIET_VARIABLE} = :v"), {"v": value})
    info[_QUIET_SENT] = value


_QUIET_SENT = "migrations_policy.quiet"
