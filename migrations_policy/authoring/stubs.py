"""Data-migration stubs written by the autogenerate split, in the ``migrations_policy.data`` form.

Three kinds, each a complete ``DataMigration`` the developer reviews:

* ``copy``: a rename or type change; copies the old column into the new one
  (``values={new: old}``), pending while the new one IS DISTINCT FROM the old one,
  so a row the previous release writes again after the copy is pending again;
* ``backfill``: a NOT NULL change; pending while the column IS NULL, with a
  ``FILL_IN(...)`` placeholder until the developer sets a value (a declaration
  holding one is refused, naming its file and line, so an unfinished stub
  neither runs nor passes the gate);
* ``orphans``: a foreign key added to an existing table; rows pointing at no
  parent row get the key set to NULL when the column may be NULL; when it is NOT NULL
  the stub only *finds* them (they stay pending, counted, and the gate refuses
  contract): deleting rows is the developer's explicit choice, never the default;
* ``move``: contract drops a table or column whose data no other stub moves (autogenerate
  saw a drop and maybe an add: a table rename, a column moved to another table, split,
  merged or changed in kind).  It fails closed: its ``pending`` is a ``FILL_IN(...)``, so
  loading it fails, naming the line, until the developer writes the move or deletes it and
  records the decision to let the data go (``drops_data`` in the contract script);
* ``duplicates``: a unique constraint added to an existing table; it only *finds*
  the rows whose values a row with a smaller key also has (they stay pending, so
  the gate counts them and refuses contract) until the developer resolves them.

Column types are declared when they are SQLAlchemy's generic ones, so that the
comparison is exact (byte for byte for strings on MariaDB, ``declare.differs``).
"""

from __future__ import annotations

import importlib.util
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

COPY, BACKFILL, ORPHANS, DUPLICATES, MOVE = "copy", "backfill", "orphans", "duplicates", "move"


@dataclass
class Stub:
    kind: str
    name: str
    table: str
    key: str
    column: str  # the column written
    source: str = ""  # copy: the column read; backfill: the column a copy fills this one from
    guessed: bool = False  # copy: a drop + add autogenerate cannot tell from a rename
    parent_table: str = ""  # orphans
    parent_columns: list[str] = field(default_factory=list)
    child_columns: list[str] = field(default_factory=list)
    #: {column: its type} where known (rendered when SQLAlchemy's generic type).
    types: dict[str, Any] = field(default_factory=dict)
    #: orphans: the child column is NOT NULL (orphan rows are deleted, not detached).
    required: bool = False
    #: copy: the new column is shorter (a narrowing): longer values are left for the developer.
    max_length: int | None = None
    #: move: where the data may have gone (columns or tables this revision adds), for the comment.
    candidates: list[str] = field(default_factory=list)
    #: copy: the Core source of the converted old value (``convert.converted``), when a plain
    #: copy could fail or coerce (string -> integer); None: a plain copy.
    conversion: str | None = None

    @property
    def at_stake(self) -> str:
        """``table.column`` (a column) or ``table`` (a whole table) the move stub is about."""
        return f"{self.table}.{self.column}" if self.column else self.table


def migration_name(*parts: str) -> str:
    """A valid data-migration name (``[a-z][a-z0-9_]*``, at most 100 characters)."""
    text = re.sub(r"[^a-z0-9_]+", "_", "_".join(parts).lower()).strip("_")
    if not text or not text[0].isalpha():
        text = "m_" + text
    return text[:100]


def _ident(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = "t_" + text
    return text


def _tables(stub_list: list[Stub]) -> dict[str, dict[str, str]]:
    """Every table the stubs read or write: {table: {column: type source ("" unknown)}}."""
    tables: dict[str, dict[str, str]] = {}
    for stub in stub_list:
        used = [stub.key, stub.source, stub.column, *stub.child_columns]
        columns = tables.setdefault(stub.table, {})
        for column in (c for c in used if c):
            columns[column] = columns.get(column) or type_source(stub.types.get(column))
        if stub.parent_table:
            parent = tables.setdefault(stub.parent_table, {})
            for column in stub.parent_columns:
                parent.setdefault(column, "")
    return tables


def type_source(type_: Any) -> str:
    """``sa.String()`` for a SQLAlchemy generic type (no arguments: only its kind matters), else ""."""
    if type_ is None:
        return ""
    cls = type(type_) if not isinstance(type_, type) else type_
    return f"sa.{cls.__name__}()" if getattr(sa, cls.__name__, None) is cls else ""


def generic_source(type_: Any) -> str:
    """``type_source`` of *type_* or of the nearest SQLAlchemy type it derives from (a reflected
    ``mysql.VARCHAR`` is an ``sa.VARCHAR()``); "" when none."""
    cls = type(type_) if not isinstance(type_, type) else type_
    for base in cls.__mro__:
        if getattr(sa, base.__name__, None) is base:
            return f"sa.{base.__name__}()"
    return ""


def generic_type(type_: Any) -> Any:
    """An instance of the SQLAlchemy type *type_* is or derives from (no arguments), or *type_*."""
    cls = type(type_) if not isinstance(type_, type) else type_
    for base in cls.__mro__:
        if getattr(sa, base.__name__, None) is base:
            try:
                return base()
            except TypeError:
                return type_
    return type_


def _table_clause(table: str, columns: dict[str, str]) -> str:
    cols = ", ".join(f"sa.column({c!r}, {t})" if t else f"sa.column({c!r})" for c, t in columns.items())
    return f"{_ident(table)} = sa.table({table!r}, {cols})"


def _declaration(stub: Stub, pending: str | None, values: str) -> list[str]:
    where = [f"    pending={pending},"] if pending else []
    return [f"{stub.name} = DataMigration(", f"    {stub.name!r},", f"    table={_ident(stub.table)},",
            f"    key={stub.key!r},", *where, f"    values={values},", ")"]


def render_stub(stub: Stub) -> str:
    t = _ident(stub.table)
    if stub.kind == COPY:
        lines = [f"# {stub.table}.{stub.source} -> {stub.table}.{stub.column}: copy the old column into the new one.",
                 "# CHECK the conversion (values may use any Core expression, e.g. sa.cast)."]
        if stub.guessed:
            lines += ["# GUESSED: autogenerate saw a dropped and an added column of a similar type.  If",
                      f"# {stub.column!r} does not replace {stub.source!r}, delete this migration and its",
                      "# name in requires_data_migrations of the contract script."]
        lines += [f"# Pending while {stub.column!r} IS DISTINCT FROM {stub.source!r}: a row the previous",
                  "# release writes again after the copy is copied again."]
        source, target = f"{t}.c[{stub.source!r}]", f"{t}.c[{stub.column!r}]"
        if stub.conversion is not None:
            value = f"converted({source}, {stub.conversion})"
            return "\n".join(lines + [
                f"# CONVERSION to {stub.conversion}: a value the new type cannot hold is not copied; its row",
                "# stays pending, the runner reports it as stuck and the gate refuses contract until you",
                "# fix it (never a failed write of the old release, never a value coerced to 0).",
                f"@data_migration({stub.name!r}, table={t}, key={stub.key!r},",
                f"                pending=sa.or_(differs({target}, {value}), unconvertible({source}, "
                f"{stub.conversion})))",
                f"def {_ident(stub.name)}(connection, batch):",
                f'    """Copy {stub.source} into {stub.column} where the value converts."""',
                f"    connection.execute(sa.update({t}).where(batch.where, convertible({source}, {stub.conversion}))",
                f"                       .values({{{stub.column!r}: {value}}}))",
            ])
        if stub.max_length is None:
            return "\n".join(lines + _declaration(stub, None, f"{{{stub.column!r}: {source}}}"))
        return "\n".join(lines + [
            f"# NARROWING to {stub.max_length}: a longer value is not copied; its row stays pending, the",
            "# runner reports it as stuck and the gate refuses contract until you shorten it.",
            "# MariaDB's length() counts bytes, so multi-byte values may be reported too.",
            f"@data_migration({stub.name!r}, table={t}, key={stub.key!r}, pending=differs({target}, {source}))",
            f"def {_ident(stub.name)}(connection, batch):",
            f'    """Copy {stub.source} into {stub.column} where it fits in {stub.max_length} characters."""',
            f"    fits = sa.func.length({source}) <= {stub.max_length}",
            f"    connection.execute(sa.update({t}).where(batch.where, fits).values({{{stub.column!r}: {source}}}))",
        ])
    if stub.kind == BACKFILL:
        fill = f"FILL_IN_{_ident(stub.name).upper()}"
        pending = f"{t}.c[{stub.column!r}].is_(None)"
        copied = []
        if stub.source:  # a copy fills this column too: only what it leaves NULL is ours
            pending = f"sa.and_({pending}, {t}.c[{stub.source!r}].is_(None))"
            copied = [f"# {stub.column!r} is copied from {stub.source!r} too: this fills only the rows where both are",
                      "# NULL, never a value the copy brings (nor, through the sync trigger, the old column)."]
        return "\n".join([
            f"# {stub.table}.{stub.column} becomes NOT NULL in contract: give existing NULL rows a value.",
            f"# FILL IN: a constant or a Core expression (e.g. {t}.c.other_column).  Until you do,",
            "# loading this module fails, naming this line, and the contract gate refuses.",
            *copied,
            f"{fill} = FILL_IN({f'the value for NULL rows of {stub.table}.{stub.column}'!r})",
        ] + _declaration(stub, pending, f"{{{stub.column!r}: {fill}}}"))
    if stub.kind == DUPLICATES:
        return _render_duplicates(stub)
    if stub.kind == MOVE:
        return _render_move(stub)
    return _render_orphans(stub)


def _render_move(stub: Stub) -> str:
    t, what = _ident(stub.table), stub.at_stake
    fill = f"PENDING_{_ident(stub.name).upper()}"
    homes = (f"# Added in this revision (its new home?): {', '.join(stub.candidates)}."
             if stub.candidates else "# This revision adds nothing it could have moved to.")
    return "\n".join([
        f"# DATA AT STAKE: contract drops {what} and no migration moves its data.",
        homes,
        "# FILL IN, one of:",
        f"# * move it: set {fill} to the condition of the rows still to move (e.g. new",
        "#   column IS NULL and old IS NOT NULL) and write the move below (copy, split, merge,",
        "#   convert; to another table: an INSERT ... SELECT of the batch's rows);",
        "# * let it go: delete this migration, and record why in the contract script:",
        f"#   drops_data = {{{what!r}: 'why it may go'}} (not needed if it holds no data).",
        "# Until then loading this module fails, naming this line.  Whatever you do, the contract",
        "# gate refuses to drop data that no declared migration reads and drops_data does not name.",
        f"{fill} = FILL_IN({f'the rows of {stub.table} whose data is not moved yet ({what} is dropped)'!r})",
        f"@data_migration({stub.name!r}, table={t}, key={stub.key!r}, pending={fill})",
        f"def {_ident(stub.name)}(connection, batch):",
        f'    """Move {what} to its new home (FILL IN)."""',
        f"    raise NotImplementedError({f'FILL IN: move {what}'!r})",
    ])


def _render_duplicates(stub: Stub) -> str:
    t = _ident(stub.table)
    other = f"{t}_other"
    same = ", ".join(f"{other}.c[{c!r}] == {t}.c[{c!r}]" for c in stub.child_columns)
    not_null = ", ".join(f"{t}.c[{c!r}].is_not(None)" for c in stub.child_columns)
    return "\n".join([
        f"# {stub.table}({', '.join(stub.child_columns)}) becomes UNIQUE in contract: rows whose values a row with a",
        "# smaller key also has.  This migration only FINDS them: they stay pending, `dbsync check`",
        "# and the runner count them, and the gate refuses contract until none is left.",
        "# CHECK: resolve them (merge, change or delete), here or by hand.",
        f"{other} = {t}.alias('other')",
        f"@data_migration({stub.name!r}, table={t}, key={stub.key!r},",
        f"                pending=sa.and_({not_null}, sa.exists().where(sa.and_({same}, "
        f"{other}.c[{stub.key!r}] < {t}.c[{stub.key!r}]))))",
        f"def {_ident(stub.name)}(connection, batch):",
        f'    """Find {stub.table} rows that would violate the new unique constraint (resolves nothing)."""',
        "    return 0",
    ])


def _render_orphans(stub: Stub) -> str:
    t, parent = _ident(stub.table), _ident(stub.parent_table)
    lines = [f"# {stub.table}({', '.join(stub.child_columns)}) -> {stub.parent_table}: rows pointing at no parent row.",
             "# The expand script added the foreign key without checking existing rows; contract",
             "# validates it."]
    if stub.parent_table == stub.table:
        parent = f"{t}_parent"
        lines.append(f"{parent} = {t}.alias('parent')")
    match = ", ".join(f"{parent}.c[{p!r}] == {t}.c[{c!r}]" for c, p in zip(stub.child_columns, stub.parent_columns))
    not_null = ", ".join(f"{t}.c[{c!r}].is_not(None)" for c in stub.child_columns)
    pending = f"sa.and_({not_null}, ~sa.exists().where(sa.and_({match})))"
    if not stub.required:
        lines.append("# CHECK: this sets the key to NULL; delete the rows instead if that is right.")
        return "\n".join(lines + _declaration(stub, pending, "{" + ", ".join(
            f"{c!r}: None" for c in stub.child_columns) + "}"))
    return "\n".join(lines + [
        f"# {stub.table}.{stub.column} is NOT NULL, so an orphan cannot be detached.  This migration only",
        "# FINDS them: they stay pending, `dbsync check` and the runner count them, and the gate",
        "# refuses contract until none is left.  CHECK: point them at a parent row (here or by",
        "# hand), or, if deleting them is right, say so explicitly: add deletes=True to",
        f"# @data_migration and return connection.execute(sa.delete({t}).where(batch.where)).rowcount",
        "# (the runner then reports them as DELETED).",
        f"@data_migration({stub.name!r}, table={t}, key={stub.key!r},",
        f"                pending={pending})",
        f"def {_ident(stub.name)}(connection, batch):",
        f'    """Find the {stub.table} rows whose {stub.parent_table} row does not exist (changes nothing)."""',
        "    return 0",
    ]) + "\n"


def render_module(stub_list: list[Stub], revision: str, message: str) -> str:
    header = [
        f'"""Online data migrations for revision {revision}: {message}.',
        "",
        "Generated by ``alembic revision --autogenerate`` (migrations_policy).  Review each",
        "migration (CHECK / FILL IN comments); the contract script lists their names in",
        "``requires_data_migrations``, and the gate refuses contract until they are complete.",
        "The tables name only the columns the migrations use, not your models: a migration",
        "must keep meaning the same thing after the models move on.",
        '"""',
        "",
        "import sqlalchemy as sa",
        "",
        "from migrations_policy.data import FILL_IN, DataMigration, data_migration, differs  # noqa: F401",
        "from migrations_policy.data.convert import convertible, converted, unconvertible  # noqa: F401",
        "",
    ]
    tables = [_table_clause(name, columns) for name, columns in _tables(stub_list).items()]
    body = [render_stub(stub) for stub in stub_list]
    return "\n".join(header + tables) + "\n\n\n" + "\n\n\n".join(body) + "\n"


def stub_directory(settings_modules: list[str], script_location: Path) -> tuple[Path, str | None]:
    """Where stubs go: next to the first configured ``data_migrations`` module (in its
    package), else ``<script_location>/data_migrations``.  Returns the directory and the
    dotted package name (None when unknown)."""
    for module in settings_modules[:1]:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            continue
        if spec.submodule_search_locations:  # a package: stubs become its submodules
            return Path(list(spec.submodule_search_locations)[0]), module
        return Path(spec.origin).parent, module.rpartition(".")[0] or None
    return script_location / "data_migrations", None


#: Where the project lists its data-migration modules, for a message that asks to list one.
LISTED_WHERE = ("the data_migrations setting: [migrations_policy] in alembic.ini, or "
                "[tool.migrations_policy] in pyproject.toml")


def declaring_module(name: str, settings_modules: list[str], script_location: Path | None,
                     roots: list[Path]) -> str | None:
    """The module (dotted name, or its path when no root imports it) that declares the data
    migration *name* without being listed in ``data_migrations``: the files where ``dbsync
    revision`` writes its stubs (``stub_directory``, and ``<script_location>/data_migrations``)
    are read as text, not imported; None when none of them names it."""
    places = []
    if settings_modules or script_location is not None:
        places.append(stub_directory(settings_modules, script_location or Path(".")))
    if script_location is not None:
        places.append((script_location / "data_migrations", None))
    listed = {module.rpartition(".")[2] for module in settings_modules}
    quoted = re.compile(rf"""["']{re.escape(name)}["']""")
    for directory, package in dict.fromkeys(places):
        try:
            paths = sorted(directory.glob("*.py"))
        except OSError:
            continue
        for path in paths:
            if package and path.stem in listed or path.stem == "__init__" and package in settings_modules:
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if quoted.search(text) and ("DataMigration" in text or "data_migration" in text):
                return module_name(path, package, roots) or str(path)
    return None


def module_name(path: Path, package: str | None, roots: list[Path]) -> str | None:
    """The dotted name that imports the stub module at *path*: in *package* when known,
    else relative to the first of *roots* (the project's ``prepend_sys_path`` entries)
    that holds it through identifiers only.  None when no root does."""
    if package:
        return f"{package}.{path.stem}"
    for root in roots:
        try:
            parts = path.resolve().with_suffix("").relative_to(root.resolve()).parts
        except ValueError:
            continue
        if parts and all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
            return ".".join(parts)
    return None


def write_module(directory: Path, filename: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_text(text, encoding="utf-8")
    return path


def module_filename(message: str | None, revision: str) -> str:
    slug = re.sub(r"\W+", "_", (message or "").lower()).strip("_")[:40]
    name = f"{slug}_{revision}" if slug else f"revision_{revision}"
    return _ident(name) + ".py"
