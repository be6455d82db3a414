"""The autogenerate split: one ``alembic revision --autogenerate -m MSG`` → an expand
script and a contract script (``directives.process_revision_directives`` writes what the
``Planner`` here decides).

Each op autogenerate found is described to the knowledge base
(``classify.describe`` → ``policy.phase_of``) and placed:

* expand: new tables, nullable columns (a NOT NULL column without a server
  default is added nullable, backfilled, and made NOT NULL in contract), indexes
  (``CONCURRENTLY`` on PostgreSQL), foreign keys on existing tables (``NOT
  VALID`` on PostgreSQL, validated in contract, orphans found by a data migration),
  defaults, comments, dropping NOT NULL;
* contract: drops, SET NOT NULL (on PostgreSQL through a validated ``CHECK``,
  see ``render.SetNotNull``), other constraints on existing tables;
* a ``VARCHAR`` widening that no configured dialect copies the table for
  (``classify.in_place_everywhere``): one ``alter_column`` in expand;
* multi-step (type change, rename): expand adds the new column and sync triggers
  (``sync_triggers``: each release's writes reach the other's column), a data
  migration copies the rows written before, contract drops the triggers and then
  the old column.

Data migrations go to a stub module (``stubs``); the contract script lists them
in ``requires_data_migrations`` for the gate.  An empty phase writes no file.
A replaced column's indexes and unique constraints move to its copy (``replaced_indexes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from alembic.operations import ops
from alembic.util import CommandError

from migrations_policy.data import convert
from migrations_policy.policy import model as m
from migrations_policy.authoring import classify, enums, moves, render, replaced_indexes, stubs
from migrations_policy.window.sync_triggers import CreateSyncTriggerOp, DropSyncTriggerOp
from migrations_policy.authoring.render import Batch, Note

EXPAND, CONTRACT = "expand", "contract"


class SplitRefused(CommandError):
    """The split will not write a change (``Planner.refusals``): every reason, one a line.
    ``dbsync revision`` exits 1 with all of it; alembic's own CLI prints it as ``FAILED: ...``."""


@dataclass
class Plan:
    expand: list[ops.MigrateOperation] = field(default_factory=list)
    contract: list[ops.MigrateOperation] = field(default_factory=list)
    contract_tail: list[ops.MigrateOperation] = field(default_factory=list)  # table drops, last
    stubs: list[stubs.Stub] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.expand or self.contract or self.contract_tail)


@dataclass
class _TableWork:
    """Contract work on one existing table, emitted in a safe order."""

    drop_triggers: list = field(default_factory=list)  # sync triggers: before the columns they use go
    validate: list = field(default_factory=list)
    early: list = field(default_factory=list)  # a replaced column's unique guarantee: built before the old goes
    drop_constraints: list = field(default_factory=list)
    drop_indexes: list = field(default_factory=list)
    alters: list = field(default_factory=list)  # alter / drop column, inside batch_alter_table
    set_not_null: list = field(default_factory=list)
    after: list = field(default_factory=list)
    #: {old column: its copy} of the type changes on this table (``Planner._replace_column``)
    replaced: dict = field(default_factory=dict)

    def operations(self, table: str, schema: str | None) -> list:
        out = list(self.drop_triggers) + self.validate + self.set_not_null + self.early
        if self.drop_constraints:
            out.append(Batch(table, self.drop_constraints, schema))
        out.extend(self.drop_indexes)
        if self.alters:
            out.append(Batch(table, self.alters, schema))
        return out + self.after


class Planner:
    """Sorts the ops of one autogenerate run into a ``Plan``."""

    def __init__(self, metadata: Any = None, dialects: tuple[str, ...] = ("postgresql", "mysql"),
                 context: m.Context | None = None):
        self.plan = Plan()
        #: The configured dialects (``dialects`` setting): a widening is one ALTER only if none rewrites.
        self.dialects, self.context = tuple(dialects), context
        self.new_tables: set[str] = set()
        self.metadata = metadata
        #: Changes the split will not write, one line each (``process_revision_directives`` refuses).
        self.refusals: list[str] = []

    # -- entry ------------------------------------------------------------
    def run(self, upgrade_ops: ops.UpgradeOps) -> Plan:
        created: dict[str, sa.Table | None] = {}
        for op in upgrade_ops.ops:
            if isinstance(op, ops.CreateTableOp):
                self.new_tables.add(op.table_name)
                created[op.table_name] = op.to_table()
        for op in upgrade_ops.ops:
            if isinstance(op, ops.ModifyTableOps):
                self._table(op)
            elif isinstance(op, enums.EnumValuesOp):
                if op.removed:
                    self.refusals.append(enums.refusal(op))
                else:
                    self.plan.expand.append(render.AddEnumValues(enums.add_value_statements(op), op.name))
            elif isinstance(op, ops.DropTableOp):
                self.plan.stubs.append(moves.table_stub(op, created))  # its data: moved, or let go
                self.plan.contract_tail.append(op)
            else:
                self._place(op, classify.describe(op), None)
        self._backfills_yield_to_copies()
        self._sync_triggers_last()
        return self.plan

    def _backfills_yield_to_copies(self) -> None:
        """A column copied into (a rename, guessed or not) that also becomes NOT NULL gets two
        migrations writing it.  The backfill fills only what the copy leaves NULL (its source NULL
        too) and is listed after it: otherwise its value landed first on every row written before
        expand, the copy found nothing pending, and the sync trigger carried the value back into
        the old column, overwriting what the previous release wrote in both."""
        copies = {(s.table, s.column): s for s in self.plan.stubs if s.kind == stubs.COPY}
        for stub in self.plan.stubs:
            copy = copies.get((stub.table, stub.column))
            if stub.kind == stubs.BACKFILL and copy is not None:
                stub.source = copy.source
                stub.types.setdefault(copy.source, copy.types.get(copy.source))
        self.plan.stubs.sort(key=lambda s: s.kind == stubs.BACKFILL and (s.table, s.column) in copies)

    def _sync_triggers_last(self) -> None:
        """Expand creates the sync triggers after every other change: a SQLite table rebuild
        (``batch_alter_table``) drops the table's triggers with the old table."""
        sync = (CreateSyncTriggerOp, render.NarrowingSyncTrigger, render.ConvertingSyncTrigger)
        self.plan.expand.sort(key=lambda op: isinstance(op, sync))

    # -- helpers ------------------------------------------------------------
    def _place(self, op, operation: m.Operation, work: _TableWork | None) -> None:
        phase = classify.phase(operation)
        if phase in (m.EXPAND, m.ANY):
            self.plan.expand.append(op)
        elif work is not None:
            work.alters.append(op)
        else:
            self.plan.contract.append(op)

    def _model_table(self, table: str) -> sa.Table | None:
        """*table* in the target metadata (the models), None when unknown."""
        return self.metadata.tables.get(table) if self.metadata is not None else None

    def _key_of(self, table: str) -> str:
        found = self._model_table(table)
        if found is not None and len(found.primary_key.columns) == 1:
            return next(iter(found.primary_key.columns)).name
        return "id"

    def _model_column(self, table: str, column: str) -> sa.Column | None:
        found = self._model_table(table)
        return found.c.get(column) if found is not None else None

    def _not_null(self, table: str, columns: list[str]) -> bool:
        """Any of *columns* is NOT NULL in the models (unknown: False)."""
        return any(found is not None and not found.nullable
                   for found in (self._model_column(table, c) for c in columns))

    def _table(self, container: ops.ModifyTableOps) -> None:
        table, schema = container.table_name, container.schema
        new = table in self.new_tables
        work = _TableWork()
        added = [o for o in container.ops if isinstance(o, ops.AddColumnOp)]
        dropped = [o for o in container.ops if isinstance(o, ops.DropColumnOp)]
        # columns a copy replaces: their indexes and unique constraints move with them (below)
        replacing = set() if new else {part.column_name for op in container.ops if isinstance(op, ops.AlterColumnOp)
                                       for part in classify.single_aspects(op) if self._replaces(part)}
        moved_names: set[str] = set()
        dropped_indexes = {str(o.index_name) for o in container.ops if isinstance(o, ops.DropIndexOp)}
        for op in container.ops:
            if isinstance(op, ops.AlterColumnOp):
                parts = classify.single_aspects(op)
                copied = not new and any(self._replaces(part) for part in parts)
                for part in parts:
                    if copied and self._old_column_only(part):
                        continue  # contract drops the old column: its own contract steps are moot
                    self._alter(part, work)
            elif isinstance(op, ops.AddColumnOp):
                self._add_column(op, new, work)
            elif isinstance(op, ops.DropColumnOp):
                self._relax_before_drop(op.table_name, op.to_column(), op.schema)
                work.alters.append(op)
            elif isinstance(op, (ops.CreateIndexOp, ops.CreateUniqueConstraintOp)) and op.columns \
                    and replacing & {str(getattr(c, "name", c)) for c in op.columns}:
                moved_names.add(str(op.index_name if isinstance(op, ops.CreateIndexOp) else op.constraint_name))
            elif isinstance(op, ops.CreateIndexOp) and not new and str(op.index_name) in dropped_indexes:
                # redefined under its name (a guessed rename of one of its columns): the name is
                # taken until contract drops the old index
                work.after.append(render.ContractIndex(op, f"{op.index_name} is redefined: its name is taken until "
                                                            "the old index is dropped just above"))
            elif isinstance(op, ops.CreateIndexOp):
                self.plan.expand.append(op if new else render.OnlineIndex(op))
            elif isinstance(op, ops.DropIndexOp):
                work.drop_indexes.append(render.OnlineIndex(op))
            elif isinstance(op, ops.AddConstraintOp) and not new and not op.constraint_name:
                self._refuse_unnamed(table, op)
            elif isinstance(op, ops.CreateForeignKeyOp) and not new:
                self._foreign_key(op, work)
            elif isinstance(op, ops.CreateUniqueConstraintOp) and not new:
                self._unique(op, work)
            elif isinstance(op, ops.DropConstraintOp):
                work.drop_constraints.append(op)
            else:
                self._place(op, classify.describe(op, new_table=new), work)
        if not new:
            self._guess_renames(table, added, dropped, work)
        for old, new_column in work.replaced.items():
            found, refusals = replaced_indexes.moves(self._model_table(table), old, new_column, moved_names)
            self.refusals.extend(refusals)
            for item in found:
                self._move_index(table, schema, item, work)
        self.plan.contract.extend(work.operations(table, schema))

    def _move_index(self, table: str, schema: str | None, item: replaced_indexes.Moved, work: _TableWork) -> None:
        """An index or unique constraint of a replaced column, moved to its copy (``replaced_indexes``)."""
        unique = item.kind != replaced_indexes.INDEX
        if item.kind == replaced_indexes.UNIQUE:
            create = ops.CreateUniqueConstraintOp(item.new_name, table, item.new_columns, schema=schema)
            if item.old_name is not None:
                work.drop_constraints.append(ops.DropConstraintOp(
                    item.old_name, table, type_="unique", schema=schema,
                    _reverse=ops.CreateUniqueConstraintOp(item.old_name, table, item.old_columns, schema=schema)))
        else:
            create = ops.CreateIndexOp(item.new_name, table, item.new_columns, unique=unique, schema=schema)
            if item.old_name is not None:
                work.drop_indexes.append(render.OnlineIndex(ops.DropIndexOp(
                    item.old_name, table, schema=schema,
                    _reverse=ops.CreateIndexOp(item.old_name, table, item.old_columns, unique=unique, schema=schema))))
        if not unique and not item.collides:
            self.plan.expand.append(render.OnlineIndex(create))
        elif not unique:
            work.after.append(render.ContractIndex(create, f"{item.new_name} names the index on the old column "
                                                           "until it is dropped just above"))
        else:
            self._unique(create, work, early=not item.collides)

    # -- column changes -------------------------------------------------------
    def _add_column(self, op: ops.AddColumnOp, new: bool, work: _TableWork) -> None:
        column = op.column
        if new or column.nullable or column.server_default is not None:
            self.plan.expand.append(op)
            return
        # NOT NULL without a server default fails on a table with rows: add it
        # nullable now, backfill, set NOT NULL in contract.
        nullable = column._copy()
        nullable.nullable = True
        self.plan.expand.append(ops.AddColumnOp(op.table_name, nullable, schema=op.schema))
        self._set_not_null(ops.AlterColumnOp(op.table_name, column.name, schema=op.schema, modify_nullable=False,
                                             existing_type=column.type, existing_nullable=True), work)

    def _replaces(self, op: ops.AlterColumnOp) -> bool:
        """*op* (one aspect) is a type change ``_alter`` does with a copy (``_replace_column``)."""
        operation = classify.describe(op)
        if operation.kind == m.SET_NOT_NULL or op.modify_name is not None:
            return False
        if operation.kind == m.WIDEN_VARCHAR:
            return not classify.in_place_everywhere(operation, self.dialects, self.context)
        return classify.phase(operation) == m.MULTI_STEP

    def _old_column_only(self, op: ops.AlterColumnOp) -> bool:
        """*op* (an aspect of a column that a copy replaces) is a contract step of the old column (SET
        NOT NULL, DROP DEFAULT): placed in contract it ran after the old column's drop ('no such
        column'); the copy carries NOT NULL itself (``_replace_column``), and has no default."""
        operation = classify.describe(op)
        return not self._replaces(op) and (operation.kind == m.SET_NOT_NULL or classify.phase(operation) == m.CONTRACT)

    def _alter(self, op: ops.AlterColumnOp, work: _TableWork) -> None:
        operation = classify.describe(op)
        if operation.kind == m.SET_NOT_NULL:
            self._set_not_null(op, work)
        elif operation.kind == m.WIDEN_VARCHAR and not classify.in_place_everywhere(operation, self.dialects,
                                                                                    self.context):
            self._replace_column(op, work)  # a copy on some dialect: the three-step route
        elif operation.kind == m.WIDEN_VARCHAR:
            self.plan.expand.append(Note(f"{op.table_name}.{op.column_name} widens to {op.modify_type!r}: "
                                         "metadata only on every configured\ndialect (PostgreSQL: catalog only; "
                                         "MariaDB/MySQL: INPLACE), so one ALTER in expand."))
            self.plan.expand.append(render.OnlineAlter(op))
        elif classify.phase(operation) == m.MULTI_STEP:
            self._replace_column(op, work)
        elif classify.phase(operation) in (m.EXPAND, m.ANY):
            self.plan.expand.append(render.OnlineAlter(op))
        else:
            work.alters.append(op)

    def _refuse_unnamed(self, table: str, op: ops.AddConstraintOp) -> None:
        kind = {"foreignkey": "foreign key", "unique": "unique constraint", "check": "check constraint"}.get(
            op.constraint_type, "constraint")
        self.refusals.append(
            f"{table}: the new {kind} has no name (the metadata has no naming_convention): name it, or set "
            "MetaData(naming_convention=...), so that contract can validate it and downgrade can drop it")

    def _relax_before_drop(self, table: str, column: sa.Column, schema: str | None) -> None:
        """A NOT NULL column without a default that contract drops: the new release no longer
        writes it, so its inserts would fail during the rollout.  Expand relaxes it."""
        if column.nullable or column.server_default is not None:
            return
        self.plan.expand.append(Note(f"{table}.{column.name} is dropped in contract: the new release no longer "
                                     "writes it, so it\nmust accept NULL during the rollout."))
        self.plan.expand.append(render.OnlineAlter(ops.AlterColumnOp(
            table, column.name, schema=schema, modify_nullable=True, existing_type=column.type,
            existing_nullable=False)))

    def _set_not_null(self, op: ops.AlterColumnOp, work: _TableWork) -> None:
        """Data: backfill NULLs; contract: SET NOT NULL (``render.SetNotNull``)."""
        table, column = op.table_name, op.column_name
        name = stubs.migration_name(table, column, "not_null")
        self.plan.stubs.append(stubs.Stub(stubs.BACKFILL, name, table, self._key_of(table), column,
                                          types={column: op.existing_type}))
        alter = ops.AlterColumnOp(table, column, schema=op.schema, modify_nullable=False,
                                  existing_type=op.existing_type, existing_server_default=op.existing_server_default,
                                  existing_nullable=True)
        work.set_not_null.append(Note(f"{table}.{column} becomes NOT NULL: the {name!r} data migration\n"
                                      "fills existing NULLs first (FILL IN its value)."))
        work.set_not_null.append(render.SetNotNull(alter, stubs.migration_name("ck", table, column, "not_null")[:63]))

    def _replace_column(self, op: ops.AlterColumnOp, work: _TableWork) -> None:
        """Type change or rename: new column in expand, copy, drop the old one in contract."""
        table, old = op.table_name, op.column_name
        model = self._model_column(table, op.modify_name or old)
        if model is not None and model.primary_key:
            self.refusals.append(
                f"{table}.{old} is in the primary key: the split does not change a key column's type or name "
                "(it would leave the table without its key); do it by hand: a new key column filled by "
                "triggers, a unique index built concurrently, the key swapped in contract "
                "(docs/authoring.rst, 'Primary key columns')")
            return
        if op.modify_name is not None:
            new_name, new_type, what = op.modify_name, op.existing_type, "renamed"
        else:
            new_name, new_type, what = f"{old}_new", op.modify_type, "changes type"
        name = stubs.migration_name(table, new_name, "from", old)
        required = not model.nullable if model is not None else op.existing_nullable is False
        not_null = f", and makes {new_name!r} NOT NULL" if required else ""
        self.plan.expand.append(Note(
            f"{table}.{old} {what}: a column cannot change while old code runs.  This adds\n"
            f"{new_name!r} ({new_type!r}) and sync triggers: what the previous release writes to\n"
            f"{old!r} reaches {new_name!r}, and what this release writes to {new_name!r} reaches\n"
            f"{old!r} (give up=/down= expressions if a plain copy is not the conversion).  So\n"
            f"this release may map {new_name!r} only.  FILL IN: map it in your model under the\n"
            f"same attribute (mapped_column({new_name!r}, ...) or sa.Column({new_name!r}, ...,\n"
            f"key={old!r})), or rename {new_name!r} here, in the triggers and in the data migration;\n"
            f"review the {name!r} data migration, which copies the rows written before the\n"
            f"triggers existed.  Contract drops the triggers, then {old!r}{not_null}.  The column\n"
            f"stays {new_name!r}: back to {old!r} is a rename, another expand/contract cycle."))
        self.plan.expand.append(ops.AddColumnOp(table, sa.Column(new_name, new_type, nullable=True),
                                                schema=op.schema))
        self._synced_copy(table, old, new_name, op.existing_type, new_type, work,
                          stubs.Stub(stubs.COPY, name, table, self._key_of(table), new_name, source=old))
        old_column = sa.Column(old, op.existing_type, nullable=op.existing_nullable is not False,
                               server_default=op.existing_server_default or None)
        self._relax_before_drop(table, old_column, op.schema)
        if required:  # the copy fills it (the gate counts any NULL left before contract runs)
            work.set_not_null.append(render.SetNotNull(
                ops.AlterColumnOp(table, new_name, schema=op.schema, modify_nullable=False, existing_type=new_type,
                                  existing_nullable=True),
                stubs.migration_name("ck", table, new_name, "not_null")[:63]))
        work.alters.append(ops.DropColumnOp.from_column_and_tablename(op.schema, table, old_column))
        if op.modify_name is None:
            work.replaced[old] = new_name

    def _synced_copy(self, table: str, old: str, new: str, old_type: Any, new_type: Any, work: _TableWork,
                     stub: stubs.Stub) -> None:
        """The sync triggers and the copy of one pair, whatever made it (a type change, a rename, a
        guessed rename): one judgement of the copy's guard.  A value the new column cannot hold (a
        longer string, an integer out of its range, text that is no integer) is never copied: it
        would fail the previous release's write (PostgreSQL, strict MariaDB), or be kept too long or
        coerced (SQLite).  The triggers leave the new column NULL, the copy leaves its row pending,
        the runner reports it as stuck and the gate refuses contract until someone fixes the value."""
        stub.types = {old: old_type, new: new_type, **stub.types}
        narrowed = classify.narrowed_length(old_type, new_type)
        if narrowed is not None:
            self.plan.expand.append(Note(
                f"NARROWING {table}.{old} to {narrowed} characters in {new!r}: a longer value is not copied\n"
                f"(the triggers leave {new!r} NULL, the data migration reports the row as stuck and the\n"
                "gate refuses contract) until you shorten it.  MariaDB's length() counts bytes."))
            trigger = render.NarrowingSyncTrigger(table, old, new, narrowed)
            stub.max_length = narrowed
        elif convert.needs_guard(old_type, new_type):
            source, target = stubs.generic_source(old_type), stubs.generic_source(new_type)
            if not (source and target):
                self.refusals.append(f"{table}.{old} -> {new}: a value of {old_type!r} may not fit {new_type!r}, and "
                                     "the split cannot write the guard for these types: write the copy by hand")
                return
            self.plan.expand.append(Note(
                f"CONVERSION {table}.{old} -> {new_type!r}: a value the new type cannot hold is not\n"
                f"copied (the triggers leave {new!r} NULL, the data migration reports the row\n"
                "as stuck and the gate refuses contract) until you fix it; old code's writes never fail."))
            trigger = render.ConvertingSyncTrigger(table, old, new, source, target)
            stub.conversion = target
            stub.types[old] = stubs.generic_type(old_type)  # declared: the guard reads an integer as one
        else:
            if not convert.always_holds(old_type, new_type):  # no guard known: refuses until written
                self.plan.expand.insert(0, render.UncheckedConversionRefusal(table, old, new, old_type, new_type))
            # the rule recorded: the split adds the new column without a server default
            trigger = CreateSyncTriggerOp(table, old, new, new_has_default=False)
        self.plan.expand.append(trigger)
        work.drop_triggers.append(DropSyncTriggerOp(table, old, new, recreate=trigger))
        self.plan.stubs.append(stub)

    def _guess_renames(self, table: str, added: list, dropped: list, work: _TableWork) -> None:
        """A dropped and an added column of the same kind of type, each the only one on the table,
        may be a rename (``moves.guessed_renames``): a copy stub and sync triggers, both marked
        GUESSED (the new release writes only the new column, and without the triggers the copy
        would take that for old code's divergence and overwrite it).  A guess fails closed: the
        expand script raises ``GuessedRename`` first in ``upgrade()`` until the developer deletes
        that line (confirmed) or the pair (not a rename).  Every other dropped column
        gets a move stub that fails closed (``moves.column_stub``): nothing drops data silently."""
        paired = moves.guessed_renames(added, dropped)
        for drop, add in paired:
            old = drop.to_column()
            name = stubs.migration_name(table, add.column.name, "from", old.name)
            # a guess does not run before someone confirms it: first in expand, nothing applied before
            self.plan.expand.insert(0, render.GuessedRenameRefusal(table, old.name, add.column.name, name))
            self._synced_copy(table, old.name, add.column.name, old.type, add.column.type, work,
                              stubs.Stub(stubs.COPY, name, table, self._key_of(table), add.column.name,
                                         source=old.name, guessed=True))
        moved = {id(drop) for drop, _ in paired}
        free = [a for a in added if all(a is not add for _, add in paired)]
        for drop in dropped:
            if id(drop) not in moved:
                self.plan.stubs.append(moves.column_stub(table, self._key_of(table), drop.to_column(), free,
                                                         self.new_tables))

    def _unique(self, op: ops.CreateUniqueConstraintOp | ops.CreateIndexOp, work: _TableWork,
                early: bool = False) -> None:
        """Contract adds it (safe form); a data migration counts the rows that violate it first.
        *early*: before contract's drops (a replaced column's guarantee, built before the old one goes)."""
        constraint = op.constraint_name if isinstance(op, ops.CreateUniqueConstraintOp) else op.index_name
        name = stubs.migration_name(op.table_name, str(constraint), "duplicates")
        columns = [str(c) for c in op.columns]
        self.plan.stubs.append(stubs.Stub(stubs.DUPLICATES, name, op.table_name, self._key_of(op.table_name),
                                          columns[0], child_columns=columns))
        if isinstance(op, ops.CreateIndexOp):
            made = render.ContractIndex(op, f"a unique index built once the {name!r} data migration finds no "
                                            "duplicate (in expand it would fail the previous release's writes)")
        else:
            made = render.OnlineUniqueConstraint(op)
        (work.early if early else work.after).append(made)

    def _foreign_key(self, op: ops.CreateForeignKeyOp, work: _TableWork) -> None:
        name = stubs.migration_name(op.source_table, op.constraint_name or "fk", "orphans")
        self.plan.expand.append(render.NotValidForeignKey(op, name))
        self.plan.stubs.append(stubs.Stub(
            stubs.ORPHANS, name, op.source_table, self._key_of(op.source_table), op.local_cols[0],
            parent_table=op.referent_table, parent_columns=list(op.remote_cols),
            child_columns=list(op.local_cols), required=self._not_null(op.source_table, op.local_cols)))
        if op.constraint_name:
            work.validate.append(render.ValidateConstraint(op.source_table, op.constraint_name))
            work.after.append(render.SqliteRebuildForeignKey(op))
