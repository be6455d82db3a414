"""Ask the knowledge base (``migrations_policy.policy``) where an autogenerate op belongs.

The split never keeps its own list of what is safe: it describes each change
as a ``policy.Operation`` (in the form it will *render*, e.g. a foreign key
``NOT VALID``) and asks ``policy.phase_of``.  The answers it acts on:

* ``EXPAND`` / ``ANY``: the expand script;
* ``CONTRACT``: the contract script;
* ``MULTI_STEP`` (type change, rename): add the new column in expand, a data
  migration, drop the old column in contract.
"""

from __future__ import annotations

from alembic.operations import ops

from .. import policy
from ..policy import model as m


def _column_op(kind: str, op, **facts) -> m.Operation:
    return m.Operation(kind=kind, table=op.table_name, column=getattr(op, "column_name", None), **facts)


def describe(op: ops.MigrateOperation, *, table: str | None = None, new_table: bool = False) -> m.Operation:
    """The knowledge base's view of one (single-aspect) alembic op."""
    name = getattr(op, "constraint_name", None) or getattr(op, "index_name", None)
    if isinstance(op, ops.CreateTableOp):
        return m.Operation(kind=m.CREATE_TABLE, table=op.table_name)
    if isinstance(op, ops.DropTableOp):
        return m.Operation(kind=m.DROP_TABLE, table=op.table_name)
    if isinstance(op, ops.AddColumnOp):
        column = op.column
        return m.Operation(kind=m.ADD_COLUMN, table=op.table_name, column=column.name, new_table=new_table,
                           nullable=column.nullable, server_default="" if column.server_default is None else "x")
    if isinstance(op, ops.DropColumnOp):
        return _column_op(m.DROP_COLUMN, op)
    if isinstance(op, ops.CreateIndexOp):
        return m.Operation(kind=m.CREATE_INDEX, table=op.table_name, name=name, new_table=new_table,
                           unique=op.unique)
    if isinstance(op, ops.DropIndexOp):
        return m.Operation(kind=m.DROP_INDEX, table=op.table_name, name=name)
    if isinstance(op, ops.CreateForeignKeyOp):
        return m.Operation(kind=m.ADD_FK, table=op.source_table, name=name, new_table=new_table)
    if isinstance(op, ops.CreateUniqueConstraintOp):
        return m.Operation(kind=m.ADD_UNIQUE, table=op.table_name, name=name, new_table=new_table)
    if isinstance(op, ops.CreateCheckConstraintOp):
        return m.Operation(kind=m.ADD_CHECK, table=op.table_name, name=name, new_table=new_table)
    if isinstance(op, ops.CreatePrimaryKeyOp):
        return m.Operation(kind=m.ADD_PK, table=op.table_name, name=name, new_table=new_table)
    if isinstance(op, ops.DropConstraintOp):
        return m.Operation(kind=m.DROP_CONSTRAINT, table=op.table_name, name=name)
    if isinstance(op, (ops.CreateTableCommentOp, ops.DropTableCommentOp)):
        return m.Operation(kind=m.COMMENT, table=op.table_name)
    if isinstance(op, ops.AlterColumnOp):
        return _alter(op)
    return m.Operation(kind=m.OTHER, table=table or getattr(op, "table_name", None))


def _alter(op: ops.AlterColumnOp) -> m.Operation:
    if op.modify_type is not None:
        return _column_op(m.ALTER_TYPE, op)
    if op.modify_name is not None:
        return _column_op(m.RENAME_COLUMN, op)
    if op.modify_nullable is False:
        return _column_op(m.SET_NOT_NULL, op)
    if op.modify_nullable is True:
        return _column_op(m.DROP_NOT_NULL, op)
    if op.modify_server_default is not False:
        kind = m.DROP_DEFAULT if op.modify_server_default is None else m.SET_DEFAULT
        return _column_op(kind, op)
    return _column_op(m.COMMENT, op)


def phase(operation: m.Operation) -> str:
    """``policy.phase_of``: EXPAND, CONTRACT, DATA, ANY or MULTI_STEP."""
    return policy.phase_of(operation)


def single_aspects(op: ops.AlterColumnOp) -> list[ops.AlterColumnOp]:
    """Split an AlterColumnOp that changes several things into one op per change."""
    common = dict(schema=op.schema, existing_type=op.existing_type, existing_nullable=op.existing_nullable,
                  existing_server_default=op.existing_server_default, existing_comment=op.existing_comment,
                  **op.kw)
    parts = []
    if op.modify_type is not None:
        parts.append(ops.AlterColumnOp(op.table_name, op.column_name, modify_type=op.modify_type, **common))
    if op.modify_name is not None:
        parts.append(ops.AlterColumnOp(op.table_name, op.column_name, modify_name=op.modify_name, **common))
    if op.modify_nullable is not None and op.modify_nullable != op.existing_nullable:
        parts.append(ops.AlterColumnOp(op.table_name, op.column_name, modify_nullable=op.modify_nullable, **common))
    if op.modify_server_default is not False:
        parts.append(ops.AlterColumnOp(op.table_name, op.column_name,
                                       modify_server_default=op.modify_server_default, **common))
    if op.modify_comment is not False:
        parts.append(ops.AlterColumnOp(op.table_name, op.column_name, modify_comment=op.modify_comment, **common))
    return parts
