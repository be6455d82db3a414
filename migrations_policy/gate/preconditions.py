"""Data preconditions: the rows a constraint-adding revision would trip over, found before it runs.

A contract that adds a constraint to a table with rows fails half-way (or, on
SQLite and MariaDB without strict mode, succeeds and keeps or coerces the bad
rows) when existing rows violate it.  The gate (``gate.evaluate``) asks this
module, for every gated revision about to run, which constraints it adds --
read from the operations its ``upgrade()`` invokes offline
(``offline_run.record_operations``), never from its text -- and counts the
offending rows live, with up to ``SAMPLES`` primary keys of them:

==============  ===========================================  =============================
constraint      from                                         offending rows
==============  ===========================================  =============================
UNIQUE          ``create_unique_constraint``, ``create_index  rows whose (non-NULL) values
                (unique=True)`` (its ``*_where`` too)         another row has as well
FOREIGN KEY     ``create_foreign_key``; PostgreSQL's ``ALTER  rows whose (all non-NULL)
                TABLE t VALIDATE CONSTRAINT c`` (read from    columns match no parent row
                the catalog)
NOT NULL        ``alter_column(nullable=False)``, a CHECK     rows where the column IS NULL
                that is exactly ``col IS NOT NULL``
CHECK           ``create_check_constraint``; ``VALIDATE       rows where NOT (condition)
                CONSTRAINT`` of a check (PostgreSQL)          (UNKNOWN passes, as in a CHECK)
==============  ===========================================  =============================

Comparisons are the database's own (``GROUP BY`` and ``=`` under the column's
collation, as the unique index will compare), so MariaDB's case-insensitive
duplicates count.  A constraint on a table or column that does not exist yet
(created by the same run) has no rows to check and is skipped.

A CHECK condition given as text is evaluated as ``NOT (text)`` only when it is
one expression: no ``;``, no comment, parentheses that never close more than
they open, no statement keyword.  Anything else is refused as "cannot be
evaluated" -- the gate fails closed.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterable

import sqlalchemy as sa
from alembic.operations import ops
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import Grouping

from migrations_policy.core.offline_run import first_line, record_operations
from migrations_policy.policy.sql_lexer import PUNCT, QUOTED, WORD, tokens

#: Sample keys shown per violated precondition.
SAMPLES = 5
UNIQUE, FOREIGN_KEY, NOT_NULL, CHECK = "UNIQUE", "FOREIGN KEY", "NOT NULL", "CHECK"
_WHAT = {UNIQUE: "duplicate values", FOREIGN_KEY: "orphans: no parent row", NOT_NULL: "NULLs",
         CHECK: "violating the condition"}
_STATEMENT_WORDS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "TRUNCATE",
                              "GRANT", "REVOKE", "CALL", "EXEC", "EXECUTE", "INTO", "COPY", "SET", "LOAD"})


@dataclass(frozen=True)
class Precondition:
    """A constraint one revision adds, as what its rows must satisfy."""

    revision: str
    path: str
    kind: str
    table: str
    name: str | None
    columns: tuple[Any, ...] = ()  # column names (UNIQUE may hold expressions)
    schema: str | None = None
    referent: str | None = None  # FOREIGN KEY: parent table, its schema, its columns
    referent_schema: str | None = None
    remote: tuple[str, ...] = ()
    condition: Any = None  # CHECK: a Core expression or the constraint's text
    where: Any = None  # UNIQUE index: its partial-index condition

    def key(self) -> tuple:
        return (self.schema, self.table, self.kind, tuple(str(c) for c in self.columns), self.referent,
                self.remote, str(self.condition), str(self.where))

    def describe(self) -> str:
        label = f"{self.kind} {self.name}" if self.name else self.kind
        on = ", ".join(str(c) for c in self.columns)
        target = f" -> {self.referent}({', '.join(self.remote)})" if self.referent else ""
        return f"{label} on {self.table}({on}){target}" if on else f"{label} on {self.table}"


@dataclass
class Violation:
    """A precondition with offending rows, or one that could not be evaluated (*problem*)."""

    precondition: Precondition
    count: int | None = None
    samples: list[tuple] = field(default_factory=list)
    key_columns: tuple[str, ...] = ()
    problem: str | None = None

    def describe(self) -> str:
        p = self.precondition
        where = f"{p.path}: revision {p.revision} adds {p.describe()}"
        if self.problem:
            return f"{where}: its rows cannot be checked ({self.problem}); the contract is refused until they can"
        keys = ", ".join(_format_key(self.key_columns, s) for s in self.samples)
        more = ", ..." if self.count and self.count > len(self.samples) else ""
        return (f"{where}: {self.count:,} offending row{'' if self.count == 1 else 's'} ({_WHAT[p.kind]}), "
                f"e.g. {keys}{more}: fix or delete them, then rerun")

    def to_dict(self) -> dict[str, Any]:
        p = self.precondition
        return {"revision": p.revision, "path": p.path, "constraint": p.name, "kind": p.kind, "table": p.table,
                "columns": [str(c) for c in p.columns], "count": self.count, "key_columns": list(self.key_columns),
                "samples": [list(s) for s in self.samples], "problem": self.problem}


def _format_key(columns: tuple[str, ...], values: tuple) -> str:
    if len(columns) == 1:
        return f"{columns[0]}={values[0]!r}"
    return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(columns, values)) + ")"


# -- what a revision adds ------------------------------------------------------------
def _sql_of(operation: ops.ExecuteSQLOp) -> str | None:
    text = operation.sqltext
    text = getattr(text, "text", text)
    return text if isinstance(text, str) else None


def _validated(sql: str) -> tuple[str | None, str, str] | None:
    """(schema, table, constraint) of ``ALTER TABLE [ONLY] [schema.]t VALIDATE CONSTRAINT c``, else None."""
    toks = tokens(sql)
    if toks and toks[-1].kind == PUNCT and toks[-1].value == ";":
        toks = toks[:-1]
    if len(toks) < 6 or not (toks[0].is_("ALTER") and toks[1].is_("TABLE")):
        return None
    rest = toks[3:] if toks[2].is_("ONLY") else toks[2:]
    if len(rest) == 6 and rest[1].raw == ".":
        schema, table = rest[0], rest[2]
    elif len(rest) == 4:
        schema, table = None, rest[0]
    else:
        return None
    names = [t for t in (schema, table, rest[-1]) if t is not None]
    if not (rest[-3].is_("VALIDATE") and rest[-2].is_("CONSTRAINT")) or any(t.kind not in (WORD, QUOTED)
                                                                          for t in names):
        return None

    def name(tok: Any) -> str:  # PostgreSQL folds unquoted names to lower case
        return tok.value if tok.kind == QUOTED else tok.raw.lower()

    return (name(schema) if schema is not None else None), name(table), name(rest[-1])


def _is_not_null_check(condition: Any) -> str | None:
    """The column of a CHECK that is exactly ``col IS NOT NULL`` (a Core expression), else None."""
    if not isinstance(condition, sa.BinaryExpression):
        return None
    left, right = condition.left, condition.right
    if (condition.operator is sa.sql.operators.is_not and isinstance(left, sa.ColumnClause)
            and isinstance(right, sa.Null)):
        return left.name
    return None


def _from_catalog(connection: Connection, schema: str | None, table: str, name: str, rev: Any
                  ) -> Precondition | None:
    """The precondition of an existing (NOT VALID) constraint *name* that a raw VALIDATE validates."""
    inspector = sa.inspect(connection)
    if not inspector.has_table(table, schema=schema):
        return None
    for fk in inspector.get_foreign_keys(table, schema=schema):
        if fk.get("name") == name:
            return Precondition(rev.revision, rev.path, FOREIGN_KEY, table, name, tuple(fk["constrained_columns"]),
                                schema, fk["referred_table"], fk.get("referred_schema"),
                                tuple(fk["referred_columns"]))
    for check in inspector.get_check_constraints(table, schema=schema):
        if check.get("name") == name:  # the database's own text of the constraint
            return Precondition(rev.revision, rev.path, CHECK, table, name, (), schema, condition=check["sqltext"])
    return None


def _of_operation(operation: Any, rev: Any, dialect: str) -> Precondition | None:
    path, revision = rev.path, rev.revision
    if isinstance(operation, ops.CreateUniqueConstraintOp):
        return Precondition(revision, path, UNIQUE, operation.table_name, operation.constraint_name,
                            tuple(operation.columns), operation.schema)
    if isinstance(operation, ops.CreateIndexOp) and operation.unique:
        where = operation.kw.get(f"{dialect}_where")
        return Precondition(revision, path, UNIQUE, operation.table_name, operation.index_name,
                            tuple(operation.columns), operation.schema, where=where)
    if isinstance(operation, ops.CreateForeignKeyOp):
        return Precondition(revision, path, FOREIGN_KEY, operation.source_table, operation.constraint_name,
                            tuple(operation.local_cols), operation.kw.get("source_schema"),
                            operation.referent_table, operation.kw.get("referent_schema"),
                            tuple(operation.remote_cols))
    if isinstance(operation, ops.CreateCheckConstraintOp):
        column = _is_not_null_check(operation.condition)
        if column is not None:
            return Precondition(revision, path, NOT_NULL, operation.table_name, operation.constraint_name,
                                (column,), operation.schema)
        return Precondition(revision, path, CHECK, operation.table_name, operation.constraint_name, (),
                            operation.schema, condition=operation.condition)
    if isinstance(operation, ops.AlterColumnOp) and operation.modify_nullable is False:
        return Precondition(revision, path, NOT_NULL, operation.table_name, None,  # its rows: under the name
                            (operation.column_name,), operation.schema)  # it has now (before a rename)
    return None


def preconditions_of(rev: Any, connection: Connection) -> tuple[list[Precondition], str | None]:
    """The constraints *rev*'s ``upgrade()`` adds on *connection*'s dialect, each once, and why
    its operations could not all be read (None when they could)."""
    dialect = connection.dialect
    recorded, problem = record_operations(rev.module.upgrade, dialect, flush_batches=False)
    name = "mysql" if dialect.name == "mariadb" else dialect.name
    found: dict[tuple, Precondition] = {}
    created: set[str] = set()
    for operation in recorded:
        precondition = _of_operation(operation, rev, name)
        if precondition is None and isinstance(operation, ops.ExecuteSQLOp):
            sql = _sql_of(operation)
            target = _validated(sql) if sql else None
            if target is not None and target[2] not in created:
                precondition = _from_catalog(connection, *target, rev)
        if precondition is not None:
            if precondition.name:
                created.add(precondition.name)
            found.setdefault(precondition.key(), precondition)
    return list(found.values()), problem


# -- counting the offending rows -------------------------------------------------------
def _safe_text(text: str) -> sa.ColumnElement | str:
    """*text* (a constraint's own condition) as a boolean Core element, or why it is not one expression."""
    if any(marker in text for marker in (";", "--", "/*", "#")):
        return "its text holds ';' or a comment"
    depth = 0
    for tok in tokens(text):
        if tok.kind == PUNCT:
            depth += {"(": 1, ")": -1}.get(tok.value, 0)
            if depth < 0:
                return "its text closes a parenthesis it did not open"
        elif tok.kind == WORD and tok.value in _STATEMENT_WORDS:
            return f"its text holds {tok.value}"
    if depth:
        return "its text leaves a parenthesis open"
    return sa.type_coerce(Grouping(sa.text(text)), sa.Boolean)


def _expression(table: sa.TableClause, value: Any) -> sa.ColumnElement | str:
    if isinstance(value, str):
        return table.c[value]
    if isinstance(value, sa.TextClause):
        return _safe_text(value.text)
    if isinstance(value, sa.ColumnClause) and not value.is_literal and value.name in table.c:
        return table.c[value.name]
    if isinstance(value, sa.ColumnElement):
        return sa.sql.visitors.replacement_traverse(
            value, {}, lambda e: table.c[e.name] if isinstance(e, sa.ColumnClause) and not e.is_literal
            and e.table is None and e.name in table.c else None)
    return f"{value!r:.60} is not an expression"


def _offending(connection: Connection, p: Precondition, table: sa.TableClause) -> sa.Select | str:
    """SELECT of the offending rows' keys, or why the rows cannot be checked."""
    keys = [table.c[k] for k in table.info["key"]] or None
    if p.kind == NOT_NULL:
        return sa.select(*(keys or [table.c[p.columns[0]]])).where(table.c[p.columns[0]].is_(None))
    if p.kind == CHECK:
        condition = _safe_text(p.condition) if isinstance(p.condition, str) else _expression(table, p.condition)
        if isinstance(condition, str):
            return condition
        return sa.select(*(keys or list(table.c))).where(sa.not_(condition))
    if p.kind == FOREIGN_KEY:
        parent_table = _reflect(connection, p.referent, p.referent_schema)
        if parent_table is None or not set(p.remote) <= set(parent_table.c.keys()):
            return f"its parent table {p.referent} or columns {', '.join(p.remote)} do not exist"
        parent = parent_table.alias("mp_parent")
        local = [table.c[c] for c in p.columns]
        match = sa.and_(*[parent.c[r] == c for r, c in zip(p.remote, local)])
        return sa.select(*(keys or local)).where(*[c.is_not(None) for c in local],
                                                  ~sa.exists().where(match))
    # UNIQUE: rows whose non-NULL values another row shares (NULLs never collide)
    values = [_expression(table, c) for c in p.columns]
    bad = next((v for v in values if isinstance(v, str)), None)
    if bad:
        return bad
    where = [v.is_not(None) for v in values]
    if p.where is not None:
        partial = _expression(table, p.where)
        if isinstance(partial, str):
            return partial
        where.append(partial)
    labelled = [v.label(f"mp_k{i}") for i, v in enumerate(values)]
    duplicates = (sa.select(*labelled).where(*where).group_by(*values).having(sa.func.count() > 1)
                  .subquery("mp_duplicates"))
    joined = table.join(duplicates, sa.and_(*[v == duplicates.c[f"mp_k{i}"] for i, v in enumerate(values)]))
    return sa.select(*(keys or values)).select_from(joined).where(*where)


def _reflect(connection: Connection, name: str | None, schema: str | None) -> sa.TableClause | None:
    """*name*'s columns as a lightweight table, its primary key in ``info`` (None: no such table)."""
    inspector = sa.inspect(connection)
    if name is None or not inspector.has_table(name, schema=schema):
        return None
    table = sa.table(name, *[sa.column(c["name"], c["type"]) for c in inspector.get_columns(name, schema=schema)],
                     schema=schema)
    table.info = {"key": tuple(inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or ())}
    return table


def _present(p: Precondition, table: sa.TableClause) -> bool:
    """Every named column exists (one the same run adds has no rows to check yet)."""
    return all(c in table.c for c in p.columns if isinstance(c, str))


def violation(connection: Connection, p: Precondition, remember: bool = False) -> Violation | None:
    """*p*'s offending rows counted live (None when there are none, or no table to check yet).

    *remember* (``status``/``check``, never the gate of an upgrade): a count that found none is
    remembered with the proof ``data.completion`` keeps (the database's dirty marks of the tables
    the query reads), and not repeated while nothing was written to them."""
    table = _reflect(connection, p.table, p.schema)
    if table is None or not _present(p, table):
        return None
    query = _offending(connection, p, table)
    if isinstance(query, str):
        return Violation(p, problem=query)
    proof = None
    if remember:
        from migrations_policy.data.remaining import completion

        subject = completion.Subject("precondition", query, connection.dialect)
        proof = completion.read(connection, subject)
        if proof.valid:
            return None
        if proof.fingerprint is not None and not proof.installed:  # before the count reads the tables
            completion.install(connection.engine, subject)  # (it proves on the next call)
    inner = query.subquery("mp_offending")
    count = connection.execute(sa.select(sa.func.count()).select_from(inner)).scalar_one()
    if not count:
        if proof is not None:
            completion.remember(connection.engine, subject, proof)
        return None
    keys = tuple(c.name for c in inner.c)
    samples = connection.execute(sa.select(inner).order_by(*inner.c).limit(SAMPLES)).all()
    return Violation(p, count, [tuple(row) for row in samples], keys)


def violations(connection: Connection, preconditions: Iterable[Precondition],
               remember: bool = False) -> list[Violation]:
    """Every precondition with offending rows.  A query the database rejects is a violation too
    (with its error: fail closed).  *remember*: see ``violation``."""
    found = []
    for p in preconditions:
        try:
            with _savepoint(connection):
                v = violation(connection, p, remember)
        except sa.exc.DBAPIError as exc:
            v = Violation(p, problem=f"the database rejected the check: {first_line(exc.orig or exc)}")
        if v is not None:
            found.append(v)
    return found


def _savepoint(connection: Connection) -> Any:
    """PostgreSQL aborts the whole transaction on an error: a SAVEPOINT keeps the caller's usable."""
    return connection.begin_nested() if connection.dialect.name == "postgresql" else nullcontext()
