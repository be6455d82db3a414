"""How a project declares an online data migration.

A data migration is a value, not a subclass: a ``DataMigration`` (or a function
decorated with ``@data_migration``) in a module listed under ``data_migrations``
in the project's settings.  It names the table and the unique key it walks, and
what it does, so that the database itself counts what remains::

    import sqlalchemy as sa
    from migrations_policy.data import DataMigration

    nodes = sa.table("nodes", sa.column("id", sa.Integer), sa.column("extra", sa.Text),
                     sa.column("meta", sa.Text))

    nodes_extra_to_meta = DataMigration(
        "nodes_extra_to_meta", table=nodes, key="id", values={"meta": nodes.c.extra},
    )

``values`` makes it set-based, and its *pending* predicate is built from the
values: a row is pending while any target column IS DISTINCT FROM its value
(NULL-safe on every dialect, ``differs``), so a row that old code writes again
after it was copied is pending again, by construction.  ``pending=`` is then an
optional extra condition, ANDed to that.  Each batch is one ``UPDATE nodes SET
meta = extra WHERE id > :lower AND id <= :upper AND <pending>``.  For work one
UPDATE cannot express, decorate a function that migrates the rows of
``batch.where`` (its ``pending=`` predicate is required and is the whole predicate)::

    @data_migration("port_node_orphans", table=ports, key="id", pending=...)
    def port_node_orphans(connection, batch):
        ...                      # runs inside the batch's transaction
        return migrated_rows     # or None: counted from the pending predicate
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement, TableClause, operators

from migrations_policy.core.errors import ConfigError

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,99}$")

MigrateFunction = Callable[[Connection, "Batch"], "int | None"]


def schema_qualified(elements: Iterable[Any]) -> list[str]:
    """``schema.table`` of every table named with a schema in *elements* (tables and Core expressions)."""
    found: dict[str, None] = {}
    for element in elements:
        if not isinstance(element, sa.sql.ClauseElement):
            continue
        for part in [element, *sa.sql.visitors.iterate(element)]:
            table = part if isinstance(part, TableClause) else getattr(part, "table", None)
            while isinstance(table, sa.sql.selectable.Alias):
                table = table.element
            if isinstance(table, TableClause) and table.schema is not None:
                found[f"{table.schema}.{table.name}"] = None
    return list(found)


def refuse_schema(what: str, elements: Iterable[Any]) -> None:
    """A table named with a schema is refused (fail closed): every reading the framework makes of a
    table -- whether it exists, which foreign keys point at it, its completion marks, its lock --
    is made in the connection's default schema by the table's bare name.  So a table of another
    schema (PostgreSQL) or database (MariaDB/MySQL) was read as a table of the default one: a prune
    deleted rows its real referencing tables hold (and their ``ON DELETE`` actions cascaded), a
    data migration was "inapplicable" and skipped, and the global contract rule passed it."""
    qualified = schema_qualified(elements)
    if qualified:
        raise ConfigError(f"{what}: table {', '.join(qualified)} is named with a schema; data migrations and "
                          "prunes read tables in the connection's default schema only: name the table "
                          "without schema= and point the connection's default schema (PostgreSQL search_path, "
                          "MariaDB/MySQL database) at it")


@dataclass(frozen=True, eq=False)
class DataMigration:
    """One online data migration.

    :param name: unique, lower-case ``[a-z][a-z0-9_]*``; the ledger's key and the
        ``--migration`` / ``--option NAME.key=value`` name.  Never rename one.
    :param table: the table it walks (``sa.table(...)`` naming the columns it uses,
        or a ``Table``).
    :param key: name of a single-column unique key of *table* (usually the primary
        key).  Dense integer keys are walked in key ranges; others by keyset.
    :param pending: Core expression, true for rows that still need migrating.
        Function form: required, and it must become false for a row once the row
        is migrated.  Set-based form: optional, an extra condition ANDed to
        the divergence of the values (see ``values``); the attribute ``pending``
        is then the whole predicate and ``condition`` the author's part.
    :param values: ``{column name: value or expression}`` for the set-based form.
        A row is pending while any of these columns IS DISTINCT FROM its value.
        Declare column types in ``table`` (``sa.column("name", sa.String)``): on
        MariaDB/MySQL string columns are then compared byte for byte, so a change
        of case or of trailing spaces is a difference too.
    :param migrate: ``fn(connection, batch)`` for the function form.
    :param options: ``{key: default}`` accepted by ``--option NAME.key=value``;
        values arrive converted to the default's type in ``batch.options``.
    :param run_last: start only once every other migration is complete (the
        built-in object-version backfill uses it).
    """

    name: str
    table: TableClause
    key: str
    pending: ColumnElement[bool] | None = None
    values: Mapping[str, Any] | None = None
    migrate: MigrateFunction | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    run_last: bool = False
    description: str = ""
    #: Set-based form: the author's extra ``pending=`` condition (None: none).
    condition: ColumnElement[bool] | None = field(init=False, default=None, repr=False)
    #: The function deletes exactly the batch's pending rows (``DELETE ... WHERE batch.where``) and
    #: returns how many: no row it was given can stay pending, so the runner reads no keys before or
    #: after the batch.  Only ``dbsync prune``'s migrations (``prune.PruneMigration``) say so.
    deletes: ClassVar[bool] = False
    #: Its completion is remembered (``completion``: mark triggers on what its predicate reads, a
    #: proof after a probe that found nothing pending), for ``status``, ``check`` and the runner.
    #: A prune's is not (``prune.PruneMigration``): nothing reads it.
    remembers_completion: ClassVar[bool] = True
    #: The tables of other schemas in its expressions were read from the catalog by the framework
    #: (a prune's referencing tables, ``prune.as_migration``), not named by a project: only those
    #: are let through ``refuse_schema``.
    schemas_from_catalog: ClassVar[bool] = False

    def __post_init__(self) -> None:
        where = f"data migration {self.name!r}"
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise ConfigError(f"{where}: name must match {NAME_PATTERN.pattern}")
        if not isinstance(self.table, TableClause):
            raise ConfigError(f"{where}: table must be sa.table(...) or a Table")
        if isinstance(self.key, sa.ColumnClause):
            object.__setattr__(self, "key", self.key.name)
        if self.key not in self.table.c:
            raise ConfigError(f"{where}: key column {self.key!r} is not a column of {self.table.name}")
        if not self.schemas_from_catalog:
            refuse_schema(where, [self.table, self.pending, *(self.values or {}).values()])
        if (self.values is None) == (self.migrate is None):
            raise ConfigError(f"{where}: give exactly one of values= (set-based) or migrate= (a function)")
        if self.values is None and self.pending is None:
            raise ConfigError(f"{where}: the function form needs pending= (true for rows still to migrate)")
        if isinstance(self.pending, FillIn):
            raise ConfigError(f"{self.pending.where}: {where}: {self.pending.what} is not filled in "
                              f"(replace FILL_IN(...) with a Core condition)")
        for column, value in (self.values or {}).items():
            if column not in self.table.c:
                raise ConfigError(f"{where}: values sets {column!r}, not a column of {self.table.name}")
            if isinstance(value, FillIn):
                raise ConfigError(f"{value.where}: {where}: {value.what} is not filled in "
                                  f"(replace FILL_IN(...) with a value or a Core expression)")
        if self.values is not None:
            if not self.values:
                raise ConfigError(f"{where}: values= sets no column")
            object.__setattr__(self, "condition", self.pending)
            object.__setattr__(self, "pending", self._divergence() if self.pending is None
                               else sa.and_(self._divergence(), self.pending))
        for option in self.options:
            if not str(option).isidentifier():
                raise ConfigError(f"{where}: option name {option!r} is not an identifier")

    @property
    def key_column(self) -> sa.ColumnClause:
        return self.table.c[self.key]

    @property
    def table_name(self) -> str:
        return self.table.name

    def _divergence(self) -> ColumnElement[bool]:
        """Any target column IS DISTINCT FROM its value: the rows the UPDATE would change."""
        return sa.or_(*(differs(self.table.c[name], _as_expression(value, self.table.c[name].type))
                        for name, value in self.values.items()))

    @functools.cached_property
    def unmigratable(self) -> ColumnElement[bool] | None:
        """Set-based form: true for pending rows that the UPDATE would leave pending (*stuck*).

        It is *pending* with each column of *values* replaced by its value, so the
        database tells, from the row as it is, what the row would read after the
        UPDATE (SQL evaluates every SET expression on the old row): the divergence
        part becomes false unless a value reads a target (``n = n + 1``), and the
        author's condition decides.  A NULL verdict counts as migrated, as a NULL
        *pending* does.  None for the function form.
        """
        if self.values is None:
            return None
        table = self.table.name
        new_values = {name: _as_expression(value, self.table.c[name].type) for name, value in self.values.items()}
        # Two passes through fresh placeholders: replacement_traverse never revisits an
        # object it returned, so replacing a by b and b by a directly would skip b.
        placeholders = {name: sa.bindparam(f"value_{name}") for name in new_values}
        by_placeholder = {id(placeholders[name]): value for name, value in new_values.items()}

        def column_to_placeholder(element: Any) -> Any:
            if isinstance(element, sa.ColumnClause) and element.name in placeholders \
                    and getattr(element.table, "name", None) == table:
                return placeholders[element.name]
            return None

        marked = sa.sql.visitors.replacement_traverse(self.pending, {}, column_to_placeholder)
        after = sa.sql.visitors.replacement_traverse(marked, {}, lambda element: by_placeholder.get(id(element)))
        return sa.func.coalesce(after, sa.false())

    def columns_used(self) -> dict[str, set[str]]:
        """{table name: column names} the migration needs to exist (its own table and any it refers to)."""
        used: dict[str, set[str]] = {self.table.name: {self.key, *(self.values or {})}}
        expressions = [self.pending, *[v for v in (self.values or {}).values() if isinstance(v, sa.ClauseElement)]]
        for expression in expressions:
            for element in sa.sql.visitors.iterate(expression):
                table = getattr(element, "table", None)
                if isinstance(element, sa.ColumnClause) and isinstance(table, TableClause):
                    used.setdefault(table.name, set()).add(element.name)
        return used

    @functools.cached_property
    def reads_unnamed_columns(self) -> bool:
        """Whether the migration may read columns of its table that no expression names: the
        function form (its Python reads what it likes), or a ``values``/``pending`` holding SQL
        text (``sa.text``, ``literal_column``)."""
        if self.migrate is not None:
            return True
        expressions = [self.pending, *[v for v in self.values.values() if isinstance(v, sa.ClauseElement)]]
        return any(isinstance(element, sa.TextClause) or (isinstance(element, sa.ColumnClause) and element.table is None)
                   for expression in expressions for element in sa.sql.visitors.iterate(expression))

    def parse_options(self, raw: Mapping[str, str]) -> dict[str, Any]:
        """``--option`` strings for this migration, converted to the defaults' types."""
        parsed = dict(self.options)
        for key, text in raw.items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise ValueError(f"{self.name} has no option {key!r} (known: {known})")
            parsed[key] = _convert(text, self.options[key])
        return parsed


class FillIn:
    """A placeholder a generated stub leaves for the developer: ``FILL_IN("what")``.

    A ``DataMigration`` whose ``values`` still holds one is refused at declaration,
    naming the file and line of the placeholder, so an unfinished stub neither runs
    nor lets the contract gate through.
    """

    def __init__(self, what: str):
        frame = sys._getframe(1)
        self.what = what
        self.where = f"{frame.f_code.co_filename}:{frame.f_lineno}"

    def __repr__(self) -> str:
        return f"FILL_IN({self.what!r})"


FILL_IN = FillIn


class _Differs(ColumnElement[bool]):
    """``left`` differs from ``right``, NULL-safe; rendered per dialect (``differs``)."""

    inherit_cache = True
    type = sa.Boolean()
    _is_implicitly_boolean = True  # a predicate: no "= 1" where booleans are integers
    _traverse_internals = [("left", sa.sql.visitors.InternalTraversal.dp_clauseelement),
                           ("right", sa.sql.visitors.InternalTraversal.dp_clauseelement)]

    def __init__(self, left: ColumnElement, right: ColumnElement):
        self.left, self.right = left, right

    def self_group(self, against: Any = None) -> ColumnElement:
        """Parenthesised under NOT and other operators that bind at least as tightly."""
        if against is not None and operators.is_precedent(operators.is_distinct_from, against):
            return sa.sql.elements.Grouping(self)
        return self

    def _negate(self) -> ColumnElement:
        return sa.sql.elements.UnaryExpression(self.self_group(against=operators.inv), operator=operators.inv)

    @property
    def textual(self) -> bool:
        """Either side is a string or JSON: compare exactly, not by the column's collation
        (and JSON as text on PostgreSQL, where ``json`` has no equality operator)."""
        return any(isinstance(side.type, (sa.String, sa.JSON)) for side in (self.left, self.right))


def differs(left: Any, right: Any) -> ColumnElement[bool]:
    """NULL-safe "differs": true when exactly one side is NULL or both are non-NULL and unequal.

    PostgreSQL ``IS DISTINCT FROM`` (as text in the ``"C"`` collation for strings and JSON); SQLite ``IS NOT``
    (``COLLATE BINARY`` for strings);
    MariaDB/MySQL ``NOT (a <=> b)``, on the bytes (``CAST(.. AS BINARY)``) when either side
    is typed as a string, because their default collations ignore case and trailing spaces.
    """
    return _Differs(sa.sql.coercions.expect(sa.sql.roles.ExpressionElementRole, left),
                    sa.sql.coercions.expect(sa.sql.roles.ExpressionElementRole, right))


def _sides(element: _Differs, compiler: Any, kw: Any, wrap: Callable[[Any], Any] = lambda side: side) -> tuple:
    """Both sides rendered (parenthesised where needed); written out here because some
    dialects' own IS DISTINCT FROM drops the compile options (literal binds)."""
    return tuple(compiler.process(wrap(side).self_group(against=operators.is_distinct_from), **kw)
                 for side in (element.left, element.right))


@compiles(_Differs)
def _differs_default(element: _Differs, compiler: Any, **kw: Any) -> str:
    return "%s IS DISTINCT FROM %s" % _sides(element, compiler, kw)


@compiles(_Differs, "postgresql")
def _differs_postgresql(element: _Differs, compiler: Any, **kw: Any) -> str:
    # As text in the "C" collation: a cast keeps the column's collation, and a nondeterministic
    # one (ICU, ``deterministic = false``) calls 'ABC' and 'abc' equal.
    as_text = (lambda side: sa.cast(side, sa.Text).collate("C")) if element.textual else (lambda side: side)
    return "%s IS DISTINCT FROM %s" % _sides(element, compiler, kw, as_text)


@compiles(_Differs, "sqlite")
def _differs_sqlite(element: _Differs, compiler: Any, **kw: Any) -> str:
    left, right = _sides(element, compiler, kw)
    return f"{left} IS NOT ({right}) COLLATE BINARY" if element.textual else f"{left} IS NOT {right}"


@compiles(_Differs, "mysql")
def _differs_mysql(element: _Differs, compiler: Any, **kw: Any) -> str:
    exact = (lambda side: sa.cast(side, sa.LargeBinary)) if element.textual else (lambda side: side)
    return "NOT (%s <=> %s)" % _sides(element, compiler, kw, exact)


def _as_expression(value: Any, type_: Any) -> sa.ColumnElement:
    """A ``values`` entry as an SQL expression (a plain value becomes a bound literal of the column's type)."""
    if isinstance(value, sa.ClauseElement):
        return value
    if value is None:
        return sa.null()
    return sa.literal(value, None if isinstance(type_, sa.types.NullType) else type_)


def _convert(text: str, default: Any) -> Any:
    if isinstance(default, bool):
        lowered = text.strip().lower()
        if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(f"expected a boolean, got {text!r}")
        return lowered in ("1", "true", "yes", "on")
    if isinstance(default, (int, float)):
        return type(default)(text)
    return text


@dataclass(frozen=True)
class DeletingMigration(DataMigration):
    """A function-form migration that deletes its batch's pending rows (``data_migration(...,
    deletes=True)``): an explicit choice of its author, reported as rows deleted, not migrated."""

    deletes: ClassVar[bool] = True


def data_migration(
    name: str, *, table: TableClause, key: str, pending: ColumnElement[bool] | None = None,
    options: Mapping[str, Any] | None = None, run_last: bool = False, deletes: bool = False,
) -> Callable[[MigrateFunction], DataMigration]:
    """Decorator for the function form: the function becomes a ``DataMigration``.  *deletes*:
    the function deletes exactly the rows ``batch.where`` selects and returns how many (the
    runner reports them as deleted)."""

    def wrap(fn: MigrateFunction) -> DataMigration:
        cls = DeletingMigration if deletes else DataMigration
        return cls(name, table=table, key=key, pending=pending, migrate=fn,
                   options=dict(options or {}), run_last=run_last,
                   description=(fn.__doc__ or "").strip().split("\n")[0])

    return wrap


def key_bound(value: Any) -> Any:
    """*value* to compare with a key column: an integer as a BIGINT parameter.  Range stepping,
    claims and probe windows step past the last key, which may be the column type's limit
    (2,147,483,647 for INTEGER): bound as the column's own type, PostgreSQL refused the
    statement ("integer out of range"), so a table with keys near the limit could never be
    migrated, nor its migration proved complete.

    A step past BIGINT's own limit (keys near 2**63 - 1) cannot be bound at all (SQLite's
    driver, PostgreSQL, MariaDB refuse it): it is clamped to the limit, which no key can
    exceed, so ``key <= bound`` and ``key > bound`` select what they would have.  (Below the
    lower limit the clamp would leave out a key equal to it: range stepping, the one walk that
    steps below a key, runs only on keys within +-2**62.)"""
    if isinstance(value, int) and not isinstance(value, bool):
        return sa.literal(min(max(value, -_BIGINT_LIMIT), _BIGINT_LIMIT - 1), sa.BigInteger())
    return value


_BIGINT_LIMIT = 2**63


@dataclass(frozen=True)
class Batch:
    """The key range one batch works on: ``lower < key <= upper`` (no lower bound when None)."""

    migration: DataMigration
    lower: Any
    upper: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key_range(self) -> ColumnElement[bool]:
        key = self.migration.key_column
        upper = key <= key_bound(self.upper)
        return upper if self.lower is None else sa.and_(key > key_bound(self.lower), upper)

    @property
    def where(self) -> ColumnElement[bool]:
        """The rows of this batch that are pending: ``key range AND pending``."""
        return sa.and_(self.key_range, self.migration.pending)


class Registry:
    """Data migrations by name, in declaration order."""

    def __init__(self, migrations: Iterable[DataMigration] = ()):
        self._by_name: dict[str, DataMigration] = {}
        #: The modules the project lists (data_migrations setting) and its import roots
        #: (prepend_sys_path): where a message looks for a declaring module not listed.
        self.listed: list[str] = []
        self.roots: list[str] = []
        for migration in migrations:
            self.add(migration)

    def add(self, migration: DataMigration) -> None:
        existing = self._by_name.get(migration.name)
        if existing is not None and existing is not migration:
            raise ConfigError(f"two data migrations are named {migration.name!r}")
        self._by_name[migration.name] = migration

    def __iter__(self) -> Iterator[DataMigration]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> DataMigration:
        return self._by_name[name]

    def names(self) -> list[str]:
        return list(self._by_name)
