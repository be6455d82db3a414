"""SQL text to ``Tok`` lists: sqlparse's lexer, with a fast path for plain statements.

``tokens(sql)`` drops whitespace and comments, marks string literals and quoted
identifiers, and splits multi-word keywords.  sqlparse tries ~60 regular
expressions at every position, which costs ~0.1 ms per short statement; most
statements a migration executes (``UPDATE t SET c = 1``, ``ALTER TABLE t ADD
COLUMN c integer``) use only words, integers, plain quotes and ``(),;.=*``.  For
those, ``_fast_tokens`` gives exactly what sqlparse gives (tests/lint compare
both on generated input); anything else -- comments, ``$``, operators,
backslashes, non-ASCII, numbers glued to letters or dots, the few keywords
sqlparse lexes specially -- goes to sqlparse unchanged -- or, given a *reading* (``sql_scan.Reading``),
is split as that dialect's server splits it (``sql_scan``), sqlparse lexing only
the plain code between strings and comments.  Results are memoized per distinct
text and reading.
"""

from __future__ import annotations

import re
from functools import lru_cache

from migrations_policy.policy.sql_tokens import NUMBER, OTHER, PUNCT, QUOTED, STRING, WORD, Tok  # noqa: F401 (re-exported)


#: Texts made only of these characters may take the fast path.
_PLAIN = re.compile(r"[A-Za-z0-9_ \t\r\n(),;.=*'\"]*\Z")
_TOKEN = re.compile(
    r"(?P<space>\s+)|(?P<word>[A-Za-z_]\w*)|(?P<number>\d+)(?![\w.])|(?P<string>'(?:''|[^'])*')"
    r"|(?P<quoted>\"(?:\"\"|[^\"])*\")|(?P<punct>[(),;])|(?P<dot>\.)(?!\d)|(?P<other>=+|\*)",
    re.ASCII,
)
#: Words sqlparse lexes as operators or as part of a special multi-token pattern.
_SPECIAL_WORDS = frozenset({"LIKE", "ILIKE", "RLIKE", "REGEXP", "GO", "ZONE"})


@lru_cache(maxsize=4096)
def _plain_word(upper: str) -> bool:
    """Whether sqlparse gives *upper* a keyword or name type (``Tok`` kind ``word``)."""
    from sqlparse import tokens as T
    from sqlparse.lexer import Lexer

    if upper in _SPECIAL_WORDS:
        return False
    ttype = Lexer.get_default_instance().is_keyword(upper)[0]
    return ttype in T.Keyword or ttype in T.Name


def _fast_tokens(sql: str) -> list[Tok] | None:
    """The tokens of a plain *sql* text, or None when sqlparse must decide."""
    if "\\" in sql or not _PLAIN.match(sql):
        return None
    out: list[Tok] = []
    pos, end = 0, len(sql)
    while pos < end:
        found = _TOKEN.match(sql, pos)
        if found is None:
            return None
        pos, kind, value = found.end(), found.lastgroup, found.group()
        if kind == "space":
            continue
        if kind == "word":
            if not _plain_word(value.upper()):
                return None
            out.append(Tok(WORD, value.upper(), value))
        elif kind == "quoted":
            out.append(Tok(QUOTED, value[1:-1], value))
        elif kind in ("dot", "punct"):
            out.append(Tok(PUNCT, value, value))
        else:
            out.append(Tok({"number": NUMBER, "string": STRING, "other": OTHER}[kind], value, value))
    return out


def _sqlparse_tokens(sql: str) -> list[Tok]:
    from sqlparse import lexer
    from sqlparse import tokens as T

    out: list[Tok] = []
    for ttype, value in lexer.tokenize(sql):
        if ttype in T.Whitespace or ttype in T.Newline or ttype in T.Comment:
            continue
        if ttype in T.Literal.String.Symbol or (ttype in T.Name and value[:1] in "`\"["):
            out.append(Tok(QUOTED, value[1:-1], value))
        elif ttype in T.Literal.String or ttype in T.Literal.String.Single or ttype is T.Literal:
            out.append(Tok(STRING, value, value))
        elif ttype in T.Literal.Number:
            out.append(Tok(NUMBER, value, value))
        elif ttype in T.Keyword or ttype in T.Name:
            out.extend(Tok(WORD, part.upper(), part) for part in value.split())
        elif ttype in T.Punctuation:
            out.append(Tok(PUNCT, value, value))
        else:
            out.append(Tok(OTHER, value, value))
    return out


@lru_cache(maxsize=4096)
def _fast_cached(sql: str) -> tuple[Tok, ...] | None:
    """``_fast_tokens`` memoized: ``plain(sql)`` and then ``tokens(sql)`` lex a text once, not twice."""
    fast = _fast_tokens(sql)
    return None if fast is None else tuple(fast)


@lru_cache(maxsize=4096)
def _cached_tokens(sql: str, reading=None) -> tuple[Tok, ...]:
    fast = _fast_cached(sql)
    if fast is not None:  # no comment, backslash, "#" or "$": every server splits it the same way
        return fast
    if reading is None:
        return tuple(_sqlparse_tokens(sql))
    from migrations_policy.policy.sql_scan import scan

    return tuple(scan(sql, reading, _sqlparse_tokens))


def tokens(sql: str, reading=None) -> list[Tok]:
    """Lex *sql*, dropping whitespace and comments and splitting multi-word keywords: as *reading*
    (a ``sql_scan.Reading``) splits it, or sqlparse's dialect-blind way when None."""
    return list(_cached_tokens(sql, reading))


def plain(sql: str) -> bool:
    """Whether every reading of *sql* gives the same tokens (the fast path applies)."""
    return _fast_cached(sql) is not None
