"""SQL text to tokens as one dialect's server reads it (``sql_lexer.tokens(sql, reading)``).

sqlparse's lexer is dialect-blind: it takes ``\\'`` as an escape in every string, ``#``
as a comment, and ``/*! ... */`` as a comment, so ``SELECT 'x\\'; ALTER TABLE users DROP
COLUMN email; --'`` is one harmless statement to it while PostgreSQL runs the ``ALTER``.
Here the places where servers differ -- strings, quoted identifiers, comments,
dollar quotes, executable comments -- are scanned by the rules of one *reading*
(``READINGS``), and only the plain code between them (no quote, comment, ``#``, ``$``
or backslash left) is given to sqlparse.  Where a server setting changes the reading
(PostgreSQL ``standard_conforming_strings``; MySQL ``NO_BACKSLASH_ESCAPES`` and
``ANSI_QUOTES``) each setting is a reading of its own: ``sql.from_sql`` classifies every
reading of the linted dialects and keeps what any of them finds (fails closed).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

from migrations_policy.policy.sql_tokens import OTHER, QUOTED, STRING, Tok


class Reading(NamedTuple):
    dialect: str
    backslash: bool = False  # '...' strings take backslash escapes
    ansi_quotes: bool = True  # "..." is an identifier (else a string, as MySQL's default)


#: The readings of each dialect (every server setting that changes where a token ends).
READINGS = {
    "postgresql": (Reading("postgresql"), Reading("postgresql", backslash=True)),
    "mysql": tuple(Reading("mysql", backslash=b, ansi_quotes=a) for b in (True, False) for a in (False, True)),
    "sqlite": (Reading("sqlite"),),
}


class _Lazy:
    """A pattern compiled when first matched: the classes spanning all of Unicode cost ~20 ms to compile, which
    every lint run paid at import although most never scan (their SQL takes ``sql_lexer``'s fast path)."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags, self.compiled = pattern, flags, None

    def match(self, *args):
        if self.compiled is None:
            self.compiled = re.compile(self.pattern, self.flags)
        return self.compiled.match(*args)


_IDENT = _Lazy(r"[\w$\x80-\U0010ffff]")
_DOLLAR = _Lazy(r"\$(?:[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$")
_EXECUTABLE = _Lazy(r"/\*(?:M?!)(?:\d{5,6})?")
_UESCAPE = _Lazy(r"\s*UESCAPE\s*'(.)'", re.IGNORECASE)


class _Scan:
    def __init__(self, sql: str, reading: Reading, code: Callable[[str], list]):
        self.sql, self.r, self.code = sql, reading, code
        self.out: list = []

    def run(self) -> list:
        self._scan(0, len(self.sql))
        return self.out

    def _flush(self, start: int, end: int) -> None:
        if start < end:
            self.out.extend(self.code(self.sql[start:end]))

    def _scan(self, pos: int, end: int) -> None:
        sql, dialect = self.sql, self.r.dialect
        run = pos
        while pos < end:
            ch = sql[pos]
            nxt = sql[pos + 1] if pos + 1 < end else ""
            if ch in "'\"" or (ch == "`" and dialect != "postgresql") or (ch == "[" and dialect == "sqlite"):
                prefix = self._prefix(run, pos, ch)
                self._flush(run, pos - len(prefix))
                pos = self._quoted(pos, end, prefix)
            elif ch == "/" and nxt == "*":
                self._flush(run, pos)
                executable = _EXECUTABLE.match(sql, pos, end) if dialect == "mysql" else None
                close = self._comment_end(pos, end)
                if executable:  # /*!50000 ... */, /*M! ... */: MySQL / MariaDB run the text inside
                    self._scan(executable.end(), close - 2 if sql.endswith("*/", 0, close) else close)
                pos = close
            elif ch == "-" and nxt == "-":
                self._flush(run, pos)
                if dialect != "mysql" or pos + 2 >= end or sql[pos + 2] <= " ":
                    pos = self._line_end(pos, end)
                else:  # MySQL: "--" then no space is two minus signs
                    self.out.append(Tok(OTHER, ch, ch))
                    pos += 1
            elif ch == "#" and dialect == "mysql":
                self._flush(run, pos)
                pos = self._line_end(pos, end)
            elif ch == "$" and dialect == "postgresql" and not (pos and _IDENT.match(sql[pos - 1])) \
                    and _DOLLAR.match(sql, pos, end):
                self._flush(run, pos)
                pos = self._dollar(pos, end)
            elif ch in "#$\\´[]`":
                self._flush(run, pos)
                self.out.append(Tok(OTHER, ch, ch))
                pos += 1
            else:
                pos += 1
                continue
            run = pos
        self._flush(run, end)

    def _prefix(self, run: int, pos: int, quote: str) -> str:
        """The string prefix that changes how PostgreSQL reads the literal (``E'``, ``U&'``, ``U&"``)."""
        if self.r.dialect != "postgresql" or quote == "`":
            return ""
        for prefix in (("E",) if quote == "'" else ()) + ("U&",):
            start = pos - len(prefix)
            if start >= run and self.sql[start:pos].upper() == prefix and not (
                    start and _IDENT.match(self.sql[start - 1])):
                return self.sql[start:pos]
        return ""

    def _quoted(self, pos: int, end: int, prefix: str) -> int:
        sql, quote = self.sql, self.sql[pos]
        sql_close = "]" if quote == "[" else quote
        string = quote == "'"  # "..." is a name token in every reading (MySQL's "string" ends where it would)
        if string:
            backslash = self.r.backslash or prefix.upper() == "E"
        else:
            backslash = quote == '"' and self.r.dialect == "mysql" and not self.r.ansi_quotes and self.r.backslash
        i = pos + 1
        while i < end:
            c = sql[i]
            if backslash and c == "\\":
                i += 2
                continue
            if c == sql_close:
                if i + 1 < end and sql[i + 1] == sql_close and quote != "[":
                    i += 2
                    continue
                i += 1
                break
            i += 1
        i = min(i, end)
        raw = prefix + sql[pos:i]
        if string:
            self.out.append(Tok(STRING, raw, raw))
            return i
        value = sql[pos + 1:i - 1].replace(sql_close * 2, sql_close) if quote != "[" else sql[pos + 1:i - 1]
        if prefix.upper() == "U&":
            escape = _UESCAPE.match(sql, i, end)
            value = _unicode(value, escape.group(1) if escape else "\\")
            i = escape.end() if escape else i
            raw = sql[pos - len(prefix):i]
        self.out.append(Tok(QUOTED, value, raw))
        return i

    def _comment_end(self, pos: int, end: int) -> int:
        """The end of the block comment at *pos* (PostgreSQL nests them); *end* when unclosed."""
        depth, i = 0, pos
        while i < end:
            if self.sql.startswith("/*", i) and (depth == 0 or self.r.dialect == "postgresql"):
                depth, i = depth + 1, i + 2
            elif self.sql.startswith("*/", i):
                depth, i = depth - 1, i + 2
                if depth == 0:
                    return i
            else:
                i += 1
        return end

    def _line_end(self, pos: int, end: int) -> int:
        found = self.sql.find("\n", pos, end)
        return end if found < 0 else found + 1

    def _dollar(self, pos: int, end: int) -> int:
        tag = _DOLLAR.match(self.sql, pos, end).group()
        close = self.sql.find(tag, pos + len(tag), end)
        stop = end if close < 0 else close + len(tag)
        self.out.append(Tok(STRING, self.sql[pos:stop], self.sql[pos:stop]))
        return stop


def _unicode(value: str, escape: str) -> str:
    """A PostgreSQL ``U&"..."`` identifier's name: ``\\0078`` / ``\\+000078`` decoded, ``\\\\`` is ``\\``."""
    out, i = [], 0
    while i < len(value):
        if value[i] != escape:
            out.append(value[i])
            i += 1
            continue
        rest = value[i + 1:]
        if rest[:1] == escape:
            out.append(escape)
            i += 2
        elif rest[:1] == "+" and re.fullmatch(r"[0-9A-Fa-f]{6}", rest[1:7] or "-"):
            out.append(_chr(int(rest[1:7], 16)))
            i += 8
        elif re.fullmatch(r"[0-9A-Fa-f]{4}", rest[:4] or "-"):
            out.append(_chr(int(rest[:4], 16)))
            i += 5
        else:  # PostgreSQL refuses the statement: keep the text
            out.append(value[i])
            i += 1
    return "".join(out)


def _chr(code: int) -> str:
    return chr(code) if code < 0x110000 else "\ufffd"


def scan(sql: str, reading: Reading, code: Callable[[str], list]) -> list:
    """The tokens of *sql* as *reading*'s server splits it; *code* lexes the plain text between."""
    return _Scan(sql, reading, code).run()
