"""Values for a column, generated from its type, that survive a round trip through any of our backends.

Strings start with a unique token (so unique columns stay unique), datetimes
have no microseconds (MariaDB's DATETIME drops them), floats are exact in binary.
``same(a, b)`` compares what was written with what was read back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import random
import string
import uuid
from typing import Any

import sqlalchemy as sa

#: Returned when no value can be generated for a column's type.
SKIP = object()

_tokens = itertools.count(1)
_ALPHABET = string.ascii_lowercase + string.digits
_EPOCH = dt.datetime(2020, 1, 1)


def _token() -> str:
    number, text = next(_tokens), ""
    while number:
        number, digit = divmod(number, 36)
        text = _ALPHABET[digit] + text
    return text


def _python_type(column_type: sa.types.TypeEngine) -> type | None:
    try:
        return column_type.python_type
    except (NotImplementedError, AttributeError):
        return None


def generate(column: sa.Column, rng: random.Random, unique: bool = False) -> Any:
    """A value for *column* (distinct from every other generated value when *unique*), or ``SKIP``."""
    column_type = column.type
    if isinstance(column_type, sa.Enum):
        return rng.choice(column_type.enums) if column_type.enums else SKIP
    kind = _python_type(column_type)
    if kind is bool:
        return rng.random() < 0.5
    if kind is int:
        if isinstance(column_type, sa.SmallInteger):
            return rng.randint(1, 30000)
        return 1_000_000_000 + next(_tokens) if unique else rng.randint(1, 2_000_000_000)
    if kind is float:
        return rng.randint(0, 40000) / 4
    if kind is decimal.Decimal:
        scale = getattr(column_type, "scale", None) or 0
        precision = getattr(column_type, "precision", None) or 10
        digits = max(1, min(precision, 9))
        return decimal.Decimal(rng.randint(0, 10 ** digits - 1)).scaleb(-min(scale, digits))
    if kind is str:
        length = getattr(column_type, "length", None) or 60
        text = f"{_token()}-" + "".join(rng.choices(_ALPHABET, k=rng.randint(1, 20)))
        return text[:length]
    if kind is dt.datetime:
        value = _EPOCH + dt.timedelta(seconds=rng.randint(0, 10**8))
        return value.replace(tzinfo=dt.timezone.utc) if getattr(column_type, "timezone", False) else value
    if kind is dt.date:
        return (_EPOCH + dt.timedelta(days=rng.randint(0, 5000))).date()
    if kind is dt.time:
        return dt.time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
    if kind is dt.timedelta:
        return dt.timedelta(seconds=rng.randint(0, 10**6))
    if kind is bytes:
        return rng.randbytes(min(getattr(column_type, "length", None) or 16, 16))
    if kind is uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128))
    if kind in (dict, list):
        return {"k": rng.randint(0, 1000), "s": _token()}
    return SKIP


def same(written: Any, read: Any) -> bool:
    """Whether *read* is what was *written*, allowing for representation differences of the backends."""
    if written == read:
        return True
    if isinstance(written, float) and isinstance(read, (int, float, decimal.Decimal)):
        return abs(float(read) - written) < 1e-6
    if isinstance(written, decimal.Decimal) and isinstance(read, (int, float, decimal.Decimal)):
        return decimal.Decimal(str(read)) == written
    if isinstance(written, dt.datetime) and isinstance(read, dt.datetime):
        return written.replace(tzinfo=None) == read.astimezone(dt.timezone.utc).replace(tzinfo=None) \
            if read.tzinfo else written.replace(tzinfo=None) == read
    if isinstance(written, bool) and isinstance(read, int):
        return int(written) == read
    return False
