"""Sync triggers: an old and a new column kept in step while two releases run.

During the rolling window release N writes only the old column and release N+1
reads (and may write only) the new one.  Expand installs, next to the new column::

    import migrations_policy.sync_triggers  # registers the operations

    op.create_sync_trigger("nodes", old="name", new="display_name")

and the contract that drops the old column removes them first::

    op.drop_sync_trigger("nodes", old="name", new="display_name")

``up`` computes the new column from the old one and ``down`` the old from the
new (Core expressions over ``sa.column(name)`` of the table; default: the other
column as it is).  What the triggers do, row by row:

* INSERT: a NULL new column with a non-NULL old one gets ``up``; a non-NULL new
  column gives the old one ``down`` (release N+1 writes only the new column; the old
  one may hold just its server default, which must not win over what N+1 wrote, nor
  be copied over it later by the data migration).  That holds where the new column
  has no server default (the split never gives the new side of a pair one); where it
  has (a pair written by hand; read from the catalog when the triggers are created),
  a non-NULL new value may be that default, and only a NULL old column gets ``down``.
  Where both have one, no rule can tell a write from a default: ``create_sync_trigger``
  refuses (``SyncPairRefused``).  The script may record which rule it means,
  ``new_has_default=False`` (the split always does: its new columns have none) or ``True``;
  online, a catalog that disagrees is refused (``SyncPairRefused``, nothing installed);
  offline (``--sql``) there is no catalog to read, so the recorded rule is required (an
  unrecorded one is refused) and the SQL first checks it against the catalog of the
  database it runs on (``guard_statements``): run there, it fails before installing a
  trigger the online run would not have installed;
* UPDATE: only the side the writer changed is copied: the old column changed
  and the new did not -> new := ``up``; the reverse -> old := ``down``; a
  statement that sets both (release N+1 writing both) is left alone.  So the
  triggers never copy back what they just copied (no ping-pong).

PostgreSQL and MariaDB/MySQL: ``BEFORE`` row triggers assigning ``NEW`` (MySQL
forbids a trigger from updating its own table).  SQLite cannot assign ``NEW``:
``AFTER`` triggers update the row by ``rowid`` (so not for ``WITHOUT ROWID``
tables), and each acts only while the pair is out of step (new IS DISTINCT FROM
``up``(old)), so the update one trigger makes does not bounce back through the
other even when ``up`` is lossy.  Changes are compared exactly: byte for byte
on MariaDB (``CAST AS BINARY``), ``COLLATE BINARY`` on SQLite and as text in the
``"C"`` collation on PostgreSQL, so a change of case is a change whatever the columns'
collation.

Names are deterministic (``sync_trigger_name``) and fit PostgreSQL's 63 and
MariaDB's 64 characters; every identifier is quoted by the dialect.  Each
trigger carries a marker naming its table and columns, so ``sync_triggers``
finds them in the catalog and ``stale_sync_triggers`` the ones whose columns a
contract dropped (writes to that table then fail on every dialect).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic.operations import MigrateOperation, Operations
from alembic.util import CommandError
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement

from migrations_policy.core.offline_run import READING
from migrations_policy.data.declare import differs

PREFIX = "mp_sync_"
MARKER = "migrations_policy sync "
#: The longest suffix a dialect appends to the base name (SQLite's "_au_down").
_SUFFIX = 8
_READABLE = 63 - _SUFFIX - len(PREFIX) - 9  # 9: "_" + 8 hex digits


def sync_trigger_name(table: str, old: str, new: str) -> str:
    """``mp_sync_<table>_<old>_<new>`` cut to fit, plus a hash of the three names (always:
    two pairs whose readable parts collide or are cut the same still differ)."""
    readable = re.sub(r"[^a-z0-9_]+", "_", f"{table}_{old}_{new}".lower())[:_READABLE]
    digest = hashlib.sha256(json.dumps([table, old, new]).encode()).hexdigest()[:8]
    return f"{PREFIX}{readable}_{digest}"


class _Row(ColumnElement):
    """``NEW.col`` / ``OLD.col`` inside a trigger body (SQLite: lower case)."""

    inherit_cache = False

    def __init__(self, which: str, name: str, type_: Any = None):
        self.which, self.name = which, name
        self.type = sa.types.to_instance(type_)


@compiles(_Row)
def _row(element: _Row, compiler: Any, **kw: Any) -> str:
    which = element.which.lower() if compiler.dialect.name == "sqlite" else element.which
    return f"{which}.{compiler.preparer.quote(element.name)}"


@dataclass(frozen=True)
class SyncPair:
    """An old and a new column of *table*, and how each is computed from the other."""

    table: str
    old: str
    new: str
    up: Any = None
    down: Any = None
    #: the new column has a server default (read from the catalog when the triggers are created):
    #: a non-NULL new value on INSERT may then be that default, not release N+1's write
    new_has_default: bool = False

    @property
    def name(self) -> str:
        return sync_trigger_name(self.table, self.old, self.new)

    def marker(self) -> str:
        described = json.dumps({"table": self.table, "old": self.old, "new": self.new})
        return MARKER + described.replace("*/", "*\\/").replace("%", "\\u0025")  # JSON still; no "*/", no "%"

    # -- expressions over the trigger row -------------------------------------------
    def _on_row(self, expression: Any, default: str, which: str) -> ColumnElement:
        if expression is None:
            return _Row(which, default)

        def replace(element: Any) -> Any:
            if isinstance(element, sa.ColumnClause) and not isinstance(element, _Row) and not element.is_literal:
                return _Row(which, element.name, element.type)
            return None

        return sa.sql.visitors.replacement_traverse(expression, {}, replace)

    def up_on(self, which: str = "NEW") -> ColumnElement:
        return self._on_row(self.up, self.old, which)

    def down_on(self, which: str = "NEW") -> ColumnElement:
        return self._on_row(self.down, self.new, which)

    def changed(self, column: str) -> ColumnElement:
        """The writer changed *column* (exact comparison: typed as text for byte/binary collation)."""
        return differs(_Row("NEW", column, sa.String()), _Row("OLD", column, sa.String()))


def _sql(expression: ColumnElement, dialect: Dialect) -> str:
    return str(expression.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def _ddl(text: str, dialect: Dialect) -> sa.DDL:
    """*text* as ``DDL``, which %-formats its text.  Where the dialect's driver formats
    with ``%`` too, identifiers and literals already come escaped (``%%``) from the
    dialect's quoting, and DDL's formatting and the compiler's escaping cancel out."""
    if "%%" not in dialect.identifier_preparer.quote("%"):
        text = text.replace("%", "%%")
    return sa.DDL(text)


def create_statements(pair: SyncPair, dialect: Dialect) -> list[sa.DDL]:
    """The DDL that installs *pair*'s triggers on *dialect*."""
    build = {"postgresql": _postgresql, "mysql": _mysql, "mariadb": _mysql, "sqlite": _sqlite}.get(dialect.name)
    if build is None:
        raise NotImplementedError(f"sync triggers are not implemented for {dialect.name}")
    return [_ddl(text, dialect) for text in build(pair, dialect)]


def drop_statements(pair: SyncPair, dialect: Dialect) -> list[sa.DDL]:
    q = dialect.identifier_preparer.quote
    base, table = pair.name, q(pair.table)
    if dialect.name == "postgresql":
        texts = [f"DROP TRIGGER IF EXISTS {q(base)} ON {table}", f"DROP FUNCTION IF EXISTS {q(base)}()"]
    elif dialect.name in ("mysql", "mariadb"):
        texts = [f"DROP TRIGGER IF EXISTS {q(base + suffix)}" for suffix in ("_bi", "_bu")]
    else:
        texts = [f"DROP TRIGGER IF EXISTS {q(base + suffix)}" for suffix in ("_ai_up", "_ai_down", "_au_up", "_au_down")]
    return [_ddl(text, dialect) for text in texts]


def _has_default(table: str, column: str, dialect: Dialect) -> ColumnElement:
    """How many columns *table*.*column* with a server default the catalog lists (0 or 1)."""
    if dialect.name == "sqlite":
        info = sa.func.pragma_table_info(table).table_valued("name", "dflt_value")
        return (sa.select(sa.func.count()).select_from(info)
                .where(info.c.name == column, info.c.dflt_value.is_not(None)).scalar_subquery())
    columns = sa.table("columns", sa.column("table_schema"), sa.column("table_name"), sa.column("column_name"),
                       sa.column("column_default"), schema="information_schema")
    where = [columns.c.table_name == table, columns.c.column_name == column, columns.c.column_default.is_not(None)]
    if dialect.name == "postgresql":
        where.append(columns.c.table_schema == sa.func.current_schema())
    else:  # MariaDB lists a nullable column without a default as the text NULL
        where += [columns.c.table_schema == sa.func.database(), columns.c.column_default != "NULL"]
    return sa.select(sa.func.count()).select_from(columns).where(*where).scalar_subquery()


def guard_statements(pair: SyncPair, dialect: Dialect) -> list[sa.DDL]:
    """Offline (``--sql``): statements that fail, with a message naming the pair, unless the
    catalog of the database the SQL runs on has the defaults the recorded rule assumes
    (``pair.new_has_default``; with True, the old column must have none: online refuses that)."""
    holds = sa.and_(_has_default(pair.table, pair.new, dialect) == 1,
                    _has_default(pair.table, pair.old, dialect) == 0) if pair.new_has_default \
        else _has_default(pair.table, pair.new, dialect) == 0
    message = (f"create_sync_trigger {pair.table}.{pair.old} -> {pair.new} was written offline for "
               f"{pair.new} {'with' if pair.new_has_default else 'without'} a server default"
               f"{f' and {pair.old} without one' if pair.new_has_default else ''}; this database differs")
    ok, text = _sql(holds, dialect), _sql(sa.literal(message), dialect)
    q = dialect.identifier_preparer.quote
    if dialect.name == "postgresql":
        texts = [f"DO $mp_guard$ BEGIN IF NOT ({ok}) THEN RAISE EXCEPTION USING MESSAGE = {text}; END IF; END $mp_guard$"]
    elif dialect.name in ("mysql", "mariadb"):
        texts = [f"BEGIN NOT ATOMIC IF NOT ({ok}) THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {text}; "
                 "END IF; END"]
    else:  # SQLite raises only from a constraint: a check named by the message
        guard = q("mp_sync_guard")
        texts = [f"CREATE TEMP TABLE {guard} (ok INTEGER CONSTRAINT {q(message)} CHECK (ok))",
                 f"INSERT INTO {guard} (ok) SELECT {ok}", f"DROP TABLE {guard}"]
    return [_ddl(t, dialect) for t in texts]


def _conditions(pair: SyncPair, dialect: Dialect) -> dict[str, str]:
    new_old, new_new = _Row("NEW", pair.old), _Row("NEW", pair.new)
    return {
        "insert_up": _sql(sa.and_(new_new.is_(None), new_old.is_not(None)), dialect),
        # A non-NULL new column on INSERT is release N+1's write (release N never writes it, and
        # it has no server default while the pair is synced): it wins over the old column,
        # which may hold only its server default (release N+1 does not write it).
        # Where the new column has a server default of its own (a pair written by hand), a non-NULL
        # new value may be that default: only a NULL old one is filled then.
        "insert_down": _sql(sa.and_(new_old.is_(None), new_new.is_not(None)) if pair.new_has_default
                            else new_new.is_not(None), dialect),
        "update_up": _sql(sa.and_(pair.changed(pair.old), sa.not_(pair.changed(pair.new))), dialect),
        "update_down": _sql(sa.and_(pair.changed(pair.new), sa.not_(pair.changed(pair.old))), dialect),
        "up": _sql(pair.up_on(), dialect),
        "down": _sql(pair.down_on(), dialect),
    }


def _postgresql(pair: SyncPair, dialect: Dialect) -> list[str]:
    q = dialect.identifier_preparer.quote
    c = _conditions(pair, dialect)
    function = q(pair.name)
    body = (f"BEGIN\n  -- {pair.marker()}\n"
            f"  IF TG_OP = 'INSERT' THEN\n"
            f"    IF {c['insert_up']} THEN NEW.{q(pair.new)} := {c['up']};\n"
            f"    ELSIF {c['insert_down']} THEN NEW.{q(pair.old)} := {c['down']};\n"
            f"    END IF;\n"
            f"  ELSIF {c['update_up']} THEN NEW.{q(pair.new)} := {c['up']};\n"
            f"  ELSIF {c['update_down']} THEN NEW.{q(pair.old)} := {c['down']};\n"
            f"  END IF;\n  RETURN NEW;\nEND")
    return [
        f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $mp_sync$\n{body}\n$mp_sync$",
        f"CREATE TRIGGER {q(pair.name)} BEFORE INSERT OR UPDATE OF {q(pair.old)}, {q(pair.new)} ON {q(pair.table)} "
        f"FOR EACH ROW EXECUTE FUNCTION {function}()",
    ]


def _mysql(pair: SyncPair, dialect: Dialect) -> list[str]:
    q = dialect.identifier_preparer.quote
    c = _conditions(pair, dialect)
    marker = f"/* {pair.marker()} */"
    # DDL is not transactional there: dropping first makes a rerun after a half-done expand work
    return [
        f"DROP TRIGGER IF EXISTS {q(pair.name + '_bi')}",
        f"CREATE TRIGGER {q(pair.name + '_bi')} BEFORE INSERT ON {q(pair.table)} FOR EACH ROW\nBEGIN {marker}\n"
        f"  IF {c['insert_up']} THEN SET NEW.{q(pair.new)} = {c['up']};\n"
        f"  ELSEIF {c['insert_down']} THEN SET NEW.{q(pair.old)} = {c['down']};\n"
        f"  END IF;\nEND",
        f"DROP TRIGGER IF EXISTS {q(pair.name + '_bu')}",
        f"CREATE TRIGGER {q(pair.name + '_bu')} BEFORE UPDATE ON {q(pair.table)} FOR EACH ROW\nBEGIN {marker}\n"
        f"  IF {c['update_up']} THEN SET NEW.{q(pair.new)} = {c['up']};\n"
        f"  ELSEIF {c['update_down']} THEN SET NEW.{q(pair.old)} = {c['down']};\n"
        f"  END IF;\nEND",
    ]


def _sqlite(pair: SyncPair, dialect: Dialect) -> list[str]:
    q = dialect.identifier_preparer.quote
    c = _conditions(pair, dialect)
    table, old, new = q(pair.table), q(pair.old), q(pair.new)
    out_of_step = _sql(differs(_Row("NEW", pair.new, sa.String()), pair.up_on()), dialect)
    marker = f"/* {pair.marker()} */"

    def trigger(suffix: str, event: str, when: str, column: str, value: str) -> str:
        return (f"CREATE TRIGGER {q(pair.name + suffix)} AFTER {event} ON {table} FOR EACH ROW WHEN {when}\n"
                f"BEGIN {marker}\n  UPDATE {table} SET {column} = {value} WHERE rowid = new.rowid;\nEND")

    return [
        trigger("_ai_up", "INSERT", c["insert_up"], new, c["up"]),
        trigger("_ai_down", "INSERT", c["insert_down"], old, c["down"]),
        trigger("_au_up", f"UPDATE OF {old}", f"{c['update_up']} AND {out_of_step}", new, c["up"]),
        trigger("_au_down", f"UPDATE OF {new}", f"{c['update_down']} AND {out_of_step}", old, c["down"]),
    ]


# -- finding them in the catalog ------------------------------------------------------
class FoundSyncTrigger(NamedTuple):
    table: str
    old: str
    new: str
    trigger: str


_CATALOG = {
    "postgresql": "SELECT t.tgname, p.prosrc FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
                  "WHERE NOT t.tgisinternal AND t.tgname LIKE :prefix",
    "mysql": "SELECT trigger_name, action_statement FROM information_schema.triggers "
             "WHERE trigger_schema = DATABASE() AND trigger_name LIKE :prefix",
    "sqlite": "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE :prefix",
}
_MARKER_JSON = re.compile(re.escape(MARKER) + r"(\{.*?\})")


def sync_triggers(connection: Connection) -> list[FoundSyncTrigger]:
    """The sync triggers installed in the database (one entry per trigger)."""
    query = _CATALOG.get("mysql" if connection.dialect.name == "mariadb" else connection.dialect.name)
    if query is None:
        return []
    found = []
    for name, body in connection.execute(sa.text(query), {"prefix": PREFIX + "%"}):  # "_" matches any: re-checked
        match = _MARKER_JSON.search(body or "")
        if name.startswith(PREFIX) and match:
            described = json.loads(match.group(1).replace("*\\/", "*/"))
            found.append(FoundSyncTrigger(described["table"], described["old"], described["new"], name))
    return found



def trigger_definitions(connection: Connection, found: list[FoundSyncTrigger]) -> dict[str, list[str]]:
    """{trigger: the statements that re-create it exactly}, as the catalog keeps them: SQLite's
    ``CREATE TRIGGER`` text in ``sqlite_master``; PostgreSQL's ``pg_get_functiondef`` and
    ``pg_get_triggerdef``; MariaDB's ``SHOW CREATE TRIGGER``.  A trigger the catalog no longer
    has is left out."""
    names = sorted({t.trigger for t in found})
    dialect = connection.dialect.name
    if not names:
        return {}
    if dialect == "sqlite":
        master = sa.table("sqlite_master", sa.column("type"), sa.column("name"), sa.column("sql"))
        rows = connection.execute(sa.select(master.c.name, master.c.sql)
                                  .where(master.c.type == "trigger", master.c.name.in_(names)))
        return {name: [text] for name, text in rows}
    if dialect == "postgresql":
        query = sa.text("SELECT t.tgname, pg_get_functiondef(t.tgfoid), pg_get_triggerdef(t.oid) FROM pg_trigger t "
                        "WHERE NOT t.tgisinternal AND t.tgname IN :names").bindparams(
            sa.bindparam("names", expanding=True))
        return {name: [function, trigger] for name, function, trigger in connection.execute(query, {"names": names})}
    if dialect in ("mysql", "mariadb"):
        out = {}
        for name in names:
            quoted = connection.dialect.identifier_preparer.quote(name)
            row = connection.exec_driver_sql(f"SHOW CREATE TRIGGER {quoted}",
                                             execution_options={"no_parameters": True}).first()
            if row is not None:
                out[name] = [row[2]]
        return out
    return {}

def stale_sync_triggers(connection: Connection, live: list[FoundSyncTrigger] | None = None
                        ) -> list[FoundSyncTrigger]:
    """Sync triggers (of *live*, default: all installed) whose table or columns are gone: every
    write to that table now fails.  For ``dbsync check`` / ``status`` (``gate.sync_trigger_checks.sync_triggers_left_behind``)."""
    inspector = sa.inspect(connection)
    stale = []
    for found in sync_triggers(connection) if live is None else live:
        columns = {c["name"] for c in inspector.get_columns(found.table)} if inspector.has_table(found.table) else set()
        if not {found.old, found.new} <= columns:
            stale.append(found)
    return stale


# -- the alembic operations ------------------------------------------------------------
@Operations.register_operation("create_sync_trigger")
class CreateSyncTriggerOp(MigrateOperation):
    """Expand: keep *new* in step with old code's writes to *old*, and *old* with new code's."""

    def __init__(self, table_name: str, old: str, new: str, up: Any = None, down: Any = None,
                 new_has_default: bool | None = None):
        if not all(isinstance(n, str) and n for n in (table_name, old, new)) or old == new:
            raise ValueError("create_sync_trigger(table, old=..., new=...) needs a table and two different columns")
        if new_has_default not in (None, True, False):
            raise ValueError("create_sync_trigger(..., new_has_default=...) is True, False or not given")
        self.pair = SyncPair(table_name, old, new, up, down)
        #: the INSERT rule the script records (None: read from the catalog, online only)
        self.new_has_default = new_has_default

    @classmethod
    def create_sync_trigger(cls, operations: Operations, table_name: str, *, old: str, new: str,
                            up: Any = None, down: Any = None, new_has_default: bool | None = None) -> None:
        """``op.create_sync_trigger("nodes", old="name", new="display_name", up=..., down=...,
        new_has_default=False)``"""
        return operations.invoke(cls(table_name, old, new, up, down, new_has_default))

    def reverse(self) -> "DropSyncTriggerOp":
        return DropSyncTriggerOp(self.pair.table, self.pair.old, self.pair.new, self.new_has_default)


@Operations.register_operation("drop_sync_trigger")
class DropSyncTriggerOp(MigrateOperation):
    """Contract (before the old column is dropped): remove the pair's triggers."""

    def __init__(self, table_name: str, old: str, new: str, new_has_default: bool | None = None,
                 recreate: MigrateOperation | None = None):
        self.pair = SyncPair(table_name, old, new)
        # for reverse() only (a generated downgrade re-creates the triggers as expand made them)
        self.new_has_default, self.recreate = new_has_default, recreate

    @classmethod
    def drop_sync_trigger(cls, operations: Operations, table_name: str, *, old: str, new: str) -> None:
        """``op.drop_sync_trigger("nodes", old="name", new="display_name")``"""
        return operations.invoke(cls(table_name, old, new))

    def reverse(self) -> MigrateOperation:
        if self.recreate is not None:
            return self.recreate
        return CreateSyncTriggerOp(self.pair.table, self.pair.old, self.pair.new,
                                   new_has_default=self.new_has_default)


def _raised_at() -> str:
    """``file:line`` of the statement that raised the refusal being constructed (the generated
    script's ``raise`` line; called from the refusal's ``__init__``)."""
    caller = sys._getframe(2)
    return f"{caller.f_code.co_filename}:{caller.f_lineno}"


class GuessedRename(CommandError):
    """A GUESSED rename nobody confirmed: the generated expand script raises it before anything
    runs (the split writes ``raise ...GuessedRename(table, old, new)`` first in ``upgrade()``).
    Autogenerate cannot tell a rename from a dropped and an added column of one kind; run as a
    rename when it is not, the sync triggers would carry the new release's writes into the old
    column (the previous release's data) and the copy would let contract drop it as moved."""

    def __init__(self, table: str, old: str, new: str):
        super().__init__(
            f"{_raised_at()}: GUESSED rename {table}.{old} -> {new} is not confirmed: if it is a rename, delete this line; "
            "if not, delete it, the pair's sync triggers (here and in the contract script) and its copy data "
            "migration")


class UncheckedConversion(CommandError):
    """A type change whose plain copy the split cannot show to hold every value (``String`` ->
    ``Date``, a narrower ``Numeric``, ``Float`` -> ``Integer``) and for which it knows no guard:
    the generated expand raises it first in ``upgrade()`` until the developer writes ``up=`` (and
    the copy) so that a value that does not convert leaves the new column NULL, then deletes it."""

    def __init__(self, table: str, old: str, new: str):
        super().__init__(
            f"{_raised_at()}: {table}.{old} -> {new}: a plain copy may fail release N's writes or change a value, and the "
            "split knows no guard for these types: give the sync trigger an up= that leaves a value that does not "
            "convert NULL (and the copy data migration the same guard), then delete this line")


class SyncPairRefused(CommandError):
    """The pair's INSERT rule cannot be chosen: both columns have a server default (on INSERT
    neither side's value can be told from its default, so the triggers could copy a default over
    what a release wrote); or the rule the script records is not the catalog's; or, offline
    (``--sql``), the script records none."""

    def __init__(self, pair: SyncPair, why: str | None = None):
        where = f"{pair.table}.{pair.old} -> {pair.new}"
        super().__init__(f"create_sync_trigger {where} refused: " + (why or (
            f"{pair.table}.{pair.old} and {pair.table}.{pair.new} both have a server default, so an INSERT cannot "
            f"tell a write from a default; add {pair.new!r} without one in expand and give it its default in "
            "contract, once the triggers are gone")))


@Operations.implementation_for(CreateSyncTriggerOp)
def _create(operations: Operations, operation: CreateSyncTriggerOp) -> None:
    context, pair, recorded = operations.get_context(), operation.pair, operation.new_has_default
    if context.opts.get(READING):  # read, not run (status, the gate): the statements an online run issues
        pair, guards = replace(pair, new_has_default=bool(recorded)), []
    elif context.as_sql:  # no catalog: the recorded rule, checked where the SQL runs
        if recorded is None:
            raise SyncPairRefused(pair, f"offline (--sql) the catalog cannot be read, and whether {pair.new!r} has a "
                                        "server default decides what an INSERT copies: record it in the script, "
                                        "new_has_default=False (or True)")
        pair = replace(pair, new_has_default=recorded)
        guards = guard_statements(pair, context.dialect)
    else:
        columns = {c["name"].lower(): c for c in sa.inspect(context.connection).get_columns(pair.table)}
        defaults = [(columns.get(name.lower()) or {}).get("default") is not None for name in (pair.old, pair.new)]
        if all(defaults):
            raise SyncPairRefused(pair)
        if recorded is not None and recorded != defaults[1]:
            raise SyncPairRefused(pair, f"the script records new_has_default={recorded}, but {pair.table}.{pair.new} "
                                        f"has {'a' if defaults[1] else 'no'} server default")
        pair, guards = replace(pair, new_has_default=defaults[1]), []
    for statement in guards + create_statements(pair, context.dialect):
        operations.execute(statement)


@Operations.implementation_for(DropSyncTriggerOp)
def _drop(operations: Operations, operation: DropSyncTriggerOp) -> None:
    for statement in drop_statements(operation.pair, operations.get_context().dialect):
        operations.execute(statement)
