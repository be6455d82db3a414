"""Ask the knowledge base (``migrations_policy.policy``) where an autogenerate op belongs.

The split keeps no list of its own: each (single-aspect) alembic op is
normalized by ``policy.from_alembic`` — the same adapter the linter's recorder
uses — and its phase comes from ``policy.phase_of``.  The answers it acts on:

* ``EXPAND`` / ``ANY``: the expand script;
* ``CONTRACT``: the contract script;
* ``MULTI_STEP`` (type change, rename): add the new column in expand, a data
  migration, drop the old column in contract.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.operations import ops

from migrations_policy import policy
from migrations_policy.policy import model as m


def describe(op: ops.MigrateOperation, *, new_table: bool = False) -> m.Operation:
    """The knowledge base's view of one single-aspect alembic op (its first operation)."""
    found = policy.from_alembic(op)
    operation = found[0] if found else m.Operation(kind=m.OTHER, table=getattr(op, "table_name", None))
    return operation.with_(new_table=True) if new_table else operation


def phase(operation: m.Operation) -> str:
    """``policy.phase_of``: EXPAND, CONTRACT, DATA, ANY or MULTI_STEP."""
    return policy.phase_of(operation)


def in_place_everywhere(operation: m.Operation, dialects: tuple[str, ...] | list[str],
                        context: m.Context | None = None) -> bool:
    """The knowledge base says *operation* rewrites nothing on each of *dialects* (a varchar
    widening: ``m.WIDEN_VARCHAR``).  SQLite does not count: it changes a column only by
    rebuilding the table, which any route there does (it never enforces the length anyway)."""
    return all(policy.classify(operation, dialect, context).effect.safe
               for dialect in dialects if dialect != "sqlite")


def single_aspects(op: ops.AlterColumnOp) -> list[ops.AlterColumnOp]:
    """Split an AlterColumnOp that changes several things into one op per change.

    Each op states the column as it is when that op runs, not as it was before the revision:
    MySQL's ``MODIFY`` restates the whole column from the ``existing_*`` values, so an op that
    carried the old default or comment would put it back after expand had changed it (a NOT NULL
    set in contract dropped the server default expand had just given the column).  The default
    and the comment change in expand, before every contract op (an expand op that runs before
    them sets the new value early, harmlessly); while its nullability changes, the column is
    nullable until contract (DROP NOT NULL in expand, SET NOT NULL in contract)."""
    common = dict(schema=op.schema, existing_type=op.existing_type, existing_nullable=op.existing_nullable,
                  existing_server_default=op.existing_server_default, existing_comment=op.existing_comment,
                  **op.kw)
    when_run = {}  # the other ops' view of what this op changes
    if op.modify_server_default is not False:
        when_run["existing_server_default"] = op.modify_server_default
    if op.modify_comment is not False:
        when_run["existing_comment"] = op.modify_comment
    if op.modify_nullable is not None and op.modify_nullable != op.existing_nullable:
        when_run["existing_nullable"] = True
    changes = []
    if op.modify_type is not None:
        changes.append({"modify_type": op.modify_type})
    if op.modify_name is not None:
        changes.append({"modify_name": op.modify_name})
    if op.modify_nullable is not None and op.modify_nullable != op.existing_nullable:
        changes.append({"modify_nullable": op.modify_nullable})
    if op.modify_server_default is not False:
        changes.append({"modify_server_default": op.modify_server_default})
    if op.modify_comment is not False:
        changes.append({"modify_comment": op.modify_comment})
    own = {"modify_server_default": "existing_server_default", "modify_comment": "existing_comment",
           "modify_nullable": "existing_nullable"}
    return [ops.AlterColumnOp(op.table_name, op.column_name, **{
        **common, **{k: v for k, v in when_run.items() if k != own.get(next(iter(change)))}}, **change)
            for change in changes]


def narrowed_length(old: Any, new: Any) -> int | None:
    """The new length when a string column gets shorter (``Text`` -> ``String(n)`` too), else None."""
    if isinstance(new, sa.String) and new.length and isinstance(old, sa.String) \
            and (old.length is None or old.length > new.length):
        return new.length
    return None
