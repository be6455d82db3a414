"""Inline ignores: ``# migrations-policy: ignore[CODE, CODE] reason`` on a line or the line above.

A comment at the end of a line covers that line; a comment on a line of its own
covers the next line (and itself).

Only real comments count (found with ``tokenize``, so the text inside a string never
does).  The reason is mandatory: an ignore without one suppresses nothing and is itself
reported (``MP002``); an ignore that matches no finding is reported as unused (``MP003``).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

MARKER = "migrations-policy:"
_IGNORE = re.compile(r"#\s*migrations-policy:\s*ignore\[([^\]]*)\]\s*(.*)$", re.IGNORECASE)


@dataclass
class Ignore:
    line: int
    codes: frozenset[str]
    reason: str
    own_line: bool = False
    used: set[str] = field(default_factory=set)

    def covers(self, line: int, code: str) -> bool:
        lines = (self.line, self.line + 1) if self.own_line else (self.line,)
        return bool(self.reason) and code in self.codes and line in lines


def find_ignores(source: str) -> list[Ignore]:
    """The ignore comments of *source* (cheap when there are none)."""
    if MARKER not in source:
        return []
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            match = _IGNORE.search(tok.string)
            if match:
                codes = frozenset(c.strip().upper() for c in match.group(1).split(",") if c.strip())
                own_line = tok.line[: tok.start[1]].strip() == ""
                found.append(Ignore(tok.start[0], codes, match.group(2).strip(), own_line))
    except (tokenize.TokenError, SyntaxError):
        return found
    return found
