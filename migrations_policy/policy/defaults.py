"""Classify a column default expression: constant, stable, volatile or other.

``default_kind("gen_random_uuid()") == DEFAULT_VOLATILE``.  The per-dialect
modules decide what each class costs (PostgreSQL >= 11 adds a constant or
stable default without touching rows; a volatile one rewrites the table).

Fails closed: a call of any function not known here as stable (``STABLE``) or
immutable (``IMMUTABLE``) counts as volatile -- ``uuid_generate_v1mc()``, a
project's own function, a quoted name (``"random"()``) or a schema-qualified one.
"""

from __future__ import annotations

import re

from migrations_policy.policy.model import (DEFAULT_CONSTANT,
    DEFAULT_EXPRESSION,
    DEFAULT_NONE,
    DEFAULT_STABLE,
    DEFAULT_VOLATILE)

#: Evaluated once per statement: every existing row gets the same value, as intended.
STABLE = frozenset({
    "now", "current_timestamp", "current_date", "current_time", "localtimestamp", "localtime",
    "transaction_timestamp", "statement_timestamp", "current_user", "session_user", "user",
    "utc_timestamp", "sysdate", "getdate",
})
#: Evaluated per row: adding such a default must compute a value for every row.
VOLATILE = frozenset({
    "random", "rand", "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v4", "uuid",
    "uuid_short", "sys_guid", "nextval", "clock_timestamp", "timeofday", "randomblob", "newid",
})
#: Same result for the same arguments: harmless in a default (the row values do not differ).
IMMUTABLE = frozenset({
    "lower", "upper", "coalesce", "nullif", "greatest", "least", "concat", "concat_ws", "length", "char_length",
    "abs", "round", "floor", "ceil", "ceiling", "trim", "ltrim", "rtrim", "substr", "substring", "replace",
    "cast", "convert", "to_jsonb", "to_json", "jsonb_build_object", "json_build_object", "json_object",
    "json_array", "jsonb_build_array", "json_build_array", "array", "row", "timezone", "make_interval",
    "to_char", "date_trunc", "extract", "date", "datetime", "strftime", "time", "julianday", "interval",
})
_CONSTANT = re.compile(
    r"""^\(?\s*(?:'(?:[^']|'')*'|"[^"]*"|[-+]?\d+(?:\.\d+)?|true|false|null)\s*\)?"""
    r"""(?:\s*::\s*[\w\s\[\]()]+)?$""",
    re.IGNORECASE,
)
_NAME = r'(?:"(?:[^"]|"")+"|`[^`]+`|\[[^\]]+\]|[A-Za-z_][\w$]*)'
#: A (possibly qualified, possibly quoted) name followed by "(": a function call.
_FUNCTION = re.compile(rf"({_NAME}(?:\s*\.\s*{_NAME})*)\s*\(")
_BARE_KEYWORD = re.compile(r"^\(?\s*([A-Za-z_]+)\s*\)?$")


def functions_in(text: str) -> set[str]:
    """Lower-case names of the functions called in a default expression (strings masked)."""
    masked = re.sub(r"'(?:[^']|'')*'", "''", text)
    found = {_unquote(re.findall(_NAME, name)[-1]).lower() for name in _FUNCTION.findall(masked)}
    bare = _BARE_KEYWORD.match(masked)
    if bare and bare.group(1).lower() in STABLE:
        found.add(bare.group(1).lower())
    return found


def _unquote(name: str) -> str:
    if name[:1] in ('"', "`", "["):
        return name[1:-1].replace('""', '"')
    return name


def default_kind(text: str | None) -> str:
    """DEFAULT_NONE / CONSTANT / STABLE / VOLATILE / EXPRESSION for the SQL text of a default."""
    if text is None or not str(text).strip():
        return DEFAULT_NONE
    text = str(text).strip()
    if _CONSTANT.match(text):
        return DEFAULT_CONSTANT
    names = functions_in(text)
    if names & VOLATILE or names - STABLE - IMMUTABLE:  # unknown functions: possibly volatile
        return DEFAULT_VOLATILE
    if names and names <= STABLE:
        return DEFAULT_STABLE
    return DEFAULT_EXPRESSION
