"""Code of the application a downgrade statement fires, for the downgrade judge (``at_risk``).

A statement that keeps every row by its text (an ``INSERT``, an ``UPDATE`` of an empty table, a
``DROP INDEX``) can still run code the application defined, which deletes or rewrites rows of any
table: a trigger of a table it writes (row or statement level, ``BEFORE``/``AFTER``/``INSTEAD
OF``, and whatever that code writes in turn), a PostgreSQL rule (``DO ALSO DELETE ...``), a
PostgreSQL event trigger (fired by DDL).  No reading of the statement, nor of the trigger's body,
can say what such code loses, so the judge does not read bodies: it fails closed on the class.
A statement that *may fire* code of the application is judged like dynamic SQL
(``at_risk.UNCOUNTABLE``: refused unless the run is forced), naming the trigger.

*May fire*, asked of the database's catalog in the statement's transaction as it is about to run
(a trigger the downgrade created a statement earlier counts, as does one release N+1 left):

* a statement that writes rows (its leading keyword: ``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``,
  ``REPLACE``, ``WITH``, ``COPY``, ``LOAD``, ``TRUNCATE``, ``EXPLAIN``/``ANALYZE``, which run what
  they explain) fires the triggers and rules of every table or view its text names; one naming a
  view or a PostgreSQL partitioned table reaches tables its text does not name, so it fires every
  trigger and rule of the application (fail closed);
* a statement that runs code no text shows (``CALL``, ``DO``, ``EXECUTE``) fires every one;
* on PostgreSQL any other statement (DDL) fires every enabled event trigger.

Before the catalog is read, the tables the statement names are pinned against a concurrent
``CREATE TRIGGER``: PostgreSQL ``LOCK TABLE ... IN ROW EXCLUSIVE MODE`` (the mode the write takes
anyway; it conflicts with the trigger's creation), MariaDB/MySQL a read of each in the statement's
transaction (its metadata lock); SQLite's revision already holds the database's write lock.

Not the application's, so never counted: the framework's sync triggers that carry their pair's
marker (``window.sync_triggers``; one whose body was replaced is the application's, and
``sync_integrity`` refuses it too) and its completion mark triggers (``mp_done_...``, which only
bump a row of ``migrations_policy_data_dirty``).  Foreign-key actions are not followed: they run
only for rows an ``UPDATE``/``DELETE`` of the parent changes, and that statement already counts
every row of the parent as lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

#: Leading keywords of statements that write rows (or run a statement that does).
_WRITES = frozenset({"insert", "update", "delete", "merge", "replace", "with", "copy", "load", "truncate",
                     "explain", "analyze", "upsert"})
#: Leading keywords of statements that run code their text does not show.
_OPAQUE = frozenset({"call", "do", "execute", "exec"})
#: PostgreSQL: leading keywords of statements that fire no event trigger (not DDL).
_NOT_DDL = frozenset({"select", "values", "table", "set", "reset", "show", "lock", "savepoint", "release",
                      "begin", "start", "commit", "rollback", "end", "abort", "fetch", "move", "close",
                      "listen", "notify", "unlisten"}) | _WRITES - {"explain", "analyze"}
_STRING = re.compile(r"'(?:[^']|'')*'|\$(\w*)\$.*?\$\1\$", re.S)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/|#[^\n]*", re.S)
_IDENTIFIER = re.compile(r'"((?:[^"]|"")+)"|`([^`]+)`|\[([^\]]+)\]|([A-Za-z_][\w$]*)')


@dataclass(frozen=True)
class Code:
    """A trigger, rule or event trigger of the application; *table* None: fired by DDL."""

    kind: str
    name: str
    table: str | None

    def describe(self) -> str:
        return f"{self.kind} {self.name}" + (f" of {self.table}" if self.table else "")


def _leading_keyword(statement: str) -> str:
    match = re.match(r"[\s(]*([A-Za-z]+)", _COMMENT.sub(" ", statement))
    return match.group(1).lower() if match else ""


def named(statement: str) -> set[str]:
    """Every identifier the statement's text names (lower case), outside strings and comments."""
    text = _STRING.sub("''", _COMMENT.sub(" ", statement))
    return {(a.replace('""', '"') or b or c or d).lower() for a, b, c, d in _IDENTIFIER.findall(text)}


def application_code(connection: Connection) -> list[Code]:
    """Every trigger, rule and event trigger of the application the catalog holds now (enabled)."""
    from migrations_policy.data.remaining.completion import TRIGGER_PREFIX
    from migrations_policy.window.sync_triggers import sync_triggers

    dialect = connection.dialect.name
    found: list[Code] = []
    if dialect == "postgresql":
        found += [Code("trigger", n, t) for n, t in connection.execute(sa.text(
            "SELECT t.tgname, c.relname FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' ORDER BY 1"))]
        found += [Code("rule", n, t) for n, t in connection.execute(sa.text(
            "SELECT r.rulename, c.relname FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class "
            "WHERE r.rulename <> '_RETURN' AND r.ev_enabled <> 'D' ORDER BY 1"))]
        found += [Code("event trigger", n, None) for (n,) in connection.execute(sa.text(
            "SELECT evtname FROM pg_catalog.pg_event_trigger WHERE evtenabled <> 'D' ORDER BY 1"))]
    elif dialect in ("mysql", "mariadb"):
        found += [Code("trigger", n, t) for n, t in connection.execute(sa.text(
            "SELECT trigger_name, event_object_table FROM information_schema.triggers "
            "WHERE trigger_schema NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema') ORDER BY 1"))]
    elif dialect == "sqlite":
        for master in ("sqlite_master", "sqlite_temp_master"):
            found += [Code("trigger", n, t) for n, t in connection.execute(sa.text(
                f"SELECT name, tbl_name FROM {master} WHERE type = 'trigger' ORDER BY 1"))]
    if not found:
        return []
    ours = {t.trigger for t in sync_triggers(connection)}
    return [c for c in found if not (c.kind == "trigger" and (c.name in ours or c.name.startswith(TRIGGER_PREFIX)))]


def _relations(connection: Connection) -> dict[str, tuple[str, str]]:
    """{relation name (lower case): (its name, its kind)} of the tables and views a statement can
    name; kind ``table``, ``view`` or ``partitioned``."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        rows = connection.execute(sa.text(
            "SELECT c.relname, c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"))
        kinds = {"v": "view", "m": "view", "p": "partitioned"}
        return {name.lower(): (name, kinds.get(kind, "table")) for name, kind in rows}
    if dialect in ("mysql", "mariadb"):
        rows = connection.execute(sa.text(
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema')"))
        return {name.lower(): (name, "view" if kind == "VIEW" else "table") for name, kind in rows}
    rows = connection.execute(sa.text("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                                      "UNION ALL SELECT name, type FROM sqlite_temp_master WHERE type IN ('table', 'view')"))
    return {name.lower(): (name, kind) for name, kind in rows}


def _pin(connection: Connection, tables: list[str]) -> None:
    """Keep a ``CREATE TRIGGER`` on *tables* out until the statement's transaction ends.  Not in
    an ``autocommit_block()`` (PostgreSQL refuses ``LOCK TABLE`` outside a transaction; each
    statement is its own transaction there, so a pin could not outlive the read anyway), and not
    the framework's own tables (the journal's writes)."""
    from migrations_policy.core.framework_tables import is_framework_table

    dialect = connection.dialect.name
    tables = [t for t in tables if not is_framework_table(t) and t.lower() != "alembic_version"]
    if dialect == "postgresql" and getattr(connection.connection.driver_connection, "autocommit", False):
        return
    if dialect == "postgresql":
        from migrations_policy.expand.lock_timeout import _LockTable

        for table in tables:
            connection.execute(_LockTable(sa.Table(table, sa.MetaData()), "ROW EXCLUSIVE"))
    elif dialect in ("mysql", "mariadb"):
        for table in tables:
            connection.execute(sa.select(sa.literal(1)).select_from(sa.table(table)).where(sa.false()))


def fires(connection: Connection, statement: str) -> list[Code]:
    """The application's triggers, rules and event triggers *statement* may fire (see the module doc)."""
    keyword = _leading_keyword(statement)
    dialect = connection.dialect.name
    writes, opaque = keyword in _WRITES, keyword in _OPAQUE
    ddl = dialect == "postgresql" and keyword not in _NOT_DDL
    if not (writes or opaque or ddl):
        return []
    if writes:
        relations = _relations(connection)
        names = [n for n in sorted(named(statement)) if n in relations]
        if names:
            _pin(connection, [relations[n][0] for n in names if relations[n][1] != "view" or dialect == "postgresql"])
    code = application_code(connection)
    if not code:
        return []
    hit: list[Code] = []
    if opaque:
        hit = [c for c in code]
    elif writes:
        hidden = any(relations[n][1] in ("view", "partitioned") for n in names)
        hit = [c for c in code if c.table is not None and (hidden or c.table.lower() in names)]
    if ddl or (writes and keyword in ("explain", "analyze")):
        hit += [c for c in code if c.kind == "event trigger"]
    return list(dict.fromkeys(hit))
