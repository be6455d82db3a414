"""What ``lint.static`` knows of alembic and SQLAlchemy, as tables (neither is imported).

Every name, argument and value a plain script may use and still be read without running it is listed here;
anything else makes ``lint.static`` decline the script (it is then run, as before).  Each table is checked
against the installed alembic and SQLAlchemy by ``tests/lint/test_static_tables.py`` (signatures, type
classes, defaults, function names): an upgrade that changes one of them fails that test, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# -- argument kinds ---------------------------------------------------------------------------------------------
INT, OPT_INT, BOOL, STR, OPT_STR, TYPE = "int", "opt_int", "bool", "str", "opt_str", "type"


def accepts(kind: str, value) -> bool:
    """Whether *value* (a literal read from the script) is of argument *kind* (``TYPE``: checked by the caller)."""
    if kind == INT:
        return type(value) is int
    if kind == OPT_INT:
        return value is None or type(value) is int
    if kind == BOOL:
        return type(value) is bool
    if kind == STR:
        return type(value) is str
    if kind == OPT_STR:
        return value is None or type(value) is str
    return False


@dataclass(frozen=True)
class TypeSpec:
    """A SQLAlchemy type class: *kind* as ``op_facts.TypeFacts`` reads it, whether its affinity is ``Integer``,
    its positional parameters in order and its keyword parameters (name -> kind); *members*: it takes string
    members as ``*args`` (``Enum``); *required*: the first parameters that must be given."""

    kind: str
    integer: bool = False
    positional: tuple[str, ...] = ()
    keywords: dict = field(default_factory=dict)
    members: bool = False
    #: How many of the positional parameters must be given (the class alone cannot be built).
    required: int = 0


_STRING = dict(positional=("length", "collation"), keywords={"length": OPT_INT, "collation": OPT_STR})
_UNICODE = dict(positional=("length",), keywords={"length": OPT_INT, "collation": OPT_STR})
_MYSQL_STRING = dict(positional=("length",), keywords={"length": OPT_INT, "charset": OPT_STR, "collation": OPT_STR})
_MYSQL_TEXT = dict(keywords={"charset": OPT_STR, "collation": OPT_STR})
_TZ = dict(positional=("timezone",), keywords={"timezone": BOOL})
_NUMERIC = dict(positional=("precision", "scale"), keywords={"precision": OPT_INT, "scale": OPT_INT})
_ENUM = dict(members=True, keywords={"name": OPT_STR, "native_enum": BOOL, "create_constraint": BOOL})
_MYSQL_INT = dict(positional=("display_width",), keywords={"display_width": OPT_INT, "unsigned": BOOL})

SA, PG, MY, LITE = ("sqlalchemy", "sqlalchemy.dialects.postgresql", "sqlalchemy.dialects.mysql",
                    "sqlalchemy.dialects.sqlite")

#: (module, class name) -> TypeSpec.
TYPES: dict[tuple[str, str], TypeSpec] = {}


def _types(module: str, names: str, kind: str, integer: bool = False, **shape) -> None:
    for name in names.split():
        TYPES[(module, name)] = TypeSpec(kind, integer, **shape)


_types(SA, "Integer BigInteger SmallInteger INTEGER BIGINT SMALLINT INT", "other", True)
_types(SA, "String VARCHAR", "string", **_STRING)
_types(SA, "Unicode NVARCHAR NCHAR", "string", **_UNICODE)
_types(SA, "CHAR", "other", **_STRING)
_types(SA, "Text TEXT CLOB", "text", **_STRING)
_types(SA, "UnicodeText", "text", **_UNICODE)
_types(SA, "Enum", "enum", **_ENUM)
_types(SA, "DateTime DATETIME TIMESTAMP Time TIME", "other", **_TZ)
_types(SA, "Date DATE Interval Double REAL", "other")
_types(SA, "Uuid", "other", positional=("as_uuid", "native_uuid"), keywords={"as_uuid": BOOL, "native_uuid": BOOL})
_types(SA, "UUID", "other", positional=("as_uuid",), keywords={"as_uuid": BOOL})
_types(SA, "JSON", "other", positional=("none_as_null",), keywords={"none_as_null": BOOL})
_types(SA, "LargeBinary", "other", positional=("length",), keywords={"length": OPT_INT})
_types(SA, "Float", "other", positional=("precision", "asdecimal"), keywords={"precision": OPT_INT, "asdecimal": BOOL})
_types(SA, "Numeric NUMERIC DECIMAL", "other", **_NUMERIC)
_types(SA, "Boolean BOOLEAN", "other", positional=("create_constraint", "name"),
       keywords={"create_constraint": BOOL, "name": OPT_STR})
_types(PG, "INTEGER BIGINT SMALLINT", "other", True)
_types(PG, "VARCHAR", "string", **_STRING)
_types(PG, "TEXT CITEXT", "text", **_STRING)
_types(PG, "INET CIDR BYTEA TSVECTOR MONEY HSTORE DATE", "other")
_types(PG, "DOUBLE_PRECISION", "other", positional=("precision", "asdecimal"),
       keywords={"precision": OPT_INT, "asdecimal": BOOL})
_types(PG, "JSONB JSON", "other", positional=("none_as_null", "astext_type"),  # autogenerate: astext_type=sa.Text()
       keywords={"none_as_null": BOOL, "astext_type": TYPE})
_types(PG, "UUID", "other", positional=("as_uuid",), keywords={"as_uuid": BOOL})
_types(PG, "TIMESTAMP TIME", "other", positional=("timezone", "precision"),
       keywords={"timezone": BOOL, "precision": OPT_INT})
_types(PG, "ENUM", "enum", **{**_ENUM, "keywords": {"name": OPT_STR, "create_type": BOOL}})
_types(PG, "ARRAY", "other", positional=("item_type",), keywords={"item_type": TYPE}, required=1)
_types(MY, "VARCHAR", "string", **_MYSQL_STRING)
_types(MY, "TEXT", "text", **_MYSQL_STRING)
_types(MY, "MEDIUMTEXT LONGTEXT TINYTEXT", "string", **_MYSQL_TEXT)  # (String subclasses, not Text)
_types(MY, "TINYINT INTEGER BIGINT SMALLINT", "other", True, **_MYSQL_INT)
_types(MY, "DATETIME TIMESTAMP", "other", positional=("timezone", "fsp"), keywords={"timezone": BOOL, "fsp": OPT_INT})
_types(MY, "JSON LONGBLOB MEDIUMBLOB DOUBLE", "other")
_types(LITE, "JSON", "other")
# MySQL's ENUM (an ``Enum``) and SET (a string type as long as its longest value; its values are not members)
_types(MY, "ENUM", "enum", members=True, keywords={"name": OPT_STR, "charset": OPT_STR, "collation": OPT_STR})
_types(MY, "SET", "set", members=True, keywords={"charset": OPT_STR, "collation": OPT_STR})

#: The dialect modules a script may import (``from sqlalchemy.dialects import postgresql``).
DIALECT_MODULES = frozenset({PG, MY, LITE})

#: SQLAlchemy schema constructors and functions ``lint.static`` reads (``sa.Column(...)``), by name in
#: ``sqlalchemy``.
SCHEMA = frozenset({"Column", "ForeignKey", "Computed", "Identity", "PrimaryKeyConstraint", "UniqueConstraint",
                    "ForeignKeyConstraint", "CheckConstraint", "text", "func"})

#: ``sa.func.NAME()`` (no argument) of these names: a server default whose SQL text is ``NAME()``
#: (``policy.alembic_ops.default_text`` of the function; the test checks SQLAlchemy names it so).
FUNCTIONS = frozenset({"now", "current_timestamp", "current_date", "localtimestamp", "gen_random_uuid",
                       "uuid_generate_v4", "random", "clock_timestamp", "utc_timestamp", "statement_timestamp",
                       "transaction_timestamp", "uuid"})

#: ``Column`` keyword arguments and their kinds (``None``: any literal).
COLUMN_KEYWORDS = {"nullable": "bool_or_none", "server_default": "default", "default": None, "unique": "bool_or_none",
                   "primary_key": BOOL, "index": "bool_or_none", "comment": OPT_STR, "autoincrement": "autoincrement"}
#: ``ForeignKey`` keyword arguments (all strings or None).
FOREIGN_KEY_KEYWORDS = frozenset({"ondelete", "onupdate", "name", "initially", "match"})
#: ``Identity`` keyword arguments.
IDENTITY_KEYWORDS = {"always": BOOL, "on_null": "bool_or_none", "start": OPT_INT, "increment": OPT_INT,
                     "minvalue": OPT_INT, "maxvalue": OPT_INT, "cycle": "bool_or_none", "cache": OPT_INT}
#: ``op.create_table`` keyword arguments (besides ``if_not_exists``), all literals.
TABLE_KEYWORDS = frozenset({"schema", "comment", "mysql_engine", "mysql_charset", "mysql_collate",
                            "mysql_default_charset", "sqlite_autoincrement"})

#: The typing names a module may import and use in annotations, and how many parameters each takes when
#: subscripted (None: any number, 0: not subscriptable).
TYPING = {"Union": None, "Optional": 1, "Sequence": 1, "List": 1, "Tuple": None, "Dict": 2, "Any": 0}
#: Builtins an annotation may name (subscriptable, any number of parameters, except ``str``/``int``/...).
BUILTIN_ANNOTATIONS = {"str": 0, "int": 0, "bool": 0, "float": 0, "bytes": 0, "tuple": None, "list": None,
                       "dict": None, "set": None, "frozenset": None}


@dataclass(frozen=True)
class Signature:
    """An alembic operation's parameters: positional (in order; the first *required* must be given),
    keyword-only, and whether it takes any other keyword (``**kw``); *varargs*: ``*columns``."""

    positional: tuple[str, ...]
    required: int
    keywords: frozenset = frozenset()
    any_keyword: bool = False
    varargs: bool = False


def _sig(positional: str, required: int, keywords: str = "", any_keyword: bool = False,
         varargs: bool = False) -> Signature:
    return Signature(tuple(positional.split()), required, frozenset(keywords.split()), any_keyword, varargs)


_ALTER = ("nullable comment server_default new_column_name type_ existing_type existing_server_default "
          "existing_nullable existing_comment")
#: ``op.NAME`` (``Operations``).
OPERATIONS = {
    "add_column": _sig("table_name column", 2, "schema if_not_exists inline_references inline_primary_key"),
    "alter_column": _sig("table_name column_name", 2, _ALTER + " schema", True),
    "create_index": _sig("index_name table_name columns", 3, "schema unique if_not_exists", True),
    "drop_index": _sig("index_name table_name", 1, "schema if_exists", True),
    "create_foreign_key": _sig("constraint_name source_table referent_table local_cols remote_cols", 5,
                               "onupdate ondelete deferrable initially match source_schema referent_schema", True),
    "create_unique_constraint": _sig("constraint_name table_name columns", 3, "schema", True),
    "create_check_constraint": _sig("constraint_name table_name condition", 3, "schema", True),
    "create_primary_key": _sig("constraint_name table_name columns", 3, "schema"),
    "drop_constraint": _sig("constraint_name table_name type_", 2, "schema if_exists"),
    "drop_column": _sig("table_name column_name", 2, "schema", True),
    "drop_table": _sig("table_name", 1, "schema if_exists", True),
    "rename_table": _sig("old_table_name new_table_name", 2, "schema"),
    "create_table_comment": _sig("table_name comment", 2, "existing_comment schema"),
    "drop_table_comment": _sig("table_name", 1, "existing_comment schema"),
    "execute": _sig("sqltext", 1, "execution_options"),
    "create_table": _sig("table_name", 1, "if_not_exists", True, varargs=True),
}
#: ``batch_op.NAME`` (``BatchOperations``: the table is the batch's).
BATCH_OPERATIONS = {
    "add_column": _sig("column", 1, "insert_before insert_after if_not_exists inline_references inline_primary_key"),
    "alter_column": _sig("column_name", 1, _ALTER + " insert_before insert_after", True),
    "create_index": _sig("index_name columns", 2, "", True),
    "drop_index": _sig("index_name", 1, "", True),
    "create_foreign_key": _sig("constraint_name referent_table local_cols remote_cols", 4,
                               "referent_schema onupdate ondelete deferrable initially match", True),
    "create_unique_constraint": _sig("constraint_name columns", 2, "", True),
    "create_check_constraint": _sig("constraint_name condition", 2, "", True),
    "create_primary_key": _sig("constraint_name columns", 2),
    "drop_constraint": _sig("constraint_name type_", 1),
    "drop_column": _sig("column_name", 1, "", True),
    "create_table_comment": _sig("comment", 1, "existing_comment"),
    "drop_table_comment": _sig("", 0, "existing_comment"),
    "execute": _sig("sqltext", 1, "execution_options"),
}
#: ``op.batch_alter_table``'s parameters as the recorder takes them (``lint.offline.recorder``).
BATCH_ALTER_TABLE = _sig("table_name schema recreate", 1, "", True)
