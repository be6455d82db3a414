"""Whether a statement the journal left ``running`` had been applied: the database's state decides.

A run that dies inside a statement leaves its journal row ``running``; on MariaDB/MySQL
(and a PostgreSQL ``autocommit_block``) the server may still finish the statement after
the client is gone.  The rerun asks :func:`applied` first: it reflects what the
statement creates, drops or renames (a column, table, index, constraint, trigger,
procedure or function) and says True (it is there / gone: applied), False (it is
not: run it) or None (the statement is not one it can judge: DML, ``ALTER COLUMN``
...).  Only on None does the server's error code decide (``journal._applied_already``:
"already exists" / "does not exist").  A rename counts as applied only when its target
exists and its source is gone; a foreign key only when the table has a constraint of
that name (MariaDB answers errno 1005/121 "Duplicate key on write or update" for it,
which names nothing).
"""

from __future__ import annotations

from typing import Callable, Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.core.reflect import column_names
from migrations_policy.policy import model as m
from migrations_policy.policy.sql import classify_statement, statements
from migrations_policy.policy.sql_lexer import QUOTED, WORD, Tok


def applied(connection: Connection, text: str) -> bool | None:
    """True when everything *text* does is in the database already, False when some of it is
    not, None when it cannot be told from the catalog."""
    verdicts: list[bool | None] = []
    parts = statements(text)
    try:
        if parts and _routine_target(parts[0]):  # its body's semicolons split it: one statement
            return _routine(connection, parts[0])
        for toks in parts:
            operations = classify_statement(toks)
            if any(o.kind == m.RENAME_COLUMN for o in operations):  # CHANGE a b type: one atomic ALTER
                operations = [o for o in operations if o.kind != m.ALTER_TYPE]
            verdicts.extend(_verdict(connection, operation, toks) for operation in operations)
    except sa.exc.DBAPIError:
        return None  # the catalog cannot be read: the error codes decide
    if False in verdicts:
        return False
    return None if not verdicts or None in verdicts else True


def _names(values: Iterable[str | None]) -> set[str]:
    return {v.lower() for v in values if v}


def _columns(inspector: sa.Inspector, table: str) -> set[str]:
    return set(column_names(inspector, table))


_INDEXES = (m.CREATE_INDEX, m.DROP_INDEX)


def _constraints(inspector: sa.Inspector, table: str, kind: str) -> set[str]:
    """The names a statement of *kind* creates or drops on *table*: an index, or a constraint
    (not the index MariaDB keeps after its foreign key is dropped)."""
    if not inspector.has_table(table):
        return set()
    if kind in _INDEXES:
        return _names([i["name"] for i in inspector.get_indexes(table)]
                      + [u["name"] for u in inspector.get_unique_constraints(table)])
    found = {
        m.ADD_FK: lambda: [fk["name"] for fk in inspector.get_foreign_keys(table)],
        m.ADD_UNIQUE: lambda: [u["name"] for u in inspector.get_unique_constraints(table)],
        m.ADD_CHECK: lambda: [c["name"] for c in inspector.get_check_constraints(table)],
        m.ADD_PK: lambda: [inspector.get_pk_constraint(table).get("name")],
    }
    kinds = [kind] if kind in found else list(found)  # DROP CONSTRAINT: any of them
    return _names(name for k in kinds for name in found[k]())


def _present(named: str | None, names: Callable[[], set[str]], creates: bool) -> bool | None:
    if not named:
        return None
    there = named.lower() in names()
    return there if creates else not there


def _verdict(connection: Connection, operation: m.Operation, toks: list[Tok]) -> bool | None:
    inspector = sa.inspect(connection)
    table, kind = operation.table, operation.kind
    if kind in (m.CREATE_TABLE, m.DROP_TABLE) and table:
        there = inspector.has_table(table)
        return there if kind == m.CREATE_TABLE else not there
    if not table:
        return None
    if kind in (m.ADD_COLUMN, m.DROP_COLUMN):
        return _present(operation.column, lambda: _columns(inspector, table), kind == m.ADD_COLUMN)
    if kind in m.CONSTRAINTS or kind in (*_INDEXES, m.DROP_CONSTRAINT):
        return _present(operation.name, lambda: _constraints(inspector, table, kind),
                        kind not in (m.DROP_INDEX, m.DROP_CONSTRAINT))
    if kind == m.RENAME_COLUMN:
        return _renamed(_columns(inspector, table), operation.column, _rename_target(toks))
    if kind == m.RENAME_TABLE and operation.name:
        return _renamed(_names(inspector.get_table_names()), table, operation.name)
    return None


def _renamed(names: set[str], source: str | None, target: str | None) -> bool | None:
    """A rename is applied when its target is there and its source is gone; not applied when the
    source is there and the target is not; anything else cannot be told."""
    if not source or not target:
        return None
    source, target = source.lower(), target.lower()
    if target in names and source not in names:
        return True
    if source in names and target not in names:
        return False
    return None


def _rename_target(toks: list[Tok]) -> str | None:
    """The new name in ``RENAME COLUMN a TO b`` / ``CHANGE [COLUMN] a b type``."""
    for i, tok in enumerate(toks):
        if tok.is_("TO") and i and toks[i - 1].kind in (WORD, QUOTED):
            return _identifier(toks, i + 1)
        if tok.is_("CHANGE"):
            j = i + 2 if i + 1 < len(toks) and toks[i + 1].is_("COLUMN") else i + 1
            return _identifier(toks, j + 1)
    return None


def _identifier(toks: list[Tok], i: int) -> str | None:
    if i >= len(toks) or toks[i].kind not in (WORD, QUOTED):
        return None
    return toks[i].value if toks[i].kind == QUOTED else toks[i].value.lower()


# -- CREATE / DROP PROCEDURE, FUNCTION, TRIGGER (the catalog classify leaves as "other") -------
_KINDS = ("PROCEDURE", "FUNCTION", "TRIGGER")


def _routine_target(toks: list[Tok]) -> tuple[bool, str, str] | None:
    """(creates, kind, name) of ``CREATE [OR REPLACE] [DEFINER=..] PROCEDURE|FUNCTION|TRIGGER name``
    or ``DROP ... [IF EXISTS] name``; OR REPLACE and IF [NOT] EXISTS statements re-run harmlessly."""
    if not toks or not toks[0].is_("CREATE", "DROP"):
        return None
    creates = toks[0].is_("CREATE")
    for i, tok in enumerate(toks[1:8], 1):
        if tok.is_(*_KINDS):
            j = i + 1
            while j < len(toks) and toks[j].is_("IF", "NOT", "EXISTS"):
                j += 1
            name = _last_part(toks, j)
            return (creates, tok.value, name) if name else None
        if tok.is_("TABLE", "INDEX", "VIEW", "ON"):
            return None
    return None


def _last_part(toks: list[Tok], i: int) -> str | None:
    name = _identifier(toks, i)
    while name and i + 2 < len(toks) and toks[i + 1].value == "." and toks[i + 2].kind in (WORD, QUOTED):
        i += 2
        name = _identifier(toks, i)
    return name


def _routine(connection: Connection, toks: list[Tok]) -> bool | None:
    target = _routine_target(toks)
    if target is None:
        return None
    creates, kind, name = target
    there = name in _catalog_names(connection, kind)
    return there if creates else not there


def _catalog_names(connection: Connection, kind: str) -> set[str]:
    if connection.dialect.name == "postgresql":
        if kind == "TRIGGER":
            table = sa.table("pg_trigger", sa.column("tgname"))
            query = sa.select(table.c.tgname)
        else:
            table = sa.table("pg_proc", sa.column("proname"), sa.column("prokind"))
            query = sa.select(table.c.proname).where(table.c.prokind == ("p" if kind == "PROCEDURE" else "f"))
    elif connection.dialect.name in ("mysql", "mariadb"):
        if kind == "TRIGGER":
            table = sa.table("triggers", sa.column("trigger_name"), sa.column("trigger_schema"),
                             schema="information_schema")
            query = sa.select(table.c.trigger_name).where(table.c.trigger_schema == sa.func.database())
        else:
            table = sa.table("routines", sa.column("routine_name"), sa.column("routine_type"),
                             sa.column("routine_schema"), schema="information_schema")
            query = sa.select(table.c.routine_name).where(table.c.routine_schema == sa.func.database(),
                                                          table.c.routine_type == kind)
    else:
        return set()
    return _names(connection.execute(query).scalars())
