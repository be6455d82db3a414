"""Conversions that never raise: a value the target type cannot hold becomes NULL.

A type change copies the old column into the new one twice: in release N's own writes (the
sync trigger's ``up``) and in the data migration.  ``CAST('A1' AS INTEGER)`` raises on
PostgreSQL and strict MariaDB (release N's INSERT would fail because of an expand) and is 0 on
SQLite (the value silently lost).  ``converted(column, sa.Integer())`` is the value when the
text is an integer the type holds, else NULL: the trigger leaves the new column NULL, the
data migration leaves the row pending (``unconvertible``: the runner reports it as stuck, the
gate waits) until someone fixes the value.

The same holds for an integer copied into a smaller integer type (``BIGINT`` -> ``INTEGER``): out
of range it fails release N's write on PostgreSQL and strict MariaDB and is kept as it is by
SQLite.  ``converted(column, sa.Integer())`` of an integer column is the value when the new type
holds it (``BETWEEN`` its bounds), else NULL, and ``unconvertible`` leaves the row pending.

The test of text is textual and conservative: optional blanks, an optional sign, 1 to N digits (N:
9 for INTEGER, 4 for SMALLINT, 18 for BIGINT, so the value always fits).  A value it rejects
is reported, never lost.  PostgreSQL ``~``, MariaDB/MySQL ``REGEXP``; SQLite (no REGEXP
unless the connection registers one, which release N's may not) with ``GLOB``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.functions import FunctionElement

#: Digits an integer type always holds.
_DIGITS = ((sa.SmallInteger, 4), (sa.BigInteger, 18), (sa.Integer, 9))


def integer_digits(type_: Any) -> int | None:
    """The digits *type_* always holds when it is an integer type, else None."""
    for cls, digits in _DIGITS:
        if isinstance(type_, cls):
            return digits
    return None


#: The bits of each integer type (the first that matches).
_BITS = ((sa.SmallInteger, 16), (sa.BigInteger, 64), (sa.Integer, 32))


def integer_bits(type_: Any) -> int | None:
    """The bits of *type_* when it is an integer type, else None."""
    for cls, bits in _BITS:
        if isinstance(type_, cls):
            return bits
    return None


def needs_guard(old: Any, new: Any) -> bool:
    """A copy from *old* to *new* may raise (or coerce) for some values: text -> integer, or an
    integer into a smaller integer type."""
    if isinstance(old, sa.String):
        return integer_digits(new) is not None
    old_bits, new_bits = integer_bits(old), integer_bits(new)
    return old_bits is not None and new_bits is not None and new_bits < old_bits


def always_holds(old: Any, new: Any) -> bool:
    """Every value of *old* is a value of *new* as it is, so a plain copy never fails nor changes
    one (a longer or unbounded string, a wider integer, an enum gaining values, a wider numeric,
    the same kind otherwise); False when that cannot be shown."""
    if isinstance(old, sa.Enum) or isinstance(new, sa.Enum):
        return isinstance(old, sa.Enum) and isinstance(new, sa.Enum) and set(old.enums) <= set(new.enums)
    if isinstance(old, sa.String) and isinstance(new, sa.String):
        return new.length is None or (old.length is not None and old.length <= new.length)
    old_bits, new_bits = integer_bits(old), integer_bits(new)
    if old_bits is not None or new_bits is not None:
        return old_bits is not None and new_bits is not None and old_bits <= new_bits
    if isinstance(old, sa.Numeric) and isinstance(new, sa.Numeric) and not isinstance(old, sa.Float) \
            and not isinstance(new, sa.Float):
        if new.precision is None:
            return True
        if old.precision is None:
            return False
        old_scale, new_scale = old.scale or 0, new.scale or 0
        return new_scale >= old_scale and new.precision - new_scale >= old.precision - old_scale
    if isinstance(old, sa.Numeric) or isinstance(new, sa.Numeric):
        return isinstance(old, sa.Float) and isinstance(new, sa.Float)
    return old._type_affinity is new._type_affinity


class integer_text(FunctionElement):
    """True when the text argument is an integer of at most ``digits`` digits (NULL: NULL)."""

    type = sa.Boolean()
    inherit_cache = True
    name = "integer_text"


@compiles(integer_text)
def _integer_text_default(element: integer_text, compiler: Any, **kw: Any) -> str:
    value, digits = list(element.clauses)
    pattern = sa.literal(f"^[[:space:]]*[-+]?[0-9]{{1,{digits.value}}}[[:space:]]*$")
    op = "REGEXP" if compiler.dialect.name in ("mysql", "mariadb") else "~"
    return f"({compiler.process(value, **kw)} {op} {compiler.process(pattern, **kw)})"


@compiles(integer_text, "sqlite")
def _integer_text_sqlite(element: integer_text, compiler: Any, **kw: Any) -> str:
    value, digits = list(element.clauses)
    text = f"trim({compiler.process(value, **kw)})"
    lit = lambda s: compiler.process(sa.literal(s), **kw)  # noqa: E731
    max_length = compiler.process(sa.literal(digits.value + 1), **kw)
    return (f"(({text} GLOB {lit('[0-9]*')} OR {text} GLOB {lit('[-+][0-9]*')}) "
            f"AND substr({text}, 2) NOT GLOB {lit('*[^0-9]*')} AND length({text}) <= {max_length})")


def convertible(value: ColumnElement, new_type: Any) -> ColumnElement[bool]:
    """*value* (text, or an integer) holds a value of *new_type* (an integer type)."""
    bits = integer_bits(getattr(value, "type", None))
    if bits is not None:  # an integer: within the new type's bounds
        top = 2 ** (integer_bits(new_type) - 1)
        return value.between(sa.literal(-top, sa.BigInteger()), sa.literal(top - 1, sa.BigInteger()))
    digits = integer_digits(new_type)
    return integer_text(value, sa.literal(digits, sa.Integer()))


def converted(value: ColumnElement, new_type: Any) -> ColumnElement:
    """*value* as *new_type* when it holds one, else NULL (never raises, never coerces)."""
    return sa.case((convertible(value, new_type), sa.cast(value, new_type)), else_=sa.null())


def unconvertible(value: ColumnElement, new_type: Any) -> ColumnElement[bool]:
    """A non-NULL *value* that *new_type* cannot hold (its row stays pending)."""
    return sa.and_(value.is_not(None), sa.not_(convertible(value, new_type)))
