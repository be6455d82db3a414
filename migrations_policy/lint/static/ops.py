"""What each alembic operation records when called with values read from a plain script (``lint.static``).

The values SQLAlchemy's constructors would build (``Column``, a type, ``text``, ``func.now()``) are read into
the small classes below; each operation turns its arguments into ``Operation``s through the functions the
recorder's path uses too (``policy.op_facts``, ``policy.sql.from_sql``).  Anything of another kind, or that
alembic or SQLAlchemy would refuse, raises ``Decline``: the script is run instead.  Imports neither.
"""

from __future__ import annotations

from migrations_policy.lint.static import names
from migrations_policy.policy import model as m
from migrations_policy.policy.op_facts import (NOT_GIVEN, TypeFacts, alter_column_ops, autoincrements, column_facts,
    quoted_default)


class Decline(Exception):
    """The script is outside what this module reads exactly: it is run instead."""


def _check(condition) -> None:
    if not condition:
        raise Decline


# -- values read from the script ----------------------------------------------------------------------------------
class _Conv(str):
    """``op.f("name")``: the name as it is."""


class _Type:
    def __init__(self, spec: names.TypeSpec, arguments: dict | None, members: tuple | None):
        self.spec, self.arguments, self.members = spec, arguments, members  # arguments None: the class itself

    def facts(self) -> TypeFacts:
        arguments = self.arguments or {}
        if self.spec.kind == "other":
            return TypeFacts("other")
        if self.spec.kind == "enum":
            return TypeFacts("enum", enums=self.members if self.arguments is not None else None)
        if self.spec.kind == "set":  # (``mysql.SET(*values)``: its length is its longest value's)
            return TypeFacts("string", max([len(v) for v in self.members or ()] + [0]), arguments.get("collation"),
                             arguments.get("charset"))
        return TypeFacts(self.spec.kind, arguments.get("length"), arguments.get("collation"), arguments.get("charset"))


class _Text:
    def __init__(self, text: str):
        self.text = text


class _Function:
    def __init__(self, name: str):
        self.name = name


class _ForeignKey:
    def __init__(self, target: str):
        self.table = target.split(".")[-2]


class _Computed:
    def __init__(self, persisted):
        self.persisted = persisted


class _Identity:
    pass


class _Column:
    def __init__(self, name: str, type_: _Type, items: list, keywords: dict):
        self.name, self.type, self.keywords = name, type_, keywords
        self.foreign_keys = [item for item in items if isinstance(item, _ForeignKey)]
        generators = [item for item in items if isinstance(item, (_Computed, _Identity))]
        _check(len(generators) <= 1 and not (generators and "server_default" in keywords))
        _check(not (isinstance(generators[:1] and generators[0], _Identity) and keywords.get("autoincrement") is False))
        self.generator = generators[0] if generators else None

    def facts(self) -> dict:
        kw = self.keywords
        primary_key = kw.get("primary_key", False)
        identity = isinstance(self.generator, _Identity)
        nullable = kw["nullable"] if "nullable" in kw else not (primary_key or identity)
        server_default = kw.get("server_default")
        generated = ""
        if isinstance(self.generator, _Computed):
            generated = "stored" if self.generator.persisted else "virtual"
        elif identity:
            generated = "identity"
        elif autoincrements(primary_key, kw.get("autoincrement", "auto"), server_default is not None,
                            kw.get("default") is not None, self.type.spec.integer):
            generated = "identity"
        return column_facts(self.name, nullable, _default_text(server_default), generated,
                            kw.get("default") is not None, kw.get("unique"), primary_key)


class _Constraint:
    def __init__(self, kind: str, columns: list[str]):
        self.kind, self.columns = kind, columns


def _default_text(value) -> str:
    """``policy.alembic_ops.default_text`` of a server default read here (None: none)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return quoted_default(value)
    if isinstance(value, _Text):
        return value.text
    if isinstance(value, _Function):
        return f"{value.name}()"
    raise Decline



_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def _is_literal(value) -> bool:
    if type(value) in _SCALARS:
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_is_literal(v) for v in value.values())
    return False


# -- alembic's operations -------------------------------------------------------------------------------------------
def _name(value, required: bool = False):
    _check(type(value) is str or isinstance(value, _Conv) or value is None and not required)
    return None if value is None else str(value)


def _literals(given: dict, *skip: str) -> None:
    """Every argument besides *skip* is a literal (read by no judgement, but it must not be something else)."""
    for name, value in given.items():
        if type(value) not in _SCALARS and name not in skip and name != "*" and not _is_literal(value):
            raise Decline


def _flag(given: dict, name: str) -> bool:
    value = given.get(name)
    _check(_is_literal(value))
    return bool(value)


def _add_column(given: dict, rec) -> list[m.Operation]:
    _literals(given, "column")
    table, column = _name(given["table_name"], True), given["column"]
    _check(isinstance(column, _Column))
    ops = [m.Operation(kind=m.ADD_COLUMN, table=table, **column.facts())]
    ops.extend(m.Operation(kind=m.ADD_FK, table=table, column=column.name) for _ in column.foreign_keys)
    return ops


def _type_facts(value) -> TypeFacts | None:
    _check(value is None or isinstance(value, _Type))
    return None if value is None else value.facts()


def _alter_column(given: dict, rec) -> list[m.Operation]:
    _literals(given, "type_", "existing_type", "server_default", "existing_server_default")
    for name in ("type_", "existing_type"):
        _type_facts(given.get(name))
    server_default = given.get("server_default", NOT_GIVEN)
    if server_default is not NOT_GIVEN and server_default is not None:
        server_default = _default_text(server_default)
    existing = given.get("existing_server_default", NOT_GIVEN)
    _check(existing is NOT_GIVEN or existing is None or isinstance(existing, (str, _Text, _Function)))
    for name in ("nullable", "existing_nullable"):
        _check(given.get(name) is None or type(given.get(name)) is bool)
    new_name = given.get("new_column_name")
    _check(new_name is None or type(new_name) is str)
    comment = given.get("comment", NOT_GIVEN)
    _check(comment is NOT_GIVEN or comment is None or type(comment) is str)
    return alter_column_ops(_name(given["table_name"], True), _name(given["column_name"], True), new_name,
                            given.get("type_") is not None, _type_facts(given.get("existing_type")),
                            _type_facts(given.get("type_")), given.get("nullable"), given.get("existing_nullable"),
                            server_default, comment is not NOT_GIVEN)


def _create_index(given: dict, rec) -> list[m.Operation]:
    _literals(given, "index_name", "columns", "postgresql_where")
    columns = given["columns"]
    _check(isinstance(columns, (list, tuple)) and all(type(c) is str or isinstance(c, _Text) for c in columns))
    _check(given.get("postgresql_where") is None or isinstance(given.get("postgresql_where"), _Text))
    return [m.Operation(kind=m.CREATE_INDEX, table=_name(given["table_name"], True), name=_name(given["index_name"]),
                        unique=_flag(given, "unique"), concurrently=_flag(given, "postgresql_concurrently"),
                        fulltext=str(given.get("mysql_prefix", "")).upper() == "FULLTEXT")]


def _drop_index(given: dict, rec) -> list[m.Operation]:
    _literals(given, "index_name")
    return [m.Operation(kind=m.DROP_INDEX, table=_name(given.get("table_name")), name=_name(given["index_name"]),
                        concurrently=_flag(given, "postgresql_concurrently"))]


def _constraint(kind: str, table_field: str = "table_name", not_valid: bool = False):
    def convert(given: dict, rec) -> list[m.Operation]:
        _literals(given, "constraint_name", "condition")
        if "condition" in given:
            _check(type(given["condition"]) is str or isinstance(given["condition"], _Text))
        for name in ("columns", "local_cols", "remote_cols"):
            if name in given:
                _check(isinstance(given[name], (list, tuple)) and all(type(c) is str for c in given[name]))
        return [m.Operation(kind=kind, table=_name(given[table_field], True), name=_name(given["constraint_name"]),
                            not_valid=not_valid and _flag(given, "postgresql_not_valid"))]

    return convert


def _simple(kind: str, name_field: str | None = None, column_field: str | None = None):
    def convert(given: dict, rec) -> list[m.Operation]:
        _literals(given)
        fields = {"name": _name(given[name_field], True)} if name_field else {}
        if column_field:
            fields["column"] = _name(given[column_field], True)
        table = given["old_table_name"] if "old_table_name" in given else given["table_name"]
        return [m.Operation(kind=kind, table=_name(table, True), **fields)]

    return convert


def _execute(given: dict, rec) -> list[m.Operation]:
    from migrations_policy.policy.sql import from_sql

    _literals(given, "sqltext")
    sql = given["sqltext"]
    _check(type(sql) is str or isinstance(sql, _Text))
    return from_sql(sql if type(sql) is str else sql.text)


def _create_table(given: dict, rec) -> list[m.Operation]:
    """``to_table`` builds a ``Table`` offline: everything that would make it raise declines."""
    _literals(given, "*")
    for name in given:
        _check(name in ("table_name", "*", "if_not_exists") or name in names.TABLE_KEYWORDS)
    table = _name(given["table_name"], True)
    columns = [c for c in given["*"] if isinstance(c, _Column)]
    constraints = [c for c in given["*"] if isinstance(c, _Constraint)]
    _check(len(columns) + len(constraints) == len(given["*"]))
    column_names = [c.name for c in columns]
    _check(len(set(column_names)) == len(column_names))
    _check(not any(fk.table == table for c in columns for fk in c.foreign_keys))
    keys = [c for c in constraints if c.kind == "pk"]
    _check(len(keys) <= 1 and not (keys and any(c.keywords.get("primary_key") for c in columns)))
    _check(all(name in column_names for c in constraints for name in c.columns))
    return [m.Operation(kind=m.CREATE_TABLE, table=table)]


#: ``op.NAME`` / ``batch_op.NAME`` -> what it records from its bound arguments.
OPERATIONS = {
    "add_column": _add_column,
    "alter_column": _alter_column,
    "create_index": _create_index,
    "drop_index": _drop_index,
    "create_foreign_key": _constraint(m.ADD_FK, "source_table", True),
    "create_unique_constraint": _constraint(m.ADD_UNIQUE),
    "create_check_constraint": _constraint(m.ADD_CHECK, not_valid=True),
    "create_primary_key": _constraint(m.ADD_PK),
    "drop_constraint": _constraint(m.DROP_CONSTRAINT),
    "drop_column": _simple(m.DROP_COLUMN, column_field="column_name"),
    "drop_table": _simple(m.DROP_TABLE),
    "rename_table": _simple(m.RENAME_TABLE, name_field="new_table_name"),
    "create_table_comment": _simple(m.COMMENT),
    "drop_table_comment": _simple(m.COMMENT),
    "execute": _execute,
    "create_table": _create_table,
}
