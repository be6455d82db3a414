"""The token of the SQL lexers (``sql_lexer``, ``sql_scan``)."""

from __future__ import annotations

from typing import NamedTuple

WORD, QUOTED, STRING, NUMBER, PUNCT, OTHER = "word", "quoted", "string", "number", "punct", "other"


class Tok(NamedTuple):
    """One token (a named tuple: built ~5x faster than a frozen dataclass)."""

    kind: str
    value: str  # keywords upper-cased; quoted identifiers unquoted
    raw: str = ""  # as written

    def is_(self, *words: str) -> bool:
        return self.kind == WORD and self.value in words
