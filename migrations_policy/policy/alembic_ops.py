"""Normalize alembic op objects (and SQLAlchemy statements) into ``Operation`` lists.

``from_alembic(AlterColumnOp(..., modify_type=BigInteger(), modify_nullable=False))``
gives ``[alter_type, set_not_null]``; ``from_alembic(AddColumnOp(t, Column(..., ForeignKey(...))))``
gives ``[add_column, add_fk]``.  Containers (``UpgradeOps``, ``ModifyTableOps``) are
flattened, so the autogenerate split can pass what ``compare_metadata`` produces.
``from_statement`` classifies what a script hands to ``op.execute`` or
``op.get_bind().execute``: text, ``sa.text``, or Core constructs.
"""

from __future__ import annotations

from typing import Any

from alembic.operations import ops as aops
from sqlalchemy import schema as sa_schema
from sqlalchemy import types as sqltypes
from sqlalchemy.sql import dml, elements, functions

from migrations_policy.policy import model as m
from migrations_policy.policy.op_facts import (TypeFacts, alter_column_ops, autoincrements, column_facts,
    quoted_default)
from migrations_policy.policy.sql import from_sql


def default_text(default: Any) -> str:
    """SQL text of a server default (``DefaultClause``, text, function or literal); "" when none."""
    if default is None or default is False:
        return ""
    arg = getattr(default, "arg", default)
    if isinstance(arg, str):
        return quoted_default(arg)
    if isinstance(arg, elements.TextClause):
        return arg.text
    if isinstance(arg, functions.FunctionElement):
        return f"{arg.name}()"
    try:
        return str(arg)
    except Exception:  # noqa: BLE001 - an uncompilable construct is just "an expression"
        return type(arg).__name__


def _integer(type_: Any) -> bool:
    try:
        return issubclass(type_._type_affinity, sqltypes.Integer)
    except (AttributeError, TypeError):
        return False


def _column_facts(column: Any) -> dict[str, Any]:
    server_default = column.server_default
    generated = ""
    if isinstance(server_default, sa_schema.Computed):
        generated = "stored" if server_default.persisted else "virtual"
        server_default = None
    elif isinstance(server_default, sa_schema.Identity) or getattr(column, "identity", None) is not None:
        generated, server_default = "identity", None
    elif autoincrements(column.primary_key, column.autoincrement, column.server_default is not None,
                        column.default is not None and not isinstance(column.default, sa_schema.Sequence),
                        column.primary_key and _integer(column.type)):
        generated = "identity"  # alembic adds it as SERIAL (PostgreSQL) / AUTO_INCREMENT (MySQL)
    return column_facts(column.name, column.nullable, default_text(server_default), generated,
                        column.default is not None, column.unique, column.primary_key)


def _add_column(op: aops.AddColumnOp) -> list[m.Operation]:
    facts = _column_facts(op.column)
    ops = [m.Operation(kind=m.ADD_COLUMN, table=op.table_name, **facts)]
    for fk in op.column.foreign_keys:
        not_valid = bool(fk.constraint is not None and fk.constraint.dialect_kwargs.get("postgresql_not_valid"))
        ops.append(m.Operation(kind=m.ADD_FK, table=op.table_name, column=op.column.name, not_valid=not_valid))
    return ops


def type_facts(type_: Any) -> TypeFacts | None:
    """``op_facts.TypeFacts`` of a SQLAlchemy type (instance or class) as a script gave it; None for None."""
    if type_ is None:
        return None
    members = getattr(type_, "enums", None)  # of the object given: a class has none
    members = tuple(members) if isinstance(members, list) else None
    if isinstance(type_, type) and issubclass(type_, sqltypes.TypeEngine):
        type_ = type_()
    if isinstance(type_, sqltypes.Enum):
        kind = "enum"
    elif isinstance(type_, sqltypes.Text):
        kind = "text"
    elif isinstance(type_, sqltypes.String) and not isinstance(type_, sqltypes.CHAR):
        kind = "string"
    else:
        kind = "other"
    if kind in ("other", "enum"):  # (the length, collation and character set of a string type only)
        return TypeFacts(kind, enums=members)
    return TypeFacts(kind, type_.length, type_.collation, getattr(type_, "charset", None), members)


def _alter_column(op: aops.AlterColumnOp) -> list[m.Operation]:
    server_default = op.modify_server_default
    if server_default is not False and server_default is not None:
        server_default = default_text(server_default)
    return alter_column_ops(op.table_name, op.column_name, op.modify_name, op.modify_type is not None,
                            type_facts(op.existing_type), type_facts(op.modify_type), op.modify_nullable,
                            op.existing_nullable, server_default, op.modify_comment is not False)


def from_statement(statement: Any) -> list[m.Operation]:
    """Operations of a statement given to ``op.execute`` / ``bind.execute``."""
    if isinstance(statement, str):
        return from_sql(statement)
    if isinstance(statement, elements.TextClause):
        return from_sql(statement.text)
    for cls, kind in ((dml.Update, m.UPDATE), (dml.Delete, m.DELETE), (dml.Insert, m.INSERT)):
        if isinstance(statement, cls):
            table = getattr(statement.table, "name", None)
            return [m.Operation(kind=kind, table=table, source="sql", text=kind.upper())]
    try:
        return from_sql(str(statement))
    except Exception:  # noqa: BLE001 - not compilable without a dialect: unknown statement
        return [m.Operation(kind=m.OTHER, source="sql", text=type(statement).__name__)]


def _index(op: aops.CreateIndexOp) -> m.Operation:
    return m.Operation(
        kind=m.CREATE_INDEX, table=op.table_name, name=op.index_name, unique=bool(op.unique),
        concurrently=bool(op.kw.get("postgresql_concurrently")),
        fulltext=str(op.kw.get("mysql_prefix", "")).upper() == "FULLTEXT",
    )


_SIMPLE = {
    aops.DropColumnOp: lambda op: m.Operation(kind=m.DROP_COLUMN, table=op.table_name, column=op.column_name),
    aops.CreateTableOp: lambda op: m.Operation(kind=m.CREATE_TABLE, table=op.table_name),
    aops.DropTableOp: lambda op: m.Operation(kind=m.DROP_TABLE, table=op.table_name),
    aops.RenameTableOp: lambda op: m.Operation(kind=m.RENAME_TABLE, table=op.table_name, name=op.new_table_name),
    aops.CreateTableCommentOp: lambda op: m.Operation(kind=m.COMMENT, table=op.table_name),
    aops.DropTableCommentOp: lambda op: m.Operation(kind=m.COMMENT, table=op.table_name),
    aops.CreateIndexOp: _index,
    aops.DropIndexOp: lambda op: m.Operation(
        kind=m.DROP_INDEX, table=op.table_name, name=op.index_name,
        concurrently=bool(op.kw.get("postgresql_concurrently"))),
    aops.CreateForeignKeyOp: lambda op: m.Operation(
        kind=m.ADD_FK, table=op.source_table, name=op.constraint_name,
        not_valid=bool(op.kw.get("postgresql_not_valid"))),
    aops.CreateUniqueConstraintOp: lambda op: m.Operation(kind=m.ADD_UNIQUE, table=op.table_name, name=op.constraint_name),
    aops.CreateCheckConstraintOp: lambda op: m.Operation(
        kind=m.ADD_CHECK, table=op.table_name, name=op.constraint_name,
        not_valid=bool(op.kw.get("postgresql_not_valid"))),
    aops.CreatePrimaryKeyOp: lambda op: m.Operation(kind=m.ADD_PK, table=op.table_name, name=op.constraint_name),
    aops.DropConstraintOp: lambda op: m.Operation(kind=m.DROP_CONSTRAINT, table=op.table_name, name=op.constraint_name),
    aops.BulkInsertOp: lambda op: m.Operation(kind=m.INSERT, table=getattr(op.table, "name", None)),
}


def from_alembic(op: Any) -> list[m.Operation]:
    """Normalize one alembic ``MigrateOperation`` (containers are flattened)."""
    if isinstance(op, aops.OpContainer):
        return [found for child in op.ops for found in from_alembic(child)]
    if isinstance(op, aops.AddColumnOp):
        return _add_column(op)
    if isinstance(op, aops.AlterColumnOp):
        return _alter_column(op)
    if isinstance(op, aops.ExecuteSQLOp):
        return from_statement(op.sqltext)
    convert = _SIMPLE.get(type(op))
    if convert is None:
        for cls, fn in _SIMPLE.items():
            if isinstance(op, cls):
                convert = fn
                break
    if convert is None:
        table = getattr(op, "table_name", None)  # a project's own op on a table
        if table is None:  # op.create_sync_trigger / drop_sync_trigger keep theirs in a pair
            table = getattr(getattr(op, "pair", None), "table", None)
        return [m.Operation(kind=m.OTHER, name=type(op).__name__, table=table if isinstance(table, str) else None)]
    return [convert(op)]
