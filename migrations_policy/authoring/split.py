"""The autogenerate split: one ``alembic revision --autogenerate -m MSG`` → an expand
script and a contract script (``process_revision_directives``).

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
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.operations import ops
from alembic.util import CommandError
from alembic.util import rev_id as new_rev_id

from migrations_policy.data import convert
from migrations_policy.policy import model as m
from migrations_policy.authoring import classify, enums, moves, render, stubs
from migrations_policy.window.sync_triggers import CreateSyncTriggerOp, DropSyncTriggerOp
from migrations_policy.authoring.render import SYNC_TRIGGERS_IMPORT, Batch, Note

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
    drop_constraints: list = field(default_factory=list)
    drop_indexes: list = field(default_factory=list)
    alters: list = field(default_factory=list)  # alter / drop column, inside batch_alter_table
    set_not_null: list = field(default_factory=list)
    after: list = field(default_factory=list)

    def operations(self, table: str, schema: str | None) -> list:
        out = list(self.drop_triggers) + self.validate + self.set_not_null
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
        for op in container.ops:
            if isinstance(op, ops.AlterColumnOp):
                for part in classify.single_aspects(op):
                    self._alter(part, work)
            elif isinstance(op, ops.AddColumnOp):
                self._add_column(op, new, work)
            elif isinstance(op, ops.DropColumnOp):
                self._relax_before_drop(op.table_name, op.to_column(), op.schema)
                work.alters.append(op)
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
        self.plan.contract.extend(work.operations(table, schema))

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
        narrowed = classify.narrowed_length(op.existing_type, new_type)
        if narrowed is not None:
            self.plan.expand.append(Note(
                f"NARROWING {table}.{old} to {narrowed} characters: a longer value is not copied (the\n"
                f"triggers leave {new_name!r} NULL, the data migration reports the row as stuck and the\n"
                "gate refuses contract) until you shorten it.  MariaDB's length() counts bytes."))
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
        conversion = convert.needs_guard(op.existing_type, new_type) and bool(stubs.generic_source(new_type))
        if narrowed is not None:
            self.plan.expand.append(render.NarrowingSyncTrigger(table, old, new_name, narrowed))
        elif conversion:
            self.plan.expand.append(Note(
                f"CONVERSION {table}.{old} -> {new_type!r}: a value the new type cannot hold is not\n"
                f"copied (the triggers leave {new_name!r} NULL, the data migration reports the row\n"
                "as stuck and the gate refuses contract) until you fix it; old code's writes never fail."))
            self.plan.expand.append(render.ConvertingSyncTrigger(table, old, new_name, "sa.String()",
                                                                 stubs.generic_source(new_type)))
        else:
            self.plan.expand.append(CreateSyncTriggerOp(table, old, new_name))
        work.drop_triggers.append(DropSyncTriggerOp(table, old, new_name))
        self.plan.stubs.append(stubs.Stub(stubs.COPY, name, table, self._key_of(table), new_name, source=old,
                                          types={old: op.existing_type, new_name: new_type},
                                          max_length=narrowed,
                                          conversion=stubs.generic_source(new_type) if conversion else None))
        old_column = sa.Column(old, op.existing_type, nullable=op.existing_nullable is not False,
                               server_default=op.existing_server_default or None)
        self._relax_before_drop(table, old_column, op.schema)
        if required:  # the copy fills it (the gate counts any NULL left before contract runs)
            work.set_not_null.append(render.SetNotNull(
                ops.AlterColumnOp(table, new_name, schema=op.schema, modify_nullable=False, existing_type=new_type,
                                  existing_nullable=True),
                stubs.migration_name("ck", table, new_name, "not_null")[:63]))
        work.alters.append(ops.DropColumnOp.from_column_and_tablename(op.schema, table, old_column))

    def _guess_renames(self, table: str, added: list, dropped: list, work: _TableWork) -> None:
        """A dropped and an added column of the same kind of type, each the only one on the table,
        may be a rename (``moves.guessed_renames``): a copy stub and sync triggers, both marked
        GUESSED (the new release writes only the new column, and without the triggers the copy
        would take that for old code's divergence and overwrite it).  Every other dropped column
        gets a move stub that fails closed (``moves.column_stub``): nothing drops data silently."""
        paired = moves.guessed_renames(added, dropped)
        for drop, add in paired:
            old = drop.to_column()
            name = stubs.migration_name(table, add.column.name, "from", old.name)
            self.plan.stubs.append(stubs.Stub(stubs.COPY, name, table, self._key_of(table),
                                              add.column.name, source=old.name, guessed=True,
                                              types={old.name: old.type, add.column.name: add.column.type}))
            guessed = (f"GUESSED: {table}.{old.name} -> {add.column.name} looks like a rename (a dropped and "
                       "an added column\nof a similar type); if it is not, delete the sync triggers here "
                       f"and in the contract,\nand the {name!r} data migration.")
            self.plan.expand += [Note(guessed), CreateSyncTriggerOp(table, old.name, add.column.name)]
            work.drop_triggers.append(DropSyncTriggerOp(table, old.name, add.column.name))
        moved = {id(drop) for drop, _ in paired}
        free = [a for a in added if all(a is not add for _, add in paired)]
        for drop in dropped:
            if id(drop) not in moved:
                self.plan.stubs.append(moves.column_stub(table, self._key_of(table), drop.to_column(), free,
                                                         self.new_tables))

    def _unique(self, op: ops.CreateUniqueConstraintOp, work: _TableWork) -> None:
        """Contract adds it (safe form); a data migration counts the rows that violate it first."""
        name = stubs.migration_name(op.table_name, op.constraint_name, "duplicates")
        columns = list(op.columns)
        self.plan.stubs.append(stubs.Stub(stubs.DUPLICATES, name, op.table_name, self._key_of(op.table_name),
                                          columns[0], child_columns=columns))
        work.after.append(render.OnlineUniqueConstraint(op))

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


# -- process_revision_directives ----------------------------------------------------
def _is_check_command(context) -> bool:
    """``alembic check`` runs this hook too and reads only the last script: leave it alone."""
    cmd_opts = getattr(context.config, "cmd_opts", None) if context.config is not None else None
    if cmd_opts is not None and hasattr(cmd_opts, "autogenerate"):
        return not cmd_opts.autogenerate
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is alembic_command.check.__code__:
            return True
        frame = frame.f_back
    return False


def _branch_dir(script_directory, label: str) -> str:
    head = script_directory.get_revision(f"{label}@head")
    return str(Path(head.path).parent)


def _is_autogenerate(context) -> bool:
    revision_context = context.opts.get("revision_context")
    if revision_context is not None:
        return bool(revision_context.command_args.get("autogenerate"))
    return bool(getattr(getattr(context.config, "cmd_opts", None), "autogenerate", False))


def process_revision_directives(context, revision, directives) -> None:
    """Split an autogenerated revision into expand and contract scripts."""
    if not directives or not _is_autogenerate(context) or _is_check_command(context):
        return  # a hand-written revision (the user chooses --head), or `alembic check`
    script = directives[0]
    if len(script.upgrade_ops_list) != 1:
        return  # multiple databases: not supported, leave alembic's script
    if not _has_layout(context.script):
        context.config.print_stdout("  (no 'expand'/'contract' branch labels: one script, not split; "
                                    "see `migrations-policy init --adopt`)")
        return
    metadata = context.opts.get("target_metadata")
    _warn_about_check_constraints(context.config, metadata)
    settings = _settings(context)
    planner = Planner(metadata, tuple(settings.dialects), m.Context(postgresql_version=settings.postgresql_version))
    plan = planner.run(script.upgrade_ops)
    if planner.refusals:  # before anything is written
        raise SplitRefused("the expand/contract split refuses:\n  " + "\n  ".join(planner.refusals))
    directives[:] = build_scripts(context, script, plan)
    if not directives:
        context.config.print_stdout("No schema changes detected; no revision written.")


def _warn_about_check_constraints(config, metadata) -> None:
    """Alembic's autogenerate does not compare CHECK constraints: say so, naming the models' ones."""
    tables = metadata if isinstance(metadata, (list, tuple)) else [metadata]
    names = sorted(f"{table.name}.{constraint.name or '(unnamed)'}" for m_ in tables if m_ is not None
                   for table in m_.tables.values() for constraint in table.constraints
                   if isinstance(constraint, sa.CheckConstraint))
    if names:
        config.print_stdout(f"  (CHECK constraints are NOT compared by autogenerate: {', '.join(names)}; "
                            "add or drop them by hand, in contract once existing rows satisfy them)")


def _has_layout(directory) -> bool:
    labels = {label for rev in directory.walk_revisions() for label in (rev.branch_labels or ())}
    return {EXPAND, CONTRACT} <= labels


def build_scripts(context, script: ops.MigrationScript, plan: Plan) -> list[ops.MigrationScript]:
    directory = context.script
    contract_ops = plan.contract + plan.contract_tail
    out = []
    expand_id = script.rev_id
    if plan.stubs:
        _write_stubs(context, plan, expand_id, script.message)
    if plan.expand:
        out.append(_script(expand_id, plan.expand, script.message, EXPAND, _branch_dir(directory, EXPAND)))
    if contract_ops:
        contract_id = (f"{script.rev_id}_contract" if _explicit_rev_id(context) else new_rev_id()) \
            if plan.expand else script.rev_id
        depends = expand_id if plan.expand else directory.get_revision(f"{EXPAND}@head").revision
        contract = _script(contract_id, contract_ops, script.message, CONTRACT, _branch_dir(directory, CONTRACT))
        contract.depends_on = depends
        required = [stub for stub in plan.stubs if stub.kind != stubs.MOVE]  # moves: the gate judges the data
        if required:
            names = "".join(f"\n    {stub.name!r}," for stub in required)
            contract.imports.add(f"# The contract gate refuses this revision until these are complete.\n"
                                 f"requires_data_migrations = ({names}\n)")
        if any(stub.kind == stubs.MOVE for stub in plan.stubs):
            contract.imports.add(moves.DROPS_DATA_HINT)
        out.append(contract)
    return out


def _explicit_rev_id(context) -> bool:
    return bool(getattr(getattr(context.config, "cmd_opts", None), "rev_id", None))


def _script(rev_id: str, operations: list, message: str | None, phase: str, version_path: str) -> ops.MigrationScript:
    downgrade = [r for r in (op.reverse() for op in reversed(operations)) if r is not None]
    sync = (CreateSyncTriggerOp, DropSyncTriggerOp, render.NarrowingSyncTrigger, render.ConvertingSyncTrigger)
    imports = {SYNC_TRIGGERS_IMPORT} if any(isinstance(op, sync) for op in operations) else set()
    if any(isinstance(op, render.ConvertingSyncTrigger) for op in operations):
        imports.add(render.CONVERT_IMPORT)
    imports |= render.type_imports(list(operations) + downgrade)
    return ops.MigrationScript(
        rev_id, ops.UpgradeOps(ops=list(operations)), ops.DowngradeOps(ops=downgrade),
        message=message, imports=imports, head=f"{phase}@head", version_path=version_path,
    )


def _settings(context):
    """The project's ``[migrations_policy]`` settings, read from the ini alembic runs with."""
    from migrations_policy.core.config import load_settings

    ini = Path(context.config.config_file_name) if context.config.config_file_name else None
    return load_settings(ini.parent if ini else ".", alembic_ini=ini)


def _write_stubs(context, plan: Plan, revision: str, message: str | None) -> None:
    config = context.config
    ini = Path(config.config_file_name) if config.config_file_name else None
    settings = _settings(context)
    directory, package = stubs.stub_directory(settings.data_migrations, Path(context.script.dir))
    filename = stubs.module_filename(message, revision)
    path = stubs.write_module(directory, filename, stubs.render_module(plan.stubs, revision, message or ""))
    base = ini.parent if ini else Path.cwd()
    roots = [base / entry for entry in (config.get_prepend_sys_paths_list() or [])] + [base]
    module = stubs.module_name(path, package, roots)
    if module is None:
        how = (f"move it into a package of your project that is importable (prepend_sys_path), "
               f"and list that module in the data_migrations setting")
        module_text = str(path)
    else:
        how = f"and add {module} to the data_migrations setting"
        module_text = module
    config.print_stdout(f"  Generating {path} ... done (data migrations: review them, {how})")
    (plan.expand or plan.contract).insert(0, Note(
        f"Data migrations for this change: {module_text} ({path.name});\n"
        f"review them, {how}."))
