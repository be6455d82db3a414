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
from migrations_policy.policy.defaults import default_kind
from migrations_policy.policy.sql import from_sql


def default_text(default: Any) -> str:
    """SQL text of a server default (``DefaultClause``, text, function or literal); "" when none."""
    if default is None or default is False:
        return ""
    arg = getattr(default, "arg", default)
    if isinstance(arg, str):
        return "'" + arg.replace("'", "''") + "'"
    if isinstance(arg, elements.TextClause):
        return arg.text
    if isinstance(arg, functions.FunctionElement):
        return f"{arg.name}()"
    try:
        return str(arg)
    except Exception:  # noqa: BLE001 - an uncompilable construct is just "an expression"
        return type(arg).__name__


def _autoincrements(column: Any) -> bool:
    """An integer primary key column SQLAlchemy renders as the table's autoincrement column (``SERIAL``,
    ``AUTO_INCREMENT``) -- as ``op.add_column`` adds it: alone in its table, so it is that column."""
    if not column.primary_key or column.autoincrement is False or column.server_default is not None:
        return False
    if column.default is not None and not isinstance(column.default, sa_schema.Sequence):
        return False
    try:
        return issubclass(column.type._type_affinity, sqltypes.Integer)
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
    elif _autoincrements(column):
        generated = "identity"  # alembic adds it as SERIAL (PostgreSQL) / AUTO_INCREMENT (MySQL)
    text = default_text(server_default)
    return dict(
        column=column.name,
        nullable=bool(column.nullable),
        server_default=text,
        default_kind=default_kind(text),
        python_default=column.default is not None and not text,
        generated=generated,
        unique=bool(column.unique),
        primary_key=bool(column.primary_key),
    )


def _add_column(op: aops.AddColumnOp) -> list[m.Operation]:
    facts = _column_facts(op.column)
    ops = [m.Operation(kind=m.ADD_COLUMN, table=op.table_name, **facts)]
    for fk in op.column.foreign_keys:
        not_valid = bool(fk.constraint is not None and fk.constraint.dialect_kwargs.get("postgresql_not_valid"))
        ops.append(m.Operation(kind=m.ADD_FK, table=op.table_name, column=op.column.name, not_valid=not_valid))
    return ops


def _appends_enum_members(op: aops.AlterColumnOp) -> bool:
    """An ``Enum`` column whose new type only appends members to ``existing_type``'s (same order): no
    dialect rewrites for it (MySQL appends in place; PostgreSQL adds enum values with ``ALTER TYPE``)."""
    old, new = op.existing_type, op.modify_type
    old_members, new_members = getattr(old, "enums", None), getattr(new, "enums", None)
    if not (isinstance(old_members, list) and isinstance(new_members, list)):
        return False
    return len(new_members) > len(old_members) and new_members[:len(old_members)] == old_members


#: Bytes per character of the MySQL/MariaDB character sets a type may name.
_CHARSET_BYTES = {"latin1": 1, "ascii": 1, "binary": 1, "utf8": 3, "utf8mb3": 3, "utf8mb4": 4}


def _varchar_widening(old: Any, new: Any) -> dict[str, int] | None:
    """``length_from`` / ``length_to`` / ``bytes_per_char`` when *new* only lengthens the
    ``VARCHAR`` *old* (same collation and character set), else None.  ``CHAR`` (padded)
    and ``Enum`` are other types.  *new* an unbounded ``Text``: ``length_to`` 0 (``text``:
    binary-coercible on PostgreSQL, a copy on MySQL/MariaDB)."""
    from sqlalchemy import types

    old, new = (t() if isinstance(t, type) and issubclass(t, types.TypeEngine) else t for t in (old, new))

    def plain(t: Any) -> bool:
        return (isinstance(t, types.String) and not isinstance(t, (types.CHAR, types.Text, types.Enum))
                and isinstance(t.length, int))

    def text(t: Any) -> bool:
        return isinstance(t, types.Text) and not isinstance(t, types.Enum) and t.length is None

    def unbounded(t: Any) -> bool:  # VARCHAR without a length (PostgreSQL): also binary-coercible to text
        return (isinstance(t, types.String) and not isinstance(t, (types.CHAR, types.Text, types.Enum))
                and t.length is None)

    if not (plain(old) and (text(new) or plain(new) and new.length > old.length) or unbounded(old) and text(new)):
        return None
    charsets = {getattr(t, "charset", None) for t in (old, new)}
    if old.collation != new.collation or len(charsets) != 1:
        return None
    charset = charsets.pop() or (old.collation or "").split("_")[0]
    return {"length_from": old.length or 0, "length_to": 0 if text(new) else new.length,
            "bytes_per_char": _CHARSET_BYTES.get(charset, 0)}


def _alter_column(op: aops.AlterColumnOp) -> list[m.Operation]:
    base = m.Operation(kind=m.OTHER, table=op.table_name, column=op.column_name)
    ops = []
    if op.modify_name:
        ops.append(base.with_(kind=m.RENAME_COLUMN, name=op.modify_name))
    if op.modify_type is not None:
        widening = _varchar_widening(op.existing_type, op.modify_type)
        if widening:
            ops.append(base.with_(kind=m.WIDEN_VARCHAR, **widening))
        else:
            ops.append(base.with_(kind=m.ENUM_ADD_VALUE if _appends_enum_members(op) else m.ALTER_TYPE))
    if op.modify_nullable is not None and not (op.existing_nullable is not None
                                               and bool(op.existing_nullable) == bool(op.modify_nullable)):
        # existing_nullable equal to nullable: the column already is so (neutron's type changes state both)
        ops.append(base.with_(kind=m.DROP_NOT_NULL if op.modify_nullable else m.SET_NOT_NULL))
    if op.modify_server_default is not False:
        if op.modify_server_default is None:
            ops.append(base.with_(kind=m.DROP_DEFAULT))
        else:
            text = default_text(op.modify_server_default)
            ops.append(base.with_(kind=m.SET_DEFAULT, server_default=text, default_kind=default_kind(text)))
    if op.modify_comment is not False:
        ops.append(base.with_(kind=m.COMMENT))
    return ops


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
