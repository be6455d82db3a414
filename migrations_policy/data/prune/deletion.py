"""``dbsync prune``: delete rows a project declares prunable, in batches (nova's ``archive_deleted_rows``).

Large tables make every expand and backfill slower.  A project declares what may
go, next to its data migrations (any module listed under ``data_migrations``)::

    from migrations_policy.data import Prune

    prune_deleted_nodes = Prune(
        "deleted_nodes", table=nodes, key="id",
        where=sa.and_(nodes.c.deleted_at.is_not(None), nodes.c.deleted_at < sa.func.now() - interval),
        shadow="shadow_nodes",          # optional: rows are copied there first, same columns
    )

Each prune runs on the data-migration runner: batches of ``--batch-size`` rows (or a
``--batch-seconds`` target), one transaction each (the shadow copy and the delete
commit together, so a SIGKILL loses or doubles nothing), the ledger records progress
(under ``prune_<name>``), and the same report, JSON and exit codes.

Nothing that another table still references goes: the rows are ``where AND NOT
EXISTS`` (a referencing row) for every foreign key pointing at the table, whatever its
``ON DELETE`` action, read from the catalog of every schema (PostgreSQL) or database
(MariaDB) when the run starts, and read again inside each batch's transaction after its
DELETE took the table's write lock: a foreign key the run did not know rolls the batch
back (``ReferencesChanged``, exit 2).  When the catalog cannot be read the prune is
refused.  Such rows are reported as kept.  Prunes run
children first (a prune of ``ports`` before one of ``nodes`` when ports reference
nodes), so a parent whose children this run deleted goes in the same run.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql import ColumnElement, TableClause

from migrations_policy.core.errors import ConfigError, PolicyError
from migrations_policy.data.declare import NAME_PATTERN, Batch, DataMigration, Registry, refuse_schema
from migrations_policy.data.walk import yielding
from migrations_policy.data.prune.references import Reference, read_references, reference_idents

LEDGER_PREFIX = "prune_"
#: Keys bound in one statement of a shadowed batch (SQLite accepts 32,766 parameters; small is fine).
_KEYS_PER_STATEMENT = 1000


@dataclass(frozen=True, eq=False)
class Prune:
    """Rows of *table* that may be deleted: *where* (and not referenced by another table).

    :param name: lower-case ``[a-z][a-z0-9_]*``; the ledger keeps it as ``prune_<name>``.
    :param table: the table (``sa.table(...)`` naming the key and the columns *where* uses, or a ``Table``).
    :param key: a single-column unique key of *table* (walked like a data migration's).
    :param where: Core expression, true for the rows that may go.
    :param shadow: a table with the same columns to copy the rows into first (it must exist).
    """

    name: str
    table: TableClause
    key: str
    where: ColumnElement[bool]
    shadow: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        what = f"prune {self.name!r}"
        if not isinstance(self.name, str) or not NAME_PATTERN.match(LEDGER_PREFIX + self.name):
            raise ConfigError(f"{what}: name must match {NAME_PATTERN.pattern} (after the 'prune_' prefix)")
        if not isinstance(self.table, TableClause) or self.key not in self.table.c:
            raise ConfigError(f"{what}: table must be sa.table(...) or a Table with the key column {self.key!r}")
        if not isinstance(self.where, sa.ColumnElement):
            raise ConfigError(f"{what}: where must be a SQLAlchemy Core expression")
        refuse_schema(what, [self.table, self.where])

    @property
    def ledger_name(self) -> str:
        return LEDGER_PREFIX + self.name


def prunes_in(modules: Iterable[Any]) -> list[Prune]:
    """The ``Prune`` objects the given modules define, in their order."""
    return [value for module in modules for value in vars(module).values() if isinstance(value, Prune)]


def _references(connection: Connection, table: str) -> list[Reference]:
    """Every foreign key pointing at *table* (in the connection's default schema), from the catalog of
    every schema (PostgreSQL) or database (MariaDB/MySQL) the server knows, not only the default one
    (``data/prune/references.py``).  Raises ``ReferencesUnreadable`` when that catalog cannot be read."""
    return read_references(connection, table)


def _not_referenced(prune: Prune, references: list[Reference]) -> ColumnElement[bool]:
    conditions = []
    for number, reference in enumerate(references):
        missing = [r for r in reference.referred if r not in prune.table.c]
        if missing:
            raise ConfigError(f"prune {prune.name!r}: {reference.name} references {prune.table.name}."
                              f"{', '.join(missing)}: name that column in the prune's table")
        child = sa.table(reference.table, *(sa.column(c) for c in reference.columns),
                         schema=reference.schema).alias(f"referencing_{number}")
        match = sa.and_(*(child.c[c] == prune.table.c[r] for c, r in zip(reference.columns, reference.referred)))
        conditions.append(~sa.exists().where(match))
    return sa.and_(sa.true(), *conditions)


class ReferencesChanged(PolicyError):
    """A foreign key pointing at the pruned table appeared (or changed) while the prune ran."""

    exit_code = 2


@dataclass(frozen=True, eq=False)
class PruneMigration(DataMigration):
    """A prune on the runner: its batch deletes exactly the batch's pending rows.  *after_batch*:
    what the runner runs in the batch's transaction after the delete, apart from it (the check that
    the references are those the run was built on): a fixed cost per batch, which batch sizing
    must not take for a cost per row (``sizing``)."""

    deletes = True
    #: No mark triggers, no proof: a prune is no data migration that ``status``, ``check`` or the
    #: gate judge, and its own run always probes what remains.  Its triggers would cost one row
    #: trigger per deleted row (MariaDB), and per application write to the table ever after.
    remembers_completion = False
    #: Its referencing tables of other schemas come from the catalog (the ``Prune`` itself was
    #: refused a schema when declared).
    schemas_from_catalog = True
    #: Every statement of its batch goes through ``yielding.execute`` (MariaDB: no session SETs).
    carries_lock_wait: bool = False
    after_batch: Callable[[Connection], None] | None = None


def as_migration(prune: Prune, connection: Connection) -> tuple[DataMigration, ColumnElement[bool]]:
    """The runner's view of *prune*, and the condition of the rows kept because they are referenced."""
    inspector = sa.inspect(connection)
    if not inspector.has_table(prune.table.name):
        raise ConfigError(f"prune {prune.name!r}: table {prune.table.name!r} does not exist")
    columns = [c["name"] for c in inspector.get_columns(prune.table.name)]
    if prune.shadow is not None:
        if not inspector.has_table(prune.shadow):
            raise ConfigError(f"prune {prune.name!r}: shadow table {prune.shadow!r} does not exist (create it "
                              "in a revision, with the columns of " f"{prune.table.name!r})")
        missing = set(columns) - {c["name"] for c in inspector.get_columns(prune.shadow)}
        if missing:
            raise ConfigError(f"prune {prune.name!r}: shadow table {prune.shadow!r} lacks column(s) "
                              f"{', '.join(sorted(missing))}")
    references = _references(connection, prune.table.name)
    known = frozenset(r.ident for r in references)
    free = _not_referenced(prune, references)
    source = sa.table(prune.table.name, *(sa.column(c) for c in columns))
    shadow = sa.table(prune.shadow, *(sa.column(c) for c in columns)) if prune.shadow else None

    key = prune.table.c[prune.key]

    def check_references(conn: Connection) -> None:
        # Judged under the lock, before the batch commits: the DELETE holds the table's write lock, which
        # a new foreign key to the table must wait for (PostgreSQL: SHARE ROW EXCLUSIVE against our ROW
        # EXCLUSIVE; MariaDB: the metadata lock of the referenced table), so the references read now are
        # those the delete ran against.  Any the run did not know: the batch rolls back (its ON DELETE
        # action may have cascaded), and the prune stops with one line; a rerun reads them.
        if reference_idents(conn, prune.table.name) != known:
            now = _references(conn, prune.table.name)
            new = sorted({r.name for r in set(now) - set(references)} | {r.name for r in set(references) - set(now)})
            raise ReferencesChanged(f"prune {prune.name!r}: the foreign keys referencing {prune.table.name} "
                                    f"changed while it ran ({', '.join(new) or 'one re-created'}): this batch was "
                                    "rolled back; rerun dbsync prune")

    def _delete(conn: Connection, batch: Batch) -> int:
        if conn.dialect.name == "postgresql":
            return _delete_postgresql(conn, batch)
        if shadow is None:  # one statement decides which rows go
            return yielding.execute(conn, sa.delete(prune.table).where(batch.where)).rowcount
        # MariaDB/MySQL (and SQLite) with a shadow table: the rows that go are locked first, judged
        # again once locked, then copied and deleted by key: a writer that soft-deletes or restores a
        # row between its copy and its delete (or a child deleted between the two, making its parent
        # unreferenced) would otherwise leave it deleted uncopied, or copied and kept.  A row that
        # becomes prunable after the lock stays for a later batch.  (SQLite: the batch holds the
        # database's write lock already; FOR UPDATE is not rendered there.)
        # These statements run under the session's short lock wait (``carries_lock_wait`` False).
        locked = conn.execute(sa.select(key).where(batch.where).with_for_update()).scalars().all()
        deleted = 0
        for start in range(0, len(locked), _KEYS_PER_STATEMENT):
            chunk = conn.execute(sa.select(key).where(key.in_(locked[start:start + _KEYS_PER_STATEMENT]),
                                                      batch.where)).scalars().all()
            if not chunk:
                continue
            chosen = sa.select(*(source.c[c] for c in columns)).where(source.c[prune.key].in_(chunk))
            conn.execute(sa.insert(shadow).from_select(columns, chosen))
            deleted += conn.execute(sa.delete(prune.table).where(key.in_(chunk))).rowcount
        return deleted

    def _delete_postgresql(conn: Connection, batch: Batch) -> int:
        # At most two statements per batch, whatever its size (the rows' keys travel as one array):
        # * With a table referencing this one, the rows that go are locked first, and judged (the
        #   prunable condition and every NOT EXISTS of a referencing row) by the DELETE, a statement
        #   that starts once the locks are held.  PostgreSQL reads a statement's snapshot as it
        #   starts: a DELETE whose NOT EXISTS ran in a snapshot older than a child's insert that it
        #   then waited for (the insert's key-share lock on the parent) deleted the parent anyway,
        #   and the key's ON DELETE action removed or nulled the committed child.  Once the rows are
        #   locked, a new child of one must wait for this batch, so the DELETE's judgement stays true
        #   until it commits.  A row that becomes prunable after the lock stays for a later batch.
        # * With no reference there is no such snapshot to outrun: the DELETE alone decides (a row
        #   changed meanwhile is judged again on its latest version before it goes).
        # * The shadow copy is the DELETE's RETURNING (``WITH gone AS (DELETE ...), copied AS (INSERT ...)``): the
        #   rows copied are exactly the rows deleted, in the same statement.
        where = batch.where
        if references:
            locked = yielding.execute(conn, sa.select(key).where(where).with_for_update()).scalars().all()
            if not locked:
                return 0
            where = sa.and_(key == sa.any_(sa.bindparam("locked_keys", locked, type_=_array_of(key.type))), where)
        gone = sa.delete(prune.table).where(where)
        if shadow is None:
            return yielding.execute(conn, gone).rowcount
        moved = gone.returning(*(sa.column(c) for c in columns)).cte("gone")
        copied = sa.insert(shadow).from_select(columns, sa.select(*(moved.c[c] for c in columns))).cte("copied")
        return int(yielding.execute(conn, sa.select(sa.func.count()).select_from(moved).add_cte(copied)).scalar_one())

    migration = PruneMigration(prune.ledger_name, table=prune.table, key=prune.key,
                              pending=sa.and_(prune.where, free), migrate=_delete, after_batch=check_references,
                              carries_lock_wait=shadow is None or connection.dialect.name == "postgresql",
                              description=prune.description or f"delete prunable rows of {prune.table.name}")
    return migration, sa.and_(prune.where, sa.not_(free))


def _array_of(item: Any) -> Any:
    """PostgreSQL: the array type of a key column's type (a key named without a type: let the driver say)."""
    from sqlalchemy.dialects import postgresql

    return postgresql.ARRAY(item) if not isinstance(item, sa.types.NullType) else sa.types.NullType()


def children_first(prunes: list[Prune], connection: Connection) -> list[list[Prune]]:
    """*prunes* in levels: a prune of a referencing table comes in a level before its parent's."""
    pruned = {p.table.name for p in prunes}
    children = {name: {r.table for r in _references(connection, name)
                       if r.schema is None and r.table in pruned and r.table != name}
                for name in pruned}
    levels, done = [], set()
    while len(done) < len(pruned):
        ready = sorted(name for name in pruned - done if children[name] <= done)
        if not ready:  # a cycle of references: the rest together, the NOT EXISTS guard keeps it safe
            ready = sorted(pruned - done)
        levels.append([p for p in prunes if p.table.name in ready])
        done.update(ready)
    return levels


def count_kept(connection: Connection, prune: Prune, kept: ColumnElement[bool]) -> int:
    """Rows *prune* would delete but another table still references."""
    query = sa.select(sa.func.count()).select_from(prune.table).where(kept)
    return int(connection.execute(query).scalar_one())


def run_prunes(engine: Engine, prunes: list[Prune], options: Any, progress: Any = None) -> tuple[Any, dict]:
    """Run *prunes* children first on the data-migration runner: (the combined RunReport, {name: kept rows})."""
    from migrations_policy.data.walk.report import RunReport
    from migrations_policy.data.walk.runner import run

    combined = RunReport(max_count=options.max_count)
    kept: dict[str, int] = {}
    with engine.connect() as conn:
        levels = children_first(prunes, conn)
    remaining_budget = options.max_count
    for number, level in enumerate(levels):
        with engine.connect() as conn:
            converted = [(p, *as_migration(p, conn)) for p in level]
        registry = Registry(m for _, m, _ in converted)
        level_options = dataclasses.replace(options, max_count=remaining_budget,
                                            names=[m.name for _, m, _ in converted])
        report = run(engine, registry, level_options, progress=progress)
        combined.migrations.extend(report.migrations)
        combined.max_count_reached = combined.max_count_reached or report.max_count_reached
        combined.seconds += report.seconds
        if report.interrupted:  # Ctrl-C / SIGTERM: the next levels do not start
            combined.interrupted = True
            break
        with engine.connect() as conn:
            for prune, _, kept_where in converted:
                kept[prune.name] = count_kept(conn, prune, kept_where)
        if remaining_budget is not None:
            remaining_budget -= report.migrated
            if remaining_budget <= 0:
                # the budget ran out at a level's end: the later levels never start, and their rows
                # may still be prunable (exit 1, "run again"; not 0, which says every prune is complete)
                combined.unstarted = [p.name for later in levels[number + 1:] for p in later]
                combined.max_count_reached = combined.max_count_reached or bool(combined.unstarted)
                break
    return combined, kept


# -- dbsync prune --dry-run -------------------------------------------------------------------
@dataclass(frozen=True)
class WouldDelete:
    """What a prune's run would do, counted as of the dry run's read."""

    name: str
    table: str
    would_delete: int
    #: Prunable rows kept because a row that stays references them (``kept_referenced`` of a run).
    kept_referenced: int
    #: References among the prunes of one level (a table referencing itself, a cycle) counted as staying.
    lower_bound: bool = False
    #: ``--max-count``: what a run with that budget deletes of it (None: no budget given).
    within_max_count: int | None = None
    #: ``--max-count`` ran out in a level of several prunes: the run's round robin shares the rest
    #: between them, so *within_max_count* is an upper bound for each (their sum is exact).
    max_count_shared: bool = False


def _tally(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """The rows for which *condition* is true (NULL: not counted)."""
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


@contextmanager
def _one_read(engine: Engine) -> Iterator[Connection]:
    """One snapshot for every count (PostgreSQL, MariaDB/MySQL: REPEATABLE READ), plain reads (no row
    locks), rolled back at the end: nothing is written."""
    with engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin() as transaction:
            try:
                yield conn
            finally:
                transaction.rollback()


def within_budget(levels: list[list[WouldDelete]], max_count: int | None) -> list[WouldDelete]:
    """*levels* (children first, as ``run_prunes`` goes) with what a run of ``--max-count``
    *max_count* deletes of each: each level gets what is left of the budget after the levels
    before it (``run_prunes``); a level of one prune takes all of it it can; in a level of several
    the run's round robin shares it (``max_count_shared``: each an upper bound, their sum exact)."""
    left = max_count
    found: list[WouldDelete] = []
    for level in levels:
        total = sum(w.would_delete for w in level)
        if left is None:
            found += level
            continue
        if total <= left or len(level) == 1:
            found += [dataclasses.replace(w, within_max_count=min(w.would_delete, left)) for w in level]
        else:
            found += [dataclasses.replace(w, within_max_count=min(w.would_delete, left), max_count_shared=True)
                      for w in level]
        left = max(left - total, 0)
    return found


def dry_run(engine: Engine, prunes: list[Prune], max_count: int | None = None) -> list[WouldDelete]:
    """What ``run_prunes`` would delete, per prune, with no writer meanwhile: counted, nothing deleted.

    A prune's rows go when prunable (``where``, a non-NULL key: batches never select a NULL one) and
    no row that stays references them.  The run goes children first, so a referencing table pruned
    in an earlier level keeps only the rows its own prune would not take (its rows that go are
    composed into the parent's count, level by level); every other referencing row stays.
    References among the prunes of one level (a table referencing itself, a cycle) count as staying:
    the run may still take such a row when the batch of the row referencing it ran first, so for
    those the count is a lower bound (``lower_bound``)."""
    levels: list[list[WouldDelete]] = []
    with _one_read(engine) as conn:
        going: dict[str, tuple[Prune, sa.Select]] = {}  # table: its prune, the keys it would delete
        for level in children_first(prunes, conn):
            found: list[WouldDelete] = []
            levels.append(found)
            in_level = {p.table.name for p in level}
            decided = {}
            for prune in level:
                references = _references(conn, prune.table.name)
                stays, lower = [], False
                for reference in references:
                    missing = [r for r in reference.referred if r not in prune.table.c]
                    if missing:
                        raise ConfigError(f"prune {prune.name!r}: {reference.name} references {prune.table.name}."
                                          f"{', '.join(missing)}: name that column in the prune's table")
                    child_prune = going.get(reference.table) if reference.schema is None else None
                    names = [*reference.columns] + ([child_prune[0].key] if child_prune else [])
                    child = sa.table(reference.table, *(sa.column(c) for c in dict.fromkeys(names)),
                                     schema=reference.schema).alias()
                    match = [child.c[c] == prune.table.c[r] for c, r in zip(reference.columns, reference.referred)]
                    if child_prune is not None:  # a child row its own prune takes first does not keep it
                        match.append(~sa.func.coalesce(child.c[child_prune[0].key].in_(child_prune[1]), sa.false()))
                    lower = lower or (reference.schema is None and reference.table in in_level)
                    stays.append(sa.exists().where(*match))
                free = sa.not_(sa.or_(*stays)) if stays else sa.true()
                key = prune.table.c[prune.key]
                goes = sa.and_(prune.where, key.is_not(None), free)
                counted = conn.execute(sa.select(_tally(goes), _tally(sa.and_(prune.where, sa.not_(free))))
                                       .select_from(prune.table)).one()
                found.append(WouldDelete(prune.name, prune.table.name, int(counted[0] or 0), int(counted[1] or 0),
                                         lower))
                decided[prune.table.name] = (prune, sa.select(key).where(goes))
            going.update(decided)
    return within_budget(levels, max_count)
