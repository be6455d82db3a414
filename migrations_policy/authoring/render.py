"""Operations the autogenerate split emits beyond alembic's own, and how they render.

Each class wraps stock alembic ops and renders them as the online form of the
change, branching on ``op.get_context().dialect.name`` so one script is right
on PostgreSQL, MySQL/MariaDB and SQLite:

* ``OnlineIndex`` (create or drop): ``CONCURRENTLY`` inside an
  autocommit block on PostgreSQL, plain elsewhere (MariaDB builds indexes online);
* ``NotValidForeignKey``: ``NOT VALID`` on PostgreSQL; ``foreign_key_checks=0``
  on MySQL (a checked ADD FOREIGN KEY copies the table); none on SQLite (no ALTER
  TABLE ADD CONSTRAINT there); existing rows are checked by a data migration;
* ``SetNotNull``: contract's SET NOT NULL, on PostgreSQL through a validated
  ``CHECK (col IS NOT NULL)`` so that no step holds an exclusive lock for a scan;
* ``ValidateConstraint``: ``VALIDATE CONSTRAINT`` on PostgreSQL (in contract);
* ``Batch``: ops inside ``op.batch_alter_table`` (SQLite rebuilds, others ALTER);
* ``Note``: comment lines telling the developer what to fill in;
* ``sync_triggers.CreateSyncTriggerOp`` / ``DropSyncTriggerOp``: ``op.create_sync_trigger``
  in expand and ``op.drop_sync_trigger`` in contract (their module is imported by the
  script, which registers the operations).

Every op has ``reverse()`` so the downgrade of each script is generated too.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from alembic.autogenerate import renderers
from alembic.autogenerate.render import render_op
from alembic.operations import ops
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import TypeEngine

from migrations_policy.window.sync_triggers import CreateSyncTriggerOp, DropSyncTriggerOp

#: The import a script using ``ConvertingSyncTrigger`` needs.
CONVERT_IMPORT = "from migrations_policy.data.convert import converted"
#: The import a script using the sync-trigger operations needs (it registers them).
SYNC_TRIGGERS_IMPORT = "import migrations_policy.window.sync_triggers  # noqa: F401  (registers op.create_sync_trigger)"

_PG = 'if op.get_context().dialect.name == "postgresql":'
_MYSQL = 'if op.get_context().dialect.name == "mysql":'
_NOT_PG = 'if op.get_context().dialect.name != "postgresql":'
END = ""  # a blank line closes one indentation level (mako's PythonPrinter)
DEDENT = None  # closes one level without a blank line ("else:" / "elif" close one themselves)


def _render(autogen_context, op: ops.MigrateOperation) -> list[str]:
    return render_op(autogen_context, op)


def _with_kw(op: ops.MigrateOperation, **kw) -> ops.MigrateOperation:
    """A shallow copy of *op* with extra dialect keyword arguments."""
    clone = object.__new__(type(op))
    clone.__dict__.update(op.__dict__)
    clone.kw = {**getattr(op, "kw", {}), **kw}
    return clone


class PolicyOp(ops.MigrateOperation):
    """Base class: ``phase_kind`` names the knowledge-base kind of what is emitted."""

    def reverse(self) -> ops.MigrateOperation | None:
        return None

    def to_diff_tuple(self):
        return ()


class Note(PolicyOp):
    def __init__(self, text: str):
        self.text = text


class OnlineIndex(PolicyOp):
    """Create or drop an index: ``CONCURRENTLY`` in an autocommit block on PostgreSQL."""

    def __init__(self, inner: ops.CreateIndexOp | ops.DropIndexOp):
        self.inner = inner

    def reverse(self):
        return OnlineIndex(self.inner.reverse())


class ContractIndex(OnlineIndex):
    """Contract: an index built there on purpose (``OnlineIndex``, with the linter's MP120 waived
    for *reason*): its name is taken until contract drops the index that holds it."""

    def __init__(self, inner: ops.CreateIndexOp, reason: str):
        super().__init__(inner)
        self.reason = reason

    def reverse(self):
        return OnlineIndex(self.inner.reverse())


class NotValidForeignKey(PolicyOp):
    def __init__(self, create: ops.CreateForeignKeyOp, data_migration: str):
        self.create = create
        self.data_migration = data_migration

    def reverse(self):
        return DropForeignKeyWhereAdded(self.create.constraint_name, self.create.source_table)


class SqliteRebuildForeignKey(PolicyOp):
    """Contract, SQLite only: add the foreign key by rebuilding the table (batch "move and copy")."""

    def __init__(self, create: ops.CreateForeignKeyOp):
        self.create = create

    def reverse(self):
        return SqliteDropForeignKey(self.create)


class SqliteDropForeignKey(SqliteRebuildForeignKey):
    def reverse(self):
        return SqliteRebuildForeignKey(self.create)


class DropForeignKeyWhereAdded(PolicyOp):
    """Downgrade of ``NotValidForeignKey``: the constraint exists on PostgreSQL and MySQL only."""

    def __init__(self, name: str, table: str):
        self.name, self.table = name, table


class SetNotNull(PolicyOp):
    """Contract: SET NOT NULL without a long exclusive lock.

    PostgreSQL, each step in its own transaction: ``CHECK (col IS NOT NULL) NOT
    VALID`` (brief lock), ``VALIDATE`` (scans, writes go on), ``SET NOT NULL``
    (skips the scan: the validated check proves it), drop the check.  The check
    is not added in expand: PostgreSQL enforces a NOT VALID check on every later
    INSERT and UPDATE, so old code writing a row whose column is still NULL
    would fail.  Elsewhere: ``alter_column`` in ``batch_alter_table``.
    """

    def __init__(self, alter: ops.AlterColumnOp, check_name: str):
        self.alter, self.check_name = alter, check_name

    def reverse(self):
        return Batch(self.alter.table_name, [self.alter.reverse()], self.alter.schema)


class OnlineAlter(PolicyOp):
    """Expand: an ``alter_column`` that is an ALTER on PostgreSQL and MySQL/MariaDB (drop NOT
    NULL, a server default) but that SQLite can do only by rebuilding the table."""

    def __init__(self, alter: ops.AlterColumnOp):
        self.alter = alter

    def reverse(self):  # downgrade is not linted: no ignore comment that would be unused there
        return Batch(self.alter.table_name, [self.alter.reverse()], self.alter.schema)


class OnlineUniqueConstraint(PolicyOp):
    """Contract: a unique constraint on an existing table.  PostgreSQL: the unique index
    built ``CONCURRENTLY`` (writes go on), then ``ADD CONSTRAINT ... UNIQUE USING INDEX``
    (a brief lock); elsewhere ``create_unique_constraint`` (MariaDB builds it online,
    SQLite rebuilds the table)."""

    def __init__(self, create: ops.CreateUniqueConstraintOp):
        self.create = create

    def reverse(self):
        return Batch(self.create.table_name, [self.create.reverse()], self.create.schema)


class GuessedRenameRefusal(PolicyOp):
    """Expand, first: the refusal of an unconfirmed GUESSED rename (``sync_triggers.GuessedRename``),
    which the developer deletes to confirm it."""

    def __init__(self, table: str, old: str, new: str, data_migration: str):
        self.table, self.old, self.new, self.data_migration = table, old, new, data_migration


class UncheckedConversionRefusal(PolicyOp):
    """Expand, first: a type change the split cannot guard (``sync_triggers.UncheckedConversion``)
    refuses to run until the developer writes the conversion and deletes the line."""

    def __init__(self, table: str, old: str, new: str, old_type: Any, new_type: Any):
        self.table, self.old, self.new, self.old_type, self.new_type = table, old, new, old_type, new_type


class NarrowingSyncTrigger(PolicyOp):
    """Expand: ``op.create_sync_trigger`` whose ``up`` copies only values that fit *length*
    (a longer one leaves the new column NULL instead of failing the old release's write)."""

    def __init__(self, table: str, old: str, new: str, length: int):
        self.table, self.old, self.new, self.length = table, old, new, length

    def reverse(self):
        return DropSyncTriggerOp(self.table, self.old, self.new, False)


class ConvertingSyncTrigger(PolicyOp):
    """Expand: ``op.create_sync_trigger`` whose ``up`` converts only values the new type holds
    (``data.convert.converted``): one it cannot hold leaves the new column NULL (its row pending
    for the data migration) instead of failing, or being coerced in, the old release's write."""

    def __init__(self, table: str, old: str, new: str, old_type: str, new_type: str):
        self.table, self.old, self.new, self.old_type, self.new_type = table, old, new, old_type, new_type

    def reverse(self):
        return DropSyncTriggerOp(self.table, self.old, self.new)


class AddEnumValues(PolicyOp):
    """Expand, PostgreSQL: the values added to a native enum type (``enums.EnumValuesOp``)."""

    def __init__(self, statements: list[str], name: str):
        self.statements, self.name = statements, name


class ValidateConstraint(PolicyOp):
    def __init__(self, table: str, name: str):
        self.table, self.name = table, name


class Batch(PolicyOp):
    def __init__(self, table: str, operations: Sequence[ops.MigrateOperation], schema: str | None = None):
        self.table, self.operations, self.schema = table, list(operations), schema

    def reverse(self):
        return Batch(self.table, [o.reverse() for o in reversed(self.operations)], self.schema)


def quote_pg(name: str) -> str:
    return postgresql.dialect().identifier_preparer.quote(name)


# -- renderers ------------------------------------------------------------------
@renderers.dispatch_for(Note)
def _note(autogen_context, op: Note) -> list[str]:
    return [f"# {line}".rstrip() for line in op.text.splitlines()]


@renderers.dispatch_for(CreateSyncTriggerOp)
def _create_sync_trigger(autogen_context, op: CreateSyncTriggerOp) -> list[str]:
    pair = op.pair
    recorded = "" if op.new_has_default is None else f", new_has_default={op.new_has_default}"
    return [f"op.create_sync_trigger({pair.table!r}, old={pair.old!r}, new={pair.new!r}{recorded})"]


@renderers.dispatch_for(DropSyncTriggerOp)
def _drop_sync_trigger(autogen_context, op: DropSyncTriggerOp) -> list[str]:
    pair = op.pair
    return [f"op.drop_sync_trigger({pair.table!r}, old={pair.old!r}, new={pair.new!r})"]


@renderers.dispatch_for(OnlineUniqueConstraint)
def _online_unique(autogen_context, op: OnlineUniqueConstraint) -> list[str]:
    create = op.create
    index = ops.CreateIndexOp(create.constraint_name, create.table_name, list(create.columns), unique=True,
                              schema=create.schema)
    attach = (f"ALTER TABLE {quote_pg(create.table_name)} ADD CONSTRAINT {quote_pg(create.constraint_name)} "
              f"UNIQUE USING INDEX {quote_pg(create.constraint_name)}")
    return [
        _PG,
        "# the unique index without blocking writes, then the constraint made from it (a brief lock)",
        "with op.get_context().autocommit_block():",
        "# migrations-policy: ignore[MP120] the constraint's own index: in expand it would already enforce "
        "uniqueness on the previous release's writes",
        *_render(autogen_context, _with_kw(index, postgresql_concurrently=True)),
        DEDENT,
        f"op.execute(sa.text({attach!r}))",
        DEDENT,
        "else:",
        *_batch(autogen_context, Batch(create.table_name, [create], create.schema)),
        END,
    ]


@renderers.dispatch_for(GuessedRenameRefusal)
def _guessed_rename_refusal(autogen_context, op: GuessedRenameRefusal) -> list[str]:
    return [
        f"# GUESSED: {op.table}.{op.old} -> {op.new} looks like a rename (a dropped and an added column of a",
        "# similar type), which autogenerate cannot tell from two unrelated changes.  CONFIRM it: delete",
        "# the next line.  If it is not a rename, delete it too, the sync triggers of the pair below and",
        f"# in the contract script, and the {op.data_migration!r} data migration (contract then drops",
        f"# {op.old!r}: move its data or record drops_data).  Until then this script refuses to run.",
        f"raise migrations_policy.window.sync_triggers.GuessedRename({op.table!r}, {op.old!r}, {op.new!r})",
    ]


@renderers.dispatch_for(UncheckedConversionRefusal)
def _unchecked_conversion_refusal(autogen_context, op: UncheckedConversionRefusal) -> list[str]:
    return [
        f"# UNCHECKED CONVERSION {op.table}.{op.old} ({op.old_type!r}) -> {op.new} ({op.new_type!r}): a plain",
        "# copy may fail the previous release's writes (a value the new type cannot hold) or change a value,",
        "# and the split knows no guard for these types.  FILL IN: give create_sync_trigger below an up= that",
        "# leaves a value that does not convert NULL (see migrations_policy.data.convert), the copy data",
        "# migration the same guard, then delete the next line.  Until then this script refuses to run.",
        f"raise migrations_policy.window.sync_triggers.UncheckedConversion({op.table!r}, {op.old!r}, {op.new!r})",
    ]


@renderers.dispatch_for(NarrowingSyncTrigger)
def _narrowing_sync_trigger(autogen_context, op: NarrowingSyncTrigger) -> list[str]:
    old = f"sa.column({op.old!r}, sa.String())"
    return [f"op.create_sync_trigger({op.table!r}, old={op.old!r}, new={op.new!r},",
            f"                       up=sa.case((sa.func.length({old}) <= {op.length}, {old})),",
            "                       new_has_default=False)"]


@renderers.dispatch_for(ConvertingSyncTrigger)
def _converting_sync_trigger(autogen_context, op: ConvertingSyncTrigger) -> list[str]:
    autogen_context.imports.add(CONVERT_IMPORT)
    return [f"op.create_sync_trigger({op.table!r}, old={op.old!r}, new={op.new!r},",
            f"                       up=converted(sa.column({op.old!r}, {op.old_type}), {op.new_type}),",
            "                       new_has_default=False)"]


@renderers.dispatch_for(AddEnumValues)
def _add_enum_values(autogen_context, op: AddEnumValues) -> list[str]:
    # sa.text: a ':' in a value would read as a bind parameter
    return [
        _PG,
        f"# the new value(s) of enum type {op.name!r}: each ALTER TYPE commits on its own (a value",
        "# added in a transaction cannot be used before it commits); PostgreSQL drops no enum value",
        "with op.get_context().autocommit_block():",
        *[f"op.execute(sa.text({text.replace(':', chr(92) + ':')!r}))" for text in op.statements],
        DEDENT,
        END,
    ]


@renderers.dispatch_for(OnlineIndex)
def _online_index(autogen_context, op: OnlineIndex) -> list[str]:
    return [
        _PG,
        "with op.get_context().autocommit_block():",
        *_render(autogen_context, _with_kw(op.inner, postgresql_concurrently=True)),
        DEDENT,
        "else:",
        *_render(autogen_context, op.inner),
        END,
    ]


@renderers.dispatch_for(ContractIndex)
def _contract_index(autogen_context, op: ContractIndex) -> list[str]:
    waived = f"# migrations-policy: ignore[MP120] {op.reason}"
    return [
        _PG,
        "with op.get_context().autocommit_block():",
        waived,
        *_render(autogen_context, _with_kw(op.inner, postgresql_concurrently=True)),
        DEDENT,
        "else:",
        waived,
        *_render(autogen_context, op.inner),
        END,
    ]


@renderers.dispatch_for(NotValidForeignKey)
def _not_valid_fk(autogen_context, op: NotValidForeignKey) -> list[str]:
    return [
        f"# Existing rows are not checked here: the {op.data_migration!r} data migration",
        "# finds them, and contract validates the constraint (SQLite: contract adds it, as",
        "# SQLite can add a constraint to an existing table only by rebuilding the table).",
        _PG,
        *_render(autogen_context, _with_kw(op.create, postgresql_not_valid=True)),
        "elif op.get_context().dialect.name == \"mysql\":",
        "# with checks on, MySQL/MariaDB copy the whole table to add the key",
        'op.execute("SET foreign_key_checks = 0")',
        f"# migrations-policy: ignore[MP142] orphans checked by data migration {op.data_migration}",
        *_render(autogen_context, op.create),
        'op.execute("SET foreign_key_checks = 1")',
        END,
    ]


@renderers.dispatch_for(SqliteRebuildForeignKey)
def _sqlite_rebuild_fk(autogen_context, op: SqliteRebuildForeignKey) -> list[str]:
    create = op.create
    inner = (ops.DropConstraintOp(create.constraint_name, create.source_table, type_="foreignkey")
             if isinstance(op, SqliteDropForeignKey) else create)
    return [
        'if op.get_context().dialect.name == "sqlite":',
        "# SQLite adds or drops a constraint only by rebuilding the table (under its write lock)",
        *_batch(autogen_context, Batch(create.source_table, [inner], create.kw.get("source_schema"))),
        END,
    ]


@renderers.dispatch_for(DropForeignKeyWhereAdded)
def _drop_fk_where_added(autogen_context, op: DropForeignKeyWhereAdded) -> list[str]:
    return [
        'if op.get_context().dialect.name in ("postgresql", "mysql"):',
        f"op.drop_constraint(op.f({str(op.name)!r}), {op.table!r}, type_='foreignkey')",
        END,
    ]


@renderers.dispatch_for(SetNotNull)
def _set_not_null(autogen_context, op: SetNotNull) -> list[str]:
    table, column, check = op.alter.table_name, op.alter.column_name, op.check_name
    validate = f"ALTER TABLE {quote_pg(table)} VALIDATE CONSTRAINT {quote_pg(check)}"
    return [
        _PG,
        "# one transaction per step: VALIDATE scans without blocking writes, SET NOT NULL then skips the scan",
        "with op.get_context().autocommit_block():",
        # op.f(): the name is final, the metadata's naming convention must not apply to it again
        f"op.create_check_constraint(op.f({check!r}), {table!r}, sa.column({column!r}).is_not(None), "
        "postgresql_not_valid=True)",
        f"op.execute(sa.text({validate!r}))",
        *_render(autogen_context, op.alter),
        f"op.drop_constraint(op.f({check!r}), {table!r}, type_='check')",
        DEDENT,
        "else:",
        *_batch(autogen_context, Batch(table, [op.alter], op.alter.schema)),
        END,
    ]


@renderers.dispatch_for(OnlineAlter)
def _online_alter(autogen_context, op: OnlineAlter) -> list[str]:
    return [
        'if op.get_context().dialect.name == "sqlite":',
        "# SQLite changes a column only by rebuilding its table (under the database's write lock)",
        "# migrations-policy: ignore[MP151] SQLite has no ALTER COLUMN; the rebuild is the only route",
        *_batch(autogen_context, Batch(op.alter.table_name, [op.alter], op.alter.schema)),
        "else:",
        *_render(autogen_context, op.alter),
        END,
    ]


@renderers.dispatch_for(ValidateConstraint)
def _validate(autogen_context, op: ValidateConstraint) -> list[str]:
    sql = f"ALTER TABLE {quote_pg(op.table)} VALIDATE CONSTRAINT {quote_pg(op.name)}"
    return [_PG, f"op.execute(sa.text({sql!r}))", END]


@renderers.dispatch_for(Batch)
def _batch(autogen_context, op: Batch) -> list[str]:
    lines = [f"with op.batch_alter_table({op.table!r}, schema={op.schema!r}) as batch_op:"]
    with autogen_context._within_batch():
        for inner in op.operations:
            lines.extend(_render(autogen_context, inner))
    lines.append(END)
    return lines


# -- imports ----------------------------------------------------------------------
def _types_in(value: Any, seen: set[int]) -> Iterator[TypeEngine]:
    """Every SQLAlchemy type an op (and the ops, columns and tables it holds) carries."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, TypeEngine):
        yield value
        for variant in getattr(value, "_variant_mapping", {}).values():
            yield from _types_in(variant, seen)
        for inner in vars(value).values():
            if isinstance(inner, (TypeEngine, type)):
                yield from _types_in(inner() if isinstance(inner, type) and issubclass(inner, TypeEngine)
                                     else inner, seen)
    elif isinstance(value, sa.Column):
        yield from _types_in(value.type, seen)
    elif isinstance(value, sa.Table):
        for column in value.columns:
            yield from _types_in(column.type, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _types_in(item, seen)
    elif isinstance(value, ops.MigrateOperation):
        for item in vars(value).values():
            yield from _types_in(item, seen)


def type_imports(operations: Sequence[ops.MigrateOperation]) -> set[str]:
    """``from sqlalchemy import Text`` lines for the names the scripts render unqualified.

    alembic renders a dialect type the running dialect's impl does not know (PostgreSQL's JSONB
    in ``JSON().with_variant(JSONB())`` generated against MariaDB or SQLite) by its ``repr``, whose
    arguments name SQLAlchemy types bare (``JSONB(astext_type=Text())``): the script would raise
    NameError.  So each bare name such a ``repr`` uses that ``sqlalchemy`` exports is imported."""
    names: set[str] = set()
    for type_ in _types_in(list(operations), set()):
        if type(type_).__module__.startswith("sqlalchemy.dialects."):
            names.update(n for n in re.findall(r"(?<![\w.])([A-Z]\w*)\(", repr(type_))
                         if isinstance(getattr(sa, n, None), type) and issubclass(getattr(sa, n), TypeEngine))
    return {f"from sqlalchemy import {name}  # noqa: F401  (rendered bare in a dialect type)" for name in sorted(names)}
