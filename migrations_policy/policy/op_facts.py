"""The facts of alembic's column and alter operations, from plain values (no SQLAlchemy, no alembic).

Two readers build ``Operation``s from what a script asked alembic to do: ``policy.alembic_ops`` reads
the op objects of a script that ran (SQLAlchemy ``Column`` and type objects), ``lint.static`` reads a
plain script's syntax tree without running it.  Both reduce what they read to the plain values below
and call the same functions, so one judgement decides both: ``column_facts``, ``autoincrements``,
``TypeFacts`` / ``widening`` / ``appends_members``, ``alter_column_ops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migrations_policy.policy import model as m
from migrations_policy.policy.defaults import default_kind

#: ``alter_column``'s "not given" for ``server_default`` and ``comment`` (alembic's own: False).
NOT_GIVEN = False


def quoted_default(text: str) -> str:
    """The SQL text of a server default given as a Python string: a quoted literal."""
    return "'" + text.replace("'", "''") + "'"


def autoincrements(primary_key: bool, autoincrement: Any, has_server_default: bool, has_other_default: bool,
                   integer: bool) -> bool:
    """An integer primary key column SQLAlchemy renders as the table's autoincrement column (``SERIAL``,
    ``AUTO_INCREMENT``) -- as ``op.add_column`` adds it: alone in its table, so it is that column.
    *has_other_default*: a Python-side default that is not a ``Sequence``; *integer*: the type's affinity is
    ``Integer``."""
    if not primary_key or autoincrement is False or has_server_default or has_other_default:
        return False
    return integer


def column_facts(name: Any, nullable: Any, text: str, generated: str, python_default: bool, unique: Any,
                 primary_key: Any) -> dict[str, Any]:
    """The ``Operation`` fields of an added column: *text* is its server default's SQL ("" when none),
    *python_default* whether it has a Python-side ``default=``."""
    return dict(
        column=name,
        nullable=bool(nullable),
        server_default=text,
        default_kind=default_kind(text),
        python_default=python_default and not text,
        generated=generated,
        unique=bool(unique),
        primary_key=bool(primary_key),
    )


@dataclass(frozen=True)
class TypeFacts:
    """What the policy reads of a column type: *kind* ``"string"`` (``String`` but not ``CHAR``, ``Text`` nor
    ``Enum``), ``"text"``, ``"enum"`` or ``"other"``; its length, collation and (MySQL) character set; *enums*
    the members of an ``Enum`` given as an instance (None for a class or another type)."""

    kind: str
    length: Any = None
    collation: Any = None
    charset: Any = None
    enums: tuple | None = None


#: Bytes per character of the MySQL/MariaDB character sets a type may name.
_CHARSET_BYTES = {"latin1": 1, "ascii": 1, "binary": 1, "utf8": 3, "utf8mb3": 3, "utf8mb4": 4}


def widening(old: TypeFacts | None, new: TypeFacts | None) -> dict[str, int] | None:
    """``length_from`` / ``length_to`` / ``bytes_per_char`` when *new* only lengthens the ``VARCHAR`` *old*
    (same collation and character set), else None.  ``CHAR`` (padded) and ``Enum`` are other types.  *new* an
    unbounded ``Text``: ``length_to`` 0 (``text``: binary-coercible on PostgreSQL, a copy on MySQL/MariaDB)."""
    if old is None or new is None:
        return None

    def plain(t: TypeFacts) -> bool:
        return t.kind == "string" and isinstance(t.length, int)

    def text(t: TypeFacts) -> bool:
        return t.kind == "text" and t.length is None

    def unbounded(t: TypeFacts) -> bool:  # VARCHAR without a length (PostgreSQL): also binary-coercible to text
        return t.kind == "string" and t.length is None

    if not (plain(old) and (text(new) or plain(new) and new.length > old.length) or unbounded(old) and text(new)):
        return None
    charsets = {old.charset, new.charset}
    if old.collation != new.collation or len(charsets) != 1:
        return None
    charset = charsets.pop() or (old.collation or "").split("_")[0]
    return {"length_from": old.length or 0, "length_to": 0 if text(new) else new.length,
            "bytes_per_char": _CHARSET_BYTES.get(charset, 0)}


def appends_members(old: TypeFacts | None, new: TypeFacts | None) -> bool:
    """An ``Enum`` whose new members only append to the old ones (same order): no dialect rewrites for it
    (MySQL appends in place; PostgreSQL adds enum values with ``ALTER TYPE``)."""
    old_members, new_members = (None if t is None else t.enums for t in (old, new))
    if old_members is None or new_members is None:
        return False
    return len(new_members) > len(old_members) and new_members[:len(old_members)] == old_members


def alter_column_ops(table: Any, column: Any, new_name: Any, type_given: bool, old: TypeFacts | None,
                     new: TypeFacts | None, nullable: Any, existing_nullable: Any, server_default: Any,
                     comment_given: bool) -> list[m.Operation]:
    """The operations of ``alter_column``: *server_default* is ``NOT_GIVEN``, None (dropped) or the new
    default's SQL text; *old* / *new* the facts of ``existing_type`` / ``type_``."""
    base = m.Operation(kind=m.OTHER, table=table, column=column)
    ops = []
    if new_name:
        ops.append(base.with_(kind=m.RENAME_COLUMN, name=new_name))
    if type_given:
        facts = widening(old, new)
        if facts:
            ops.append(base.with_(kind=m.WIDEN_VARCHAR, **facts))
        else:
            ops.append(base.with_(kind=m.ENUM_ADD_VALUE if appends_members(old, new) else m.ALTER_TYPE))
    if nullable is not None and not (existing_nullable is not None and bool(existing_nullable) == bool(nullable)):
        # existing_nullable equal to nullable: the column already is so (neutron's type changes state both)
        ops.append(base.with_(kind=m.DROP_NOT_NULL if nullable else m.SET_NOT_NULL))
    if server_default is not NOT_GIVEN:
        if server_default is None:
            ops.append(base.with_(kind=m.DROP_DEFAULT))
        else:
            ops.append(base.with_(kind=m.SET_DEFAULT, server_default=server_default,
                                  default_kind=default_kind(server_default)))
    if comment_given:
        ops.append(base.with_(kind=m.COMMENT))
    return ops
