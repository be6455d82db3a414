"""Classify a column default expression: constant, stable, volatile or other.

``default_kind("gen_random_uuid()") == DEFAULT_VOLATILE``.  The per-dialect
modules decide what each class costs (PostgreSQL >= 11 adds a constant or
stable default without touching rows; a volatile one rewrites the table).
"""

from __future__ import annotations

import re

from .model import DEFAULT_CONSTANT, DEFAULT_EXPRESSION, DEFAULT_NONE, DEFAULT_STABLE, DEFAULT_VOLATILE

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
_CONSTANT = re.compile(
    r"""^\(?\s*(?:'(?:[^']|'')*'|"[^"]*"|[-+]?\d+(?:\.\d+)?|true|false|null)\s*\)?"""
    r"""(?:\s*::\s*[\w\s\[\]()]+)?$""",
    re.IGNORECASE,
)
_FUNCTION = re.compile(r"([A-Za-z_][\w.]*)\s*\(")
_BARE_KEYWORD = re.compile(r"^\(?\s*([A-Za-z_]+)\s*\)?$")


def functions_in(text: str) -> set[str]:
    """Lower-case names of the functions called in a default expression (strings masked)."""
    masked = re.sub(r"'(?:[^']|'')*'", "''", text)
    found = {name.rsplit(".", 1)[-1].lower() for name in _FUNCTION.findall(masked)}
    bare = _BARE_KEYWORD.match(masked)
    if bare and bare.group(1).lower() in STABLE:
        found.add(bare.group(1).lower())
    return found


def default_kind(text: str | None) -> str:
    """DEFAULT_NONE / CONSTANT / STABLE / VOLATILE / EXPRESSION for the SQL text of a default."""
    if text is None or not str(text).strip():
        return DEFAULT_NONE
    text = str(text).strip()
    if _CONSTANT.match(text):
        return DEFAULT_CONSTANT
    names = functions_in(text)
    if names & VOLATILE:
        return DEFAULT_VOLATILE
    if names and names <= STABLE:
        return DEFAULT_STABLE
    return DEFAULT_EXPRESSION
