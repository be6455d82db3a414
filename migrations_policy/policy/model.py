"""The normalized operation model every reader produces and every rule reads.

An ``Operation`` is one schema or data change, whatever it was written as: an
alembic op object (``policy.alembic_ops``), a SQL statement classified from
text (``policy.sql``), or a call found in source by the linter's AST pass.
``Effect`` is what the operation does to a live database on one dialect, and
``Verdict`` bundles both with the phase the operation belongs to and the safe
alternative.  This module imports nothing (not even SQLAlchemy) so that a warm,
cached lint run stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

# -- operation kinds ----------------------------------------------------------
CREATE_TABLE = "create_table"
DROP_TABLE = "drop_table"
RENAME_TABLE = "rename_table"
ADD_COLUMN = "add_column"
DROP_COLUMN = "drop_column"
RENAME_COLUMN = "rename_column"
ALTER_TYPE = "alter_type"
CONVERT_CHARSET = "convert_charset"
SET_NOT_NULL = "set_not_null"
DROP_NOT_NULL = "drop_not_null"
SET_DEFAULT = "set_default"
DROP_DEFAULT = "drop_default"
COMMENT = "comment"
CREATE_INDEX = "create_index"
DROP_INDEX = "drop_index"
ADD_FK = "add_fk"
ADD_UNIQUE = "add_unique"
ADD_CHECK = "add_check"
ADD_PK = "add_pk"
DROP_CONSTRAINT = "drop_constraint"
VALIDATE_CONSTRAINT = "validate_constraint"
DROP_OTHER = "drop_other"  # views, sequences, types, ...
ENUM_ADD_VALUE = "enum_add_value"
#: ``varchar(n)`` -> ``varchar(m > n)`` (same collation): ``length_from`` / ``length_to``; ``text``: ``length_to`` 0.
WIDEN_VARCHAR = "widen_varchar"
BATCH_RECREATE = "batch_recreate"  # batch "move and copy" of a whole table
INSERT = "insert"
UPDATE = "update"
DELETE = "delete"
TRUNCATE = "truncate"
DYNAMIC_SQL = "dynamic_sql"  # SQL a DO block builds at run time (EXECUTE format(...)): not seen
OTHER = "other"

#: ``Operation.table`` of a drop whose tables are not known (``DROP TYPE t CASCADE`` drops its columns anywhere).
ANY_TABLE = "*"
DROPS = frozenset({DROP_TABLE, DROP_COLUMN, DROP_INDEX, DROP_CONSTRAINT, DROP_OTHER})
RENAMES = frozenset({RENAME_TABLE, RENAME_COLUMN})
TYPE_CHANGES = frozenset({ALTER_TYPE, CONVERT_CHARSET})
CONSTRAINTS = frozenset({ADD_FK, ADD_UNIQUE, ADD_CHECK, ADD_PK})
ADDITIVE = frozenset({CREATE_TABLE, ADD_COLUMN, CREATE_INDEX})
DML = frozenset({INSERT, UPDATE, DELETE, TRUNCATE})

# -- default expressions (see policy.defaults) ----------------------------------
DEFAULT_NONE = "none"
DEFAULT_CONSTANT = "constant"  # literal: '', 0, 'x', true
DEFAULT_STABLE = "stable"  # evaluated once per statement: now(), CURRENT_TIMESTAMP
DEFAULT_VOLATILE = "volatile"  # per row: random(), gen_random_uuid(), uuid(), nextval()
DEFAULT_EXPRESSION = "expression"  # any other expression

# -- phases ---------------------------------------------------------------------
EXPAND = "expand"
CONTRACT = "contract"
DATA = "data"  # belongs in an online data migration
ANY = "any"  # harmless in either phase
MULTI_STEP = "multi-step"  # no single phase: add new + migrate data + drop old


@dataclass(frozen=True)
class Operation:
    """One change, normalized.  Unknown facts stay at their defaults."""

    kind: str
    table: str | None = None
    column: str | None = None
    name: str | None = None  # index / constraint name
    #: False for NOT NULL columns; None when not stated.
    nullable: bool | None = None
    #: Text of the server-side default ("" when none), and its class (DEFAULT_*).
    server_default: str = ""
    default_kind: str = DEFAULT_NONE
    #: A Python-side ``default=`` without a server default (the database never sees it).
    python_default: bool = False
    #: "stored" / "virtual" for generated columns, "identity" for identity / serial.
    generated: str = ""
    unique: bool = False
    primary_key: bool = False
    concurrently: bool = False
    not_valid: bool = False
    using_index: bool = False  # ADD CONSTRAINT ... USING INDEX
    fulltext: bool = False
    #: The table was created earlier in the same script (it is empty, nobody uses it).
    new_table: bool = False
    #: Recorded inside ``batch_alter_table`` (SQLite applies it by recreating the table).
    in_batch: bool = False
    #: Recorded inside ``autocommit_block()`` (outside any transaction).
    autocommit: bool = False
    #: MySQL ``foreign_key_checks`` was switched off earlier in the script.
    fk_checks_off: bool = False
    #: The value of a session setting (``name="foreign_key_checks"``, ``value="off"``) or
    #: a transaction statement (``name="transaction"``, ``value="commit"``).
    value: str = ""
    #: The one dialect whose SQL syntax this is ("" when portable or not raw SQL): raw
    #: ``CONVERT TO CHARACTER SET`` / ``MODIFY`` is MySQL's, ``ALTER TYPE`` PostgreSQL's.
    #: On another dialect the statement cannot run, so nothing is judged there.
    only_on: str = ""
    #: ``WIDEN_VARCHAR``: the old and new length in characters, and the bytes per character of
    #: the column's character set when the type names it (0: unknown, any of 1, 3 or 4).
    length_from: int = 0
    length_to: int = 0
    bytes_per_char: int = 0
    #: Where it came from: "alembic", "sql" or "source" (AST fallback), and a short text.
    source: str = "alembic"
    text: str = ""

    def with_(self, **changes) -> "Operation":
        """``dataclasses.replace``, 2-3x faster (no ``__init__`` to run: fields have no defaults to compute)."""
        unknown = changes.keys() - _OPERATION_FIELDS
        if unknown:
            return replace(self, **changes)  # raises the usual TypeError
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def describe(self) -> str:
        """``drop_column users.email`` style label for messages."""
        target = self.table or "?"
        if self.column:
            target += f".{self.column}"
        elif self.name and self.kind not in (CREATE_TABLE, DROP_TABLE):
            target = f"{self.name} on {target}"
        elif self.kind in _NAMED_OBJECT_KINDS:  # ``op.drop_constraint(None, "t")`` in a batch
            target = f"(unnamed) on {target}"
        return f"{self.kind.replace('_', ' ')} {target}"


#: Kinds that act on a named constraint or index of the table.
_NAMED_OBJECT_KINDS = frozenset({CREATE_INDEX, DROP_INDEX, ADD_FK, ADD_UNIQUE, ADD_CHECK, ADD_PK, DROP_CONSTRAINT,
                                 VALIDATE_CONSTRAINT})

_OPERATION_FIELDS = frozenset(f.name for f in fields(Operation))


@dataclass(frozen=True)
class Context:
    """What the classification needs to know about the target servers."""

    postgresql_version: int = 15
    mysql_flavor: str = "mariadb"


@dataclass(frozen=True)
class Effect:
    """What an operation does to a live database on one dialect."""

    lock: str = ""  # e.g. "ACCESS EXCLUSIVE", "SHARE", "ALGORITHM=COPY"
    blocks_reads: bool = False
    blocks_writes: bool = False  # for longer than a brief metadata lock
    rewrite: bool = False  # table (and indexes) rewritten or copied
    scan: bool = False  # full scan while the lock is held
    fails: str = ""  # why it fails (on a non-empty table, or at all)
    no_transaction: bool = False  # refused inside a transaction block
    unvalidated: bool = False  # existing rows are never checked
    same_value: bool = False  # a per-row default evaluated once for all old rows
    note: str = ""  # one line for people: what happens and why it hurts

    @property
    def blocking(self) -> bool:
        return self.blocks_reads or self.blocks_writes or self.rewrite

    @property
    def safe(self) -> bool:
        return not (self.blocking or self.fails or self.unvalidated or self.same_value)


QUIET = Effect()


@dataclass(frozen=True)
class Verdict:
    """The knowledge base's answer for one operation on one dialect."""

    operation: Operation
    dialect: str
    phase: str  # EXPAND / CONTRACT / DATA / ANY / MULTI_STEP
    effect: Effect = field(default=QUIET)
    alternative: str = ""

    def allowed_in(self, phase: str) -> bool:
        """May this operation run in a script of *phase* without hurting a live database?"""
        if self.phase not in (phase, ANY):
            return False
        return phase == CONTRACT or self.effect.safe
