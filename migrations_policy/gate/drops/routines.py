"""Statements that run code their text does not show, for the downgrade judge (``at_risk``).

A stored routine — a function called from a query (``SELECT purge()``, ``SET @x = purge()``), a
procedure run by ``CALL`` — may delete or rewrite any row of any table, and no reading of the
calling statement can say which.  So the judge fails closed on them: a statement that runs one of
the application's routines is judged like dynamic SQL (``at_risk.UNCOUNTABLE``: refused unless the
run is forced).  Whether a name is one of the application's routines is asked of the database's own
catalog, in the statement's transaction, as the statement is about to run: a routine created
earlier in the same downgrade, or left in the database by the release being reverted, counts alike.

A DDL statement runs what it evaluates over the existing rows (``ALTER TABLE ... ADD COLUMN c
DEFAULT purge()`` with a volatile function fills every row by calling it; ``USING f(c)``; a
functional index; a ``CHECK``; ``CREATE TABLE ... AS SELECT f()``): ``ALTER`` and ``CREATE`` are
asked too, except those that only define or rename code (``CREATE FUNCTION/TRIGGER/VIEW/...``,
``ALTER FUNCTION/TRIGGER/...``).

What keeps every row: the database's built-in functions (PostgreSQL's ``pg_catalog`` and
``information_schema``; MariaDB's native functions, which ``information_schema.ROUTINES`` does not
list, and its ``sys``/``mysql`` schemas); definitions (``CREATE FUNCTION/PROCEDURE/TRIGGER`` run
nothing, and are not asked about).  SQLite has no stored routines.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

#: Leading keywords of statements that can call a routine (a ``CREATE`` defines one, runs none).
_RUNS = frozenset({"select", "with", "values", "insert", "update", "delete", "merge", "replace", "set", "do",
                   "table", "call", "execute", "exec"})
#: DDL that evaluates expressions over existing rows (a volatile ``DEFAULT f()`` filling every row, a
#: ``USING f(c)`` type change, a functional index, a ``CHECK``, ``CREATE TABLE ... AS SELECT f()``).
_DDL = frozenset({"alter", "create"})
#: ... except where it only defines code or names one (run later, when called or fired).
_DEFINES = re.compile(r"\s*(?:create\s+(?:or\s+replace\s+)?(?:definer\s*=\s*\S+\s+)?(?:constraint\s+|temp\w*\s+)*"
                      r"(?:function|procedure|trigger|view|rule|event|aggregate|type|domain|cast|operator|language|"
                      r"policy|schema|extension|sequence|role|user|publication|subscription|server|collation)"
                      r"|alter\s+(?:function|procedure|routine|trigger|event|aggregate|operator))\b", re.I)
_STRING = re.compile(r"'(?:[^']|'')*'|\$(\w*)\$.*?\$\1\$", re.S)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_CALLED = re.compile(r'(?:"((?:[^"]|"")+)"|`([^`]+)`|([A-Za-z_][\w$]*))\s*\(')


def _called_names(statement: str) -> list[str]:
    text = _STRING.sub("''", _COMMENT.sub(" ", statement))
    names = []
    for quoted, backquoted, plain in _CALLED.findall(text):
        names.append(quoted.replace('""', '"') if quoted else backquoted or plain.lower())
    return list(dict.fromkeys(names))


def _leading_keyword(statement: str) -> str:
    match = re.match(r"[\s(]*([A-Za-z]+)", _COMMENT.sub(" ", statement))
    return match.group(1).lower() if match else ""


def runs_routine(connection: Connection, statement: str) -> bool:
    """*statement* runs a stored routine of the application (always: ``CALL``)."""
    keyword = _leading_keyword(statement)
    if keyword not in _RUNS and keyword not in _DDL:
        return False
    if keyword in _DDL and _DEFINES.match(_COMMENT.sub(" ", statement)):
        return False
    if keyword == "call":
        return True
    names = _called_names(statement)
    if not names:
        return False
    dialect = connection.dialect.name
    if dialect == "postgresql":
        proc = sa.table("pg_proc", sa.column("proname"), sa.column("pronamespace"), schema="pg_catalog")
        space = sa.table("pg_namespace", sa.column("oid"), sa.column("nspname"), schema="pg_catalog")
        query = (sa.select(proc.c.proname).select_from(proc.join(space, space.c.oid == proc.c.pronamespace))
                 .where(sa.cast(proc.c.proname, sa.Text).in_(names),
                        space.c.nspname.not_in(["pg_catalog", "information_schema"]),
                        sa.not_(space.c.nspname.startswith("pg_")))
                 .limit(1))
    elif dialect in ("mysql", "mariadb"):
        routines = sa.table("ROUTINES", sa.column("ROUTINE_NAME"), sa.column("ROUTINE_SCHEMA"),
                            schema="information_schema")
        query = (sa.select(routines.c.ROUTINE_NAME)
                 .where(routines.c.ROUTINE_NAME.in_(names), routines.c.ROUTINE_SCHEMA.not_in(["sys", "mysql"]))
                 .limit(1))
    else:
        return False
    return connection.execute(query).first() is not None
