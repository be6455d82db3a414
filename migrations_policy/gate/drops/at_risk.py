"""One at-risk judgement for every statement of a downgrade that can destroy rows, made when it is true.

A downgrade (``dbsync rollback``, plain ``alembic downgrade``) drops what release N+1
added.  A dropped column's row is *at risk* when it holds a value that cannot be derived
again from what stays: NOT NULL and different (NULL-safe) from the value a set-based data
migration of the project computes for that column (``display_name`` written by release
N+1 beyond what ``name`` can hold); for a column no data migration fills, every NOT NULL
value; for a dropped or truncated table, every row.  A type change is judged like a drop
of its column (a ``USING`` clause or a cast may rewrite any value).  :func:`count` is that
judgement, the only one: ``dbsync rollback --dry-run`` shows it, the env.py hook refuses by it.

*When* it is made decides whether it is true.  Counted before the downgrade, outside its
locks, a release-N+1 writer that commits while the downgrade waits for its lock is dropped
with the column.  So :func:`judging` makes it for each statement as it is about to execute,
under the lock that keeps it true until the statement commits:

* PostgreSQL: ``LOCK TABLE t IN ACCESS EXCLUSIVE MODE`` in the revision's transaction, then
  the count, then the statement; lock, count and drop commit together;
* MariaDB/MySQL (every DDL commits on its own): ``LOCK TABLES t WRITE`` (writers wait), the
  count, the DDL, ``UNLOCK TABLES`` right after it (or after its error), so the journal's own
  writes stay outside the locked window;
* SQLite: the revision is one transaction holding the database's write lock
  (``sqlite_transactions``); the count is read in it.

Statements are read through the policy knowledge base (``policy.sql.from_sql``), whatever
wrote them: ``op.drop_column``, ``op.execute("ALTER TABLE ... DROP COLUMN ...")``,
``bind.execute(text(...))``, ``exec_driver_sql``; SQLite's batch mode (a table re-created
without the column) as the drop guard reads it.  Rows at risk refuse the statement before it
runs (:class:`RowsAtRisk`, exit 4 for dbsync), unless the run is forced with a reason; the
forced loss is recorded in ``migrations_policy_gate_overrides`` (command ``downgrade``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import sqlalchemy as sa
from alembic.util import CommandError
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import DDLElement
from sqlalchemy.sql import ColumnElement

from migrations_policy.core.reflect import column_names
from migrations_policy.policy import model as m

#: dbsync's exit code when a downgrade statement is refused for rows at risk (as every refusal).
EXIT_REFUSED = 4

#: Operations that destroy rows or values of what they name (a rename loses nothing).
_DESTROYING_TABLE = (m.DROP_TABLE, m.TRUNCATE)
_DESTROYING_COLUMN = (m.DROP_COLUMN, *m.TYPE_CHANGES)
#: Statements that delete or rewrite rows of a table without naming which: ``DELETE``, ``UPDATE``
#: (``MERGE``, ``REPLACE``, an ``INSERT`` that updates on conflict), and SQL acting on a table in a
#: form the knowledge base does not know (MariaDB's ``ENGINE=BLACKHOLE``, ``TRUNCATE PARTITION``, ...;
#: an alembic operation it does not know is judged by the SQL it sends, statement by statement).
_REWRITING = (m.DELETE, m.UPDATE, m.OTHER)
#: ``DROP`` of a container of tables (PostgreSQL's schemas, extensions, ``DROP OWNED``; MariaDB's
#: databases): what it takes with it is not named.
_DROPPED_CONTAINERS = ("schema ", "database ", "extension ", "owned")

#: The column of a target whose rows a statement deletes or rewrites (``_REWRITING``): which rows
#: cannot be read from the statement, so every row of the table is counted.  (``raw_paths.ROWS``.)
REWRITTEN = "<rows it deletes or rewrites>"
#: The table of a target no count can name (``DROP TYPE ... CASCADE`` takes every column of the
#: type, ``DROP SCHEMA ... CASCADE`` every table in it, a ``DO`` block builds its SQL at run time);
#: its column holds the statement's text.  Refused unless forced.
UNCOUNTABLE = "<not countable>"

Target = tuple[str, "str | None"]  # (table, column); column None: the whole table


@dataclass
class AtRisk:
    table: str
    column: str | None  # None: the whole table is dropped
    rows: int  # -1: not countable (``UNCOUNTABLE``)
    why: str

    def describe(self) -> str:
        if self.rows < 0:
            return f"{self.column}: {self.why}"
        where = f"{self.table}.{self.column}" if self.column not in (None, REWRITTEN) else f"table {self.table}"
        return f"{where}: {self.rows:,} row(s) ({self.why})"


def _amount(found: list[AtRisk]) -> str:
    rows = sum(r.rows for r in found if r.rows > 0)
    if all(r.rows > 0 for r in found):
        return f"{rows:,} row(s)"
    return f"{rows:,} row(s) and what it destroys that cannot be counted" if rows else "what it cannot count"


class RowsAtRisk(CommandError):
    """A downgrade statement would destroy rows whose only copy it holds: refused before it ran."""

    exit_code = EXIT_REFUSED

    def __init__(self, revision: str, found: list[AtRisk]):
        self.found = found
        super().__init__(f"downgrade refused: revision {revision} would lose {_amount(found)} "
                         f"({'; '.join(r.describe() for r in found)}), counted under the statement's lock; "
                         "rerun with --force --reason '...' (dbsync rollback) or -x migrations_policy_force=REASON "
                         "(alembic downgrade) to drop them anyway (recorded)")


def _application_table(name: str | None) -> bool:
    from migrations_policy.core.framework_tables import is_framework_table

    return bool(name) and name != m.ANY_TABLE and not is_framework_table(name) and name.lower() != "alembic_version"


def destroying(operations: Iterable[m.Operation]) -> list[Target]:
    """The tables and columns whose rows or values *operations* destroy, or may destroy in a way
    no count can pick out (``REWRITTEN``, ``UNCOUNTABLE``).  Fails closed: a statement keeps every
    row only when the knowledge base reads it as a kind that does (create, add, rename, index,
    constraint, default, comment, insert; a drop of an index, constraint, view, trigger, function,
    sequence or type without ``CASCADE``; a session setting or a query)."""
    found: list[Target] = []
    for operation in operations:
        if operation.kind in _DESTROYING_TABLE and operation.table:
            found.append((operation.table, None))
        elif operation.kind in _DESTROYING_COLUMN and operation.table == m.ANY_TABLE:
            found.append((UNCOUNTABLE, operation.text or operation.describe()))
        elif operation.kind in _DESTROYING_COLUMN and operation.table and operation.column:
            found.append((operation.table, operation.column))
        elif operation.kind in _REWRITING and _application_table(operation.table) and (
                operation.kind != m.OTHER or operation.source == "sql"):  # an alembic operation: its SQL is read
            found.append((operation.table, REWRITTEN))
        elif operation.kind == m.DYNAMIC_SQL or (
                operation.kind == m.DROP_OTHER and (operation.name or "").lower().startswith(_DROPPED_CONTAINERS)):
            found.append((UNCOUNTABLE, operation.text or operation.describe()))
    return list(dict.fromkeys(found))


def _derivable_value(registry: Any, table: str, column: str) -> tuple[Any, Any, ColumnElement] | None:
    """(the migration, its table, the value) of a set-based data migration that computes *table.column*."""
    for migration in registry or ():
        values = migration.values or {}
        if migration.table.name.lower() == table.lower() and column in values and column in migration.table.c:
            value = values[column]
            return migration, migration.table, value if isinstance(value, ColumnElement) else sa.literal(value)
    return None


def _pending_once_empty(migration: Any, column: str) -> ColumnElement:
    """*migration*'s pending predicate for a row whose *column* is NULL (re-created empty); a NULL
    verdict counts as not pending, as the runner reads it."""
    table = migration.table.name
    empty = sa.literal(None, migration.table.c[column].type)  # typed: PostgreSQL's substr(NULL, ...) is ambiguous

    def emptied(element: Any) -> Any:
        if isinstance(element, sa.ColumnClause) and element.name == column \
                and getattr(element.table, "name", None) == table:
            return empty
        return None

    return sa.func.coalesce(sa.sql.visitors.replacement_traverse(migration.pending, {}, emptied), sa.false())


def count(connection: Connection, registry: Any, table: str, column: str | None, locking: bool = False) -> AtRisk | None:
    """The rows *table* (or its *column*) holds that dropping it loses; None when none (or when it
    does not exist).  ``REWRITTEN``: every row of the table; ``UNCOUNTABLE``: always at risk."""
    if table == UNCOUNTABLE:
        return AtRisk(table, column, -1, "what it destroys cannot be counted (refused unless forced)")
    present = column_names(sa.inspect(connection), table)
    if not present:
        return None
    if column is None or column == REWRITTEN:
        query = sa.select(sa.func.count()).select_from(sa.table(table))
        rows = int(connection.execute(query.with_for_update() if locking else query).scalar_one())
        why = "the table is dropped" if column is None else \
            "a statement deletes or rewrites rows it does not name: every row counted"
        return AtRisk(table, column, rows, why) if rows else None
    name = present.get(column.lower())
    if name is None:
        return None
    derivable = _derivable_value(registry, table, name)
    if derivable is not None and name in derivable[1].c and all(
            c.name.lower() in present for c in derivable[2].base_columns if hasattr(c, "name")):
        migration, source, value = derivable
        # Derivable means derived *again*: the column comes back empty with the next expand, and the
        # migration must then select the row (its pending predicate, the column NULL) and compute it.
        where, why = sa.and_(source.c[name].is_not(None), sa.or_(
            source.c[name].is_distinct_from(value), sa.not_(_pending_once_empty(migration, name)))), \
            "values that differ from what the data migration derives from what stays, or that it would not derive again"
    else:
        source = sa.table(table, sa.column(name))
        where, why = source.c[name].is_not(None), "values no data migration derives from what stays"
    rows = int(connection.execute(sa.select(sa.func.count()).select_from(source).where(where)).scalar_one())
    return AtRisk(table, name, rows, why) if rows else None


# -- under the statement's lock ----------------------------------------------------------
class _LockTablesWrite(DDLElement):
    """MariaDB/MySQL ``LOCK TABLES a WRITE, b WRITE``."""

    inherit_cache = False

    def __init__(self, tables: list[sa.TableClause]):
        self.tables = tables


@compiles(_LockTablesWrite)
def _compile_lock_tables(element: _LockTablesWrite, compiler: Any, **kw: Any) -> str:
    return "LOCK TABLES " + ", ".join(f"{compiler.preparer.format_table(t)} WRITE" for t in element.tables)


def _lock(connection: Connection, tables: list[str]) -> None:
    """Every table of *tables* locked against writers, at once: a statement destroying two tables
    is counted under the locks of both (one lock, and the second table's writer commits after
    the count and before the statement, which waited for it)."""
    from migrations_policy.expand.lock_timeout import _LockTable

    dialect = connection.dialect.name
    if dialect == "postgresql":
        for table in tables:  # locks accumulate in the revision's transaction
            connection.execute(_LockTable(sa.Table(table, sa.MetaData()), "ACCESS EXCLUSIVE"))
    elif dialect in ("mysql", "mariadb"):  # one statement: LOCK TABLES replaces the previous one
        connection.execute(_LockTablesWrite([sa.table(table) for table in tables]))


def _unlock(connection: Connection) -> None:
    if connection.dialect.name in ("mysql", "mariadb"):
        connection.exec_driver_sql("UNLOCK TABLES")


class _Judge:
    def __init__(self, connection: Connection, registry: Any, revision: str, forced: str | None):
        self.connection, self.registry, self.revision, self.forced = connection, registry, revision, forced
        self.busy = False
        self.locked = False
        self.forced_losses: list[AtRisk] = []

    def targets(self, statement: str) -> list[Target]:
        from migrations_policy.gate.drops.drop_guard import _batch_drops
        from migrations_policy.policy.sql import from_sql

        from migrations_policy.gate.drops.fired import fires
        from migrations_policy.gate.drops.routines import runs_routine

        try:
            operations = from_sql(statement, (self.connection.dialect.name,))
        except Exception:  # noqa: BLE001 - what the knowledge base cannot read, no count can name
            return [(UNCOUNTABLE, statement)]
        tables = [o for o in operations if o.kind == m.DROP_TABLE]
        found = destroying(o for o in operations if o.kind != m.DROP_TABLE)
        if tables and self.connection.dialect.name == "sqlite":
            found += _batch_drops(self.connection, tables)  # batch mode: the columns the new shape lacks
        elif tables:
            found += destroying(tables)
        if runs_routine(self.connection, statement):  # code the text does not show (``routines``)
            found.append((UNCOUNTABLE, statement))
        fired = fires(self.connection, statement)  # triggers, rules, event triggers of the application
        if fired:
            shown = " ".join(statement.split())
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            found.append((UNCOUNTABLE, f"{shown} fires {', '.join(c.describe() for c in fired[:3])}"
                                       f"{f' and {len(fired) - 3} more' if len(fired) > 3 else ''} "
                                       "(code of the application, which may write any table)"))
        return list(dict.fromkeys(found))

    def before(self, statement: str) -> None:
        if self.busy:
            return
        self.busy = True
        try:
            targets = self.targets(statement)
            if not targets:
                return
            inspector = sa.inspect(self.connection)
            present = [t for t in dict.fromkeys(t for t, _ in targets) if t != UNCOUNTABLE and column_names(inspector, t)]
            mysql = self.connection.dialect.name in ("mysql", "mariadb")
            # MariaDB: DML (DELETE/UPDATE ...) may read tables LOCK TABLES would not name (error 1100);
            # it is transactional, so its count is a locking read in its own transaction instead
            # (InnoDB's next-key locks keep writers out until the statement's transaction ends).
            rows_only = mysql and all(c == REWRITTEN for t, c in targets if t != UNCOUNTABLE)
            if present and not rows_only:
                _lock(self.connection, present)
                self.locked = mysql
            found = [r for r in (count(self.connection, self.registry, t, c, locking=rows_only)
                                 for t, c in targets) if r]
            if found and self.forced is None:
                self.release()
                raise RowsAtRisk(self.revision, found)
            self.forced_losses.extend(found)
        except BaseException:
            self.release()
            raise
        finally:
            self.busy = False

    def release(self) -> None:
        if self.locked:
            self.locked = False
            busy, self.busy = self.busy, True
            try:
                _unlock(self.connection)
            finally:
                self.busy = busy


class DriverDropRefused(CommandError):
    """SQLite: a downgrade statement sent to the DB-API driver directly drops a table or column, or
    deletes or updates rows; the database reports it while preparing the statement, when nothing can
    be counted: refused."""

    exit_code = EXIT_REFUSED

    def __init__(self, revision: str, gone: list[Target]):
        from migrations_policy.gate.drops.raw_paths import FIRED

        what = ", ".join(f"rows of {t}" if c == REWRITTEN else f"the rows trigger {t} (of the application) writes"
                         if c == FIRED else f"{t}.{c}" if c else f"table {t}" for t, c in gone)
        super().__init__(f"downgrade refused: revision {revision} drops {what} through the database driver "
                         "directly, where the rows it would lose cannot be counted; drop it with an alembic "
                         "operation or op.execute (judged), or rerun with --force --reason '...' (dbsync "
                         "rollback) or -x migrations_policy_force=REASON (alembic downgrade)")


class ScriptCommitRefused(DriverDropRefused):
    """SQLite: a revision ended its transaction through the driver (sqlite3's ``executescript``
    COMMITs it before the script runs; a script's own COMMIT or ROLLBACK): refused, forced or not,
    so the revision is applied (or reverted) whole or not at all.  *upgrade*: an ``upgrade()``'s
    (``gate.runtime``), else a ``downgrade()``'s."""

    def __init__(self, revision: str, verbs: list[str], upgrade: bool = False):  # noqa: D107
        verb, done = ("upgrade", "applied") if upgrade else ("downgrade", "reverted")
        CommandError.__init__(self, (
            f"{verb} refused: revision {revision} ends its transaction part-way through the database "
            f"driver ({' and '.join(verbs)}: sqlite3's executescript commits the open transaction before "
            f"its script), where a later failure would leave the revision partly {done} with no journal "
            f"to resume from; nothing was {done}. Send each statement with op.execute (--force does not "
            "change this)"))


class _DriverWatch:
    """``raw_paths.Watch`` for a downgrade: a statement sent to the driver directly (a DB-API cursor,
    psycopg's ``execute``, PyMySQL's ``query``) is judged by the same :class:`_Judge`, under the same
    lock, before the driver sends it; SQLAlchemy's own statements were judged already (``passing``).
    SQLite reports drops from inside the statement's preparation, where no query may run: there a
    drop of a table or column is refused unless the run is forced (fail closed)."""

    #: SQLite: also told of DELETE/UPDATE statements (``raw_paths.ROWS``), refused like drops
    watches_rows = True
    #: SQLite: a COMMIT/ROLLBACK SQLAlchemy did not send is refused (``raw_paths``), forced or not
    keeps_transaction = True

    def __init__(self, judge: _Judge):
        self.judge = judge
        self.connection = judge.connection
        self.sqlalchemy_depth = 0
        self.refused: list[Target] = []
        self.transaction_ends: list[str] = []

    def passing(self) -> bool:
        return self.judge.busy or self.sqlalchemy_depth > 0

    def judge_statement(self, statement: str) -> None:
        self.judge.before(statement)

    def after_statement(self) -> None:
        if not self.judge.busy:
            self.judge.release()

    def judge_gone(self, gone: list[Target]) -> bool:
        if self.judge.forced is not None:
            return False
        gone = [(t, c) for t, c in gone if c != REWRITTEN or _application_table(t)]
        self.refused.extend(gone)
        return bool(gone)

    def refuse_transaction_end(self, verb: str) -> None:
        self.transaction_ends.append(verb)

    def refusal(self) -> DriverDropRefused | None:
        if self.transaction_ends:  # first: the rows a script would then delete were never reached
            return ScriptCommitRefused(self.judge.revision, list(dict.fromkeys(self.transaction_ends)))
        return DriverDropRefused(self.judge.revision, list(dict.fromkeys(self.refused))) if self.refused else None


@contextlib.contextmanager
def judging(connection: Connection, registry: Any, revision: str, forced: str | None) -> Iterator[_Judge]:
    """While the block runs *revision*'s ``downgrade()``: each statement that destroys rows is judged
    by :func:`count` under its table's lock, as it is about to run (see the module doc), whether
    SQLAlchemy sends it or the script hands it to the DB-API driver (``raw_paths``).  A driver drop
    SQLite refused raises :class:`DriverDropRefused` when the block ends, even if the script
    swallowed the driver's error."""
    from migrations_policy.gate.drops import raw_paths

    judge = _Judge(connection, registry, revision, forced)
    watch = _DriverWatch(judge)

    def before_cursor_execute(conn, cursor, statement, parameters, context, executemany):
        if isinstance(statement, str):
            judge.before(statement)

    def after_cursor_execute(conn, cursor, statement, parameters, context, executemany):
        if not judge.busy:
            judge.release()

    def handle_error(context):
        if not judge.busy:
            judge.release()

    event.listen(connection, "before_cursor_execute", before_cursor_execute)
    event.listen(connection, "after_cursor_execute", after_cursor_execute)
    event.listen(connection.engine, "handle_error", handle_error)
    try:
        try:
            with raw_paths.installed(connection, watch):
                yield judge
        except Exception as exc:
            refusal = watch.refusal()
            if refusal is not None and not isinstance(exc, (RowsAtRisk, DriverDropRefused)):
                raise refusal from None
            raise
        refusal = watch.refusal()
        if refusal is not None:
            raise refusal
    finally:
        event.remove(connection, "before_cursor_execute", before_cursor_execute)
        event.remove(connection, "after_cursor_execute", after_cursor_execute)
        event.remove(connection.engine, "handle_error", handle_error)
        judge.release()
