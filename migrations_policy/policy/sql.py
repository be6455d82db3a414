"""Classify SQL text into normalized operations, with sqlparse's lexer (``sql_lexer``).

``from_sql("ALTER TABLE t DROP COLUMN c; -- DROP TABLE x")`` returns one
``drop_column`` operation: the lexer marks comments, string literals, quoted
identifiers and dollar-quoted bodies, so only real keywords in their syntactic
position count (a column named ``drop`` or a literal ``'RENAME'`` never
triggers).  Statements are split on top-level semicolons.  Unknown statements
become ``other``.  A PostgreSQL ``DO`` block runs its body at once, so the
statements of its body are classified too (``IF ... THEN ALTER TABLE ...``,
``EXECUTE 'constant SQL'``); SQL it builds at run time (``EXECUTE format(...)``)
becomes a ``dynamic_sql`` operation (the linter warns, ``MP131``).  Function bodies
(run when called, not when created) stay opaque.  The text is read as each linted
dialect's server would split it (``sql_scan``; ``reading_for`` / *dialects*), and
what any reading finds counts: a statement hidden from one lexer is not hidden.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Callable, Iterator

import re

from migrations_policy.policy import model as m
from migrations_policy.policy.defaults import default_kind
from migrations_policy.policy.sql_lexer import NUMBER, OTHER, PUNCT, QUOTED, STRING, WORD, Tok, plain, tokens  # noqa: F401 (re-exported)
from migrations_policy.policy.sql_scan import READINGS, Reading

_COLUMN_CONSTRAINT_WORDS = {"NOT", "NULL", "REFERENCES", "UNIQUE", "PRIMARY", "CHECK", "CONSTRAINT", "GENERATED",
                            "COLLATE", "COMMENT", "AUTO_INCREMENT", "ON", "AS", "STORED", "VIRTUAL", "PERSISTENT",
                            "FIRST", "AFTER", "INVISIBLE"}
_SERIAL_TYPES = {"SERIAL", "BIGSERIAL", "SMALLSERIAL", "SERIAL4", "SERIAL8", "SERIAL2"}
_DROP_TARGETS = {"CONSTRAINT": m.DROP_CONSTRAINT, "FOREIGN": m.DROP_CONSTRAINT, "CHECK": m.DROP_CONSTRAINT,
                 "PRIMARY": m.DROP_CONSTRAINT, "INDEX": m.DROP_INDEX, "KEY": m.DROP_INDEX}


_END = Tok(OTHER, "", "")


#: Definitions whose ``BEGIN ... END`` body (statements separated by ``;``) is one statement with them.
_BODIED = {"TRIGGER", "FUNCTION", "PROCEDURE", "EVENT"}
#: Words after ``END`` that close a block no ``BEGIN``/``CASE`` opened (``END IF``, ``END LOOP``, ...).
_END_OF = {"IF", "LOOP", "WHILE", "REPEAT", "FOR"}


def statements(sql: str, reading: Reading | None = None) -> list[list[Tok]]:
    """*sql* split into statements (lists of tokens) on top-level semicolons, as *reading* splits it.
    A ``CREATE TRIGGER/FUNCTION/PROCEDURE/EVENT`` with a ``BEGIN ... END`` body (MariaDB, SQLite,
    PostgreSQL's ``BEGIN ATOMIC``) is one statement up to its ``END``, as the server reads it: its
    body runs when the routine is called or the trigger fires, not when it is defined."""
    result: list[list[Tok]] = []
    current: list[Tok] = []
    toks = tokens(sql, reading)
    depth = 0
    for i, tok in enumerate(toks):
        if tok.kind == WORD and current and current[0].is_("CREATE"):
            if tok.value == "BEGIN" and (depth or any(t.kind == WORD and t.value in _BODIED for t in current)):
                depth += 1
            elif tok.value == "CASE" and depth:
                depth += 1
            elif tok.value == "END" and depth:
                following = toks[i + 1] if i + 1 < len(toks) else _END
                if not (following.kind == WORD and following.value in _END_OF):
                    depth -= 1
        if tok.kind == PUNCT and tok.value == ";" and not depth:
            if current:
                result.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        result.append(current)
    return result


class _Cursor:
    def __init__(self, toks: list[Tok]):
        self.toks, self.i = toks, 0

    def peek(self, k: int = 0) -> Tok:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else _END

    def accept(self, *words: str) -> bool:
        """Consume *words* if they come next (all of them), else nothing."""
        for k, word in enumerate(words):
            if not self.peek(k).is_(word):
                return False
        self.i += len(words)
        return True

    def optional(self, *phrases: tuple[str, ...]) -> None:
        for phrase in phrases:
            self.accept(*phrase)

    def name(self) -> str | None:
        """An identifier, possibly qualified (``schema.table``): its last part."""
        tok = self.peek()
        if tok.kind not in (WORD, QUOTED):
            return None
        self.i += 1
        while self.peek().kind == PUNCT and self.peek().value == "." and self.peek(1).kind in (WORD, QUOTED):
            tok = self.peek(1)
            self.i += 2
        return tok.value if tok.kind == QUOTED else tok.value.lower()

    def rest(self) -> list[Tok]:
        return self.toks[self.i:]


def _split_top_level(toks: list[Tok]) -> list[list[Tok]]:
    parts, current, depth = [], [], 0
    for tok in toks:
        if tok.kind == PUNCT and tok.value == "(":
            depth += 1
        elif tok.kind == PUNCT and tok.value == ")":
            depth -= 1
        if depth == 0 and tok.kind == PUNCT and tok.value == ",":
            parts.append(current)
            current = []
        else:
            current.append(tok)
    parts.append(current)
    return [p for p in parts if p]


def _text(toks: list[Tok]) -> str:
    return " ".join(t.raw for t in toks).replace("( ", "(").replace(" )", ")").replace(" (", "(")


def _has(toks: list[Tok], *words: str) -> bool:
    """Whether the keyword sequence *words* occurs in *toks*."""
    first, rest, count = words[0], words[1:], len(toks) - len(words) + 1
    for i in range(max(count, 0)):
        tok = toks[i]
        if tok.value == first and tok.kind == WORD and all(toks[i + k].is_(w) for k, w in enumerate(rest, 1)):
            return True
    return False


def _column_definition(table: str, cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    column = cur.name()
    rest = cur.rest()
    ops = []
    default, i = "", 0
    while i < len(rest):
        if rest[i].is_("DEFAULT"):
            j, depth = i + 1, 0
            while j < len(rest) and (depth or not (rest[j].kind == WORD and rest[j].value in _COLUMN_CONSTRAINT_WORDS)):
                depth += rest[j].value == "(" if rest[j].kind == PUNCT else 0
                depth -= rest[j].value == ")" if rest[j].kind == PUNCT else 0
                j += 1
            default = _text(rest[i + 1:j])
            i = j
        else:
            i += 1
    generated = ""
    if rest and rest[0].kind == WORD and rest[0].value in _SERIAL_TYPES or _has(rest, "AUTO_INCREMENT") or _has(rest, "IDENTITY"):
        generated = "identity"
    elif _has(rest, "STORED") or _has(rest, "PERSISTENT"):
        generated = "stored"
    elif _has(rest, "VIRTUAL") or (_has(rest, "AS") and _has(rest, "GENERATED")):
        generated = "virtual"
    nullable = False if _has(rest, "NOT", "NULL") or _has(rest, "PRIMARY", "KEY") else (True if _has(rest, "NULL") else None)
    ops.append(base.with_(kind=m.ADD_COLUMN, table=table, column=column, nullable=nullable, server_default=default,
                          default_kind=default_kind(default), generated=generated,
                          unique=_has(rest, "UNIQUE"), primary_key=_has(rest, "PRIMARY", "KEY")))
    if _has(rest, "REFERENCES"):
        ops.append(base.with_(kind=m.ADD_FK, table=table, column=column, not_valid=_has(rest, "NOT", "VALID")))
    return ops


def _table_constraint(table: str, cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    name = cur.name() if cur.accept("CONSTRAINT") else None
    rest = cur.rest()
    flags = dict(table=table, name=name, not_valid=_has(rest, "NOT", "VALID"), using_index=_has(rest, "USING", "INDEX"))
    first = cur.peek()
    if first.is_("FOREIGN"):
        return [base.with_(kind=m.ADD_FK, **flags)]
    if first.is_("CHECK"):
        return [base.with_(kind=m.ADD_CHECK, **flags)]
    if first.is_("PRIMARY"):
        return [base.with_(kind=m.ADD_PK, **flags)]
    if first.is_("UNIQUE"):
        return [base.with_(kind=m.ADD_UNIQUE, **flags)]
    if first.is_("INDEX", "KEY", "FULLTEXT", "SPATIAL"):
        return [base.with_(kind=m.CREATE_INDEX, table=table, fulltext=first.is_("FULLTEXT"))]
    return []


def _alter_column(table: str, cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    column = cur.name()
    op = base.with_(table=table, column=column)
    if cur.accept("SET", "DATA", "TYPE") or cur.accept("TYPE"):
        return [op.with_(kind=m.ALTER_TYPE)]
    if cur.accept("SET", "NOT", "NULL"):
        return [op.with_(kind=m.SET_NOT_NULL)]
    if cur.accept("DROP", "NOT", "NULL"):
        return [op.with_(kind=m.DROP_NOT_NULL)]
    if cur.accept("SET", "DEFAULT"):
        text = _text(cur.rest())
        return [op.with_(kind=m.SET_DEFAULT, server_default=text, default_kind=default_kind(text))]
    if cur.accept("DROP", "DEFAULT"):
        return [op.with_(kind=m.DROP_DEFAULT)]
    return [op.with_(kind=m.OTHER)]


def _alter_table_action(table: str, toks: list[Tok], base: m.Operation) -> list[m.Operation]:
    cur = _Cursor(toks)
    if cur.accept("ADD"):
        if cur.peek().is_("CONSTRAINT", "FOREIGN", "CHECK", "PRIMARY", "UNIQUE", "INDEX", "KEY", "FULLTEXT", "SPATIAL"):
            return _table_constraint(table, cur, base)
        cur.accept("COLUMN")
        cur.accept("IF", "NOT", "EXISTS")
        return _column_definition(table, cur, base)
    if cur.accept("DROP"):
        target = cur.peek()
        for word, kind in _DROP_TARGETS.items():
            if target.is_(word):
                cur.accept(word)
                cur.optional(("KEY",), ("IF", "EXISTS"))
                return [base.with_(kind=kind, table=table, name=cur.name())]
        cur.accept("COLUMN")
        cur.accept("IF", "EXISTS")
        return [base.with_(kind=m.DROP_COLUMN, table=table, column=cur.name())]
    if cur.accept("RENAME"):
        if cur.accept("TO") or cur.accept("AS"):
            return [base.with_(kind=m.RENAME_TABLE, table=table, name=cur.name())]
        if cur.peek().is_("CONSTRAINT", "INDEX", "KEY"):
            return [base.with_(kind=m.OTHER, table=table)]
        explicit = cur.accept("COLUMN")
        column = cur.name()
        if not explicit and not cur.peek().is_("TO"):  # MySQL's RENAME [TO|AS] is optional: RENAME new_name
            return [base.with_(kind=m.RENAME_TABLE, table=table, name=column)]
        return [base.with_(kind=m.RENAME_COLUMN, table=table, column=column)]
    if cur.accept("ALTER"):
        cur.accept("COLUMN")
        return _alter_column(table, cur, base)
    if cur.accept("MODIFY"):
        cur.accept("COLUMN")
        return [base.with_(kind=m.ALTER_TYPE, table=table, column=cur.name(), only_on="mysql")]
    if cur.accept("CHANGE"):
        cur.accept("COLUMN")
        old, new = cur.name(), cur.name()
        ops = [base.with_(kind=m.ALTER_TYPE, table=table, column=old, only_on="mysql")]
        if new and old != new:
            ops.insert(0, base.with_(kind=m.RENAME_COLUMN, table=table, column=old, only_on="mysql"))
        return ops
    if cur.accept("CONVERT", "TO", "CHARACTER", "SET") or cur.accept("CONVERT", "TO", "CHARSET"):
        return [base.with_(kind=m.CONVERT_CHARSET, table=table, only_on="mysql")]
    if cur.accept("VALIDATE", "CONSTRAINT"):
        return [base.with_(kind=m.VALIDATE_CONSTRAINT, table=table, name=cur.name())]
    return []


def _alter(cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    cur.optional(("ONLINE",), ("IGNORE",))  # MariaDB's ALTER ONLINE TABLE, ALTER IGNORE TABLE
    if cur.accept("TABLE"):
        cur.optional(("IF", "EXISTS"), ("ONLY",))
        table = cur.name()
        if cur.peek().kind == OTHER and cur.peek().value == "*":  # PostgreSQL: the table and its descendants
            cur.i += 1
        ops = []
        for action in _split_top_level(cur.rest()):
            ops.extend(_alter_table_action(table, action, base))
        return ops or [base.with_(kind=m.OTHER, table=table)]
    if cur.accept("TYPE"):
        name = cur.name()
        kind = m.ENUM_ADD_VALUE if cur.accept("ADD", "VALUE") else m.OTHER
        return [base.with_(kind=kind, name=name, only_on="postgresql")]
    return [base.with_(kind=m.OTHER)]


def _create(cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    unique = cur.accept("UNIQUE")
    fulltext = cur.accept("FULLTEXT")
    cur.accept("SPATIAL")
    if cur.accept("INDEX"):
        concurrently = cur.accept("CONCURRENTLY")
        cur.accept("IF", "NOT", "EXISTS")
        name = None if cur.peek().is_("ON") else cur.name()
        cur.accept("ON")
        cur.accept("ONLY")
        return [base.with_(kind=m.CREATE_INDEX, table=cur.name(), name=name, unique=unique,
                           concurrently=concurrently, fulltext=fulltext)]
    replaces = False
    while cur.peek().is_("TEMP", "TEMPORARY", "UNLOGGED", "GLOBAL", "LOCAL", "OR", "REPLACE"):
        replaces = replaces or cur.peek().is_("REPLACE")
        cur.i += 1
    if cur.accept("TABLE"):
        cur.accept("IF", "NOT", "EXISTS")
        table = cur.name()
        created = base.with_(kind=m.CREATE_TABLE, table=table)
        # MariaDB's CREATE OR REPLACE TABLE drops the table (and its rows) first
        return [base.with_(kind=m.DROP_TABLE, table=table), created] if replaces else [created]
    return [base.with_(kind=m.OTHER)]


def _drop(cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    if cur.accept("TABLE"):
        cur.accept("IF", "EXISTS")
        names = []
        for part in _split_top_level(cur.rest()):
            names.append(_Cursor(part).name())
        return [base.with_(kind=m.DROP_TABLE, table=n) for n in names if n]
    if cur.accept("INDEX"):
        concurrently = cur.accept("CONCURRENTLY")
        cur.accept("IF", "EXISTS")
        name = cur.name()
        table = cur.name() if cur.accept("ON") else None
        return [base.with_(kind=m.DROP_INDEX, name=name, table=table, concurrently=concurrently)]
    if cur.peek().is_("DOMAIN", "TYPE") and _has(cur.rest(), "CASCADE"):  # drops the columns of that type too
        what = _text(cur.rest()[:2]).lower()
        return [base.with_(kind=m.DROP_OTHER, name=what),
                base.with_(kind=m.DROP_COLUMN, table=m.ANY_TABLE, column=f"<every column of {what}>")]
    return [base.with_(kind=m.DROP_OTHER, name=_text(cur.rest()[:2]).lower())]


def _dml(cur: _Cursor, base: m.Operation, kind: str) -> list[m.Operation]:
    if kind == m.INSERT and (cur.accept("OR", "REPLACE") or _has(cur.rest(), "DO", "UPDATE")
                             or _has(cur.rest(), "DUPLICATE", "KEY", "UPDATE")):
        kind = m.UPDATE  # SQLite's INSERT OR REPLACE, an upsert: rows it finds are rewritten
    cur.optional(("OR", "IGNORE"), ("OR", "ABORT"), ("OR", "FAIL"), ("OR", "ROLLBACK"),
                 ("IGNORE",), ("LOW_PRIORITY",), ("QUICK",), ("INTO",), ("FROM",), ("TABLE",), ("ONLY",))
    return [base.with_(kind=kind, table=cur.name())]


#: Words after which ``UPDATE`` is not a statement (``FOR UPDATE``, ``DO UPDATE``, ``KEY UPDATE``,
#: ``ON UPDATE`` of a foreign key).
_NOT_A_STATEMENT_BEFORE = ("FOR", "DO", "KEY", "ON")


def _with(toks: list[Tok], base: m.Operation, reading: Reading | None) -> list[m.Operation]:
    """``WITH q AS (DELETE ... RETURNING ...) SELECT ...`` (PostgreSQL's data-modifying ``WITH``,
    MariaDB's ``WITH ... DELETE``): what each data-modifying statement in it does."""
    found: list[m.Operation] = []
    for i, tok in enumerate(toks):
        if i and tok.kind == WORD and tok.value in ("DELETE", "UPDATE", "INSERT", "MERGE") \
                and not toks[i - 1].is_(*_NOT_A_STATEMENT_BEFORE):
            found.extend(o for o in classify_statement(toks[i:], base.text, reading) if o.kind in m.DML)
    return found or [base]


def _truncate(cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    """``TRUNCATE [TABLE] [ONLY] a [*], b, ...``: every table it empties (PostgreSQL lists several)."""
    cur.optional(("TABLE",))
    found = []
    while True:
        cur.optional(("ONLY",))
        found.append(base.with_(kind=m.TRUNCATE, table=cur.name()))
        if cur.peek().kind == PUNCT and cur.peek().value == "*":
            cur.i += 1
        if not (cur.peek().kind == PUNCT and cur.peek().value == ","):
            return found
        cur.i += 1


def _set(cur: _Cursor, base: m.Operation) -> list[m.Operation]:
    rest = cur.rest()
    words = [t.value for t in rest if t.kind == WORD]
    if "FOREIGN_KEY_CHECKS" in words:
        value = rest[-1].value.upper()
        return [base.with_(kind=m.OTHER, name="foreign_key_checks", value="off" if value in ("0", "OFF", "FALSE") else "on")]
    return [base.with_(kind=m.OTHER)]


#: Statements of a PL/pgSQL body that act on the database, where they may start.
_BODY_STATEMENTS = {"ALTER", "CREATE", "DROP", "TRUNCATE", "UPDATE", "DELETE", "INSERT", "REINDEX"}
#: PL/pgSQL words after which a statement starts (``IF ... THEN <statement>``).
_BODY_LEADS = {"BEGIN", "THEN", "ELSE", "LOOP"}


def _string_body(tok: Tok) -> str | None:
    """The text inside a string literal: ``$tag$...$tag$`` or ``'...'`` (None for other forms)."""
    raw = tok.raw
    if raw[:2] in ("E'", "e'"):  # PostgreSQL's escape string: backslash escapes
        return re.sub(r"\\(.)", r"\1", raw[2:-1].replace("''", "'"), flags=re.S) if raw.endswith("'") else None
    if raw.startswith("$"):
        end = raw.find("$", 1)
        tag = raw[:end + 1]
        if end > 0 and len(raw) >= 2 * len(tag) and raw.endswith(tag):
            return raw[len(tag):-len(tag)]
        return None
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    return None


def _do_block(toks: list[Tok], base: m.Operation, reading: Reading | None) -> list[m.Operation]:
    """``DO [LANGUAGE plpgsql] 'body'``: what the body's statements do, each found where a
    PL/pgSQL statement may start, plus ``EXECUTE 'constant SQL'``."""
    body = next((_string_body(t) for t in toks if t.kind == STRING), None)
    if body is None:
        return [base]
    found: list[m.Operation] = []
    for statement in statements(body, reading):
        depth = 0
        for i, tok in enumerate(statement):
            if tok.kind == PUNCT and tok.value in "()":
                depth += 1 if tok.value == "(" else -1
                continue
            if depth or tok.kind != WORD:
                continue
            if tok.value in _BODY_STATEMENTS and (i == 0 or statement[i - 1].is_(*_BODY_LEADS)):
                found.extend(classify_statement(statement[i:], _text(statement[i:])[:200], reading))
                break
            if tok.value == "EXECUTE":
                rest = statement[i + 1:]
                constant = rest and rest[0].kind == STRING and (len(rest) == 1 or rest[1].is_("USING", "INTO"))
                sql = _string_body(rest[0]) if constant else None
                if sql is None:
                    found.append(base.with_(kind=m.DYNAMIC_SQL, text=_text(statement[i:])[:200]))
                else:
                    found.extend(_operations(sql, (reading,)))
                break
    return found or [base]


#: What ``EXPLAIN ANALYZE`` (PostgreSQL) and ``ANALYZE`` (MariaDB) run when they explain it.
_EXPLAINED = {"SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "REPLACE", "WITH", "VALUES", "TABLE", "CREATE",
              "EXECUTE", "DECLARE"}


def classify_statement(toks: list[Tok], text: str = "", reading: Reading | None = None) -> list[m.Operation]:
    """The operations of one statement (see ``statements``)."""
    base = m.Operation(kind=m.OTHER, source="sql", text=text)
    cur = _Cursor(toks)
    first = cur.peek()
    cur.i += 1
    if first.is_("DO"):
        return _do_block(toks, base, reading)
    if first.is_("ALTER"):
        return _alter(cur, base)
    if first.is_("CREATE"):
        return _create(cur, base)
    if first.is_("DROP"):
        return _drop(cur, base)
    if first.is_("RENAME") and cur.accept("TABLE"):  # RENAME TABLE a TO b, c TO d: every pair
        return [base.with_(kind=m.RENAME_TABLE, table=_Cursor(pair).name()) for pair in _split_top_level(cur.rest())]
    if first.is_("PREPARE", "EXECUTE") or _has(toks, "EXECUTE", "IMMEDIATE"):
        return [base.with_(kind=m.DYNAMIC_SQL, name="prepared")]  # a prepared / EXECUTE IMMEDIATE statement: its SQL is not read
    if first.is_("BEGIN") and cur.accept("NOT", "ATOMIC"):  # MariaDB's compound statement: its first statement
        return classify_statement(cur.rest(), text, reading)
    if first.is_("TRUNCATE"):
        return _truncate(cur, base)
    if first.is_("EXPLAIN", "ANALYZE", "DESCRIBE", "DESC"):  # PostgreSQL's EXPLAIN ANALYZE, MariaDB's ANALYZE
        rest = cur.rest()                                     # run the statement they explain: read it
        start = next((i for i, t in enumerate(rest) if t.kind == WORD and t.value in _EXPLAINED), None)
        if start is not None and (first.is_("ANALYZE") or _has(rest[:start], "ANALYZE")):
            return classify_statement(rest[start:], text, reading)
    if first.is_("WITH"):
        return _with(toks, base, reading)
    for word, kind in (("UPDATE", m.UPDATE), ("DELETE", m.DELETE), ("INSERT", m.INSERT),
                       ("REPLACE", m.UPDATE), ("MERGE", m.UPDATE)):
        if first.is_(word):
            return _dml(cur, base, kind)
    if first.is_("SET"):
        return _set(cur, base)
    if first.is_("COMMIT", "END"):
        return [base.with_(kind=m.OTHER, name="transaction", value="commit")]
    if first.is_("BEGIN", "START"):
        return [base.with_(kind=m.OTHER, name="transaction", value="begin")]
    if first.is_("REINDEX"):
        return [base.with_(kind=m.OTHER, concurrently=_has(toks, "CONCURRENTLY"))]
    return [base]


#: The dialects ``from_sql`` reads for when its caller does not say (``reading_for``).
_DIALECTS: ContextVar[tuple[str, ...] | None] = ContextVar("migrations_policy_sql_dialects", default=None)


@contextmanager
def reading_for(*dialects: str) -> Iterator[None]:
    """Within it, ``from_sql`` reads SQL as *dialects*' servers do (the linter: the dialect recorded)."""
    token = _DIALECTS.set(tuple(dialects))
    try:
        yield
    finally:
        _DIALECTS.reset(token)


def _readings(dialects) -> tuple[Reading, ...]:
    names = [{"mariadb": "mysql"}.get(d, d) for d in dialects or _DIALECTS.get() or READINGS]
    if not all(name in READINGS for name in names):
        names = list(READINGS)  # an unknown dialect: read as every server would
    return tuple(reading for name in dict.fromkeys(names) for reading in READINGS[name])


@lru_cache(maxsize=4096)
def _operations(sql: str, readings: tuple[Reading | None, ...]) -> tuple[m.Operation, ...]:
    """The operations of every reading of *sql* (each reading's once; in order of first appearance)."""
    ops: dict[m.Operation, None] = {}
    seen: set[tuple[Tok, ...]] = set()
    for reading in readings[:1] if plain(sql) else readings:
        split = tuple(tuple(toks) for toks in statements(sql, reading))
        if split in seen:
            continue
        seen.add(split)
        for toks in split:
            ops.update(dict.fromkeys(classify_statement(list(toks), _text(list(toks))[:200], reading)))
    return tuple(ops)


def may_drop_table(sql: str) -> bool:
    """False only when *sql* cannot drop a table under any reading: ``DROP`` (or ``REPLACE``) is a
    keyword, which no server spells other than with its letters in a row (comments, quotes and escapes separate or
    wrap tokens, never build one).  The sync keeper asks it before lexing every statement a migration
    executes (``from_sql`` then decides); most of them are DML with placeholders, which the lexer's
    fast path does not take.  MariaDB's ``CREATE OR REPLACE TABLE`` drops one too (``REPLACE``)."""
    text = sql.upper()
    return "DROP" in text or "REPLACE" in text


#: Set by ``noting_divergence``: the dialects to compare with, and whether a text read differently for one.
_DIVERGENCE: ContextVar[tuple[tuple[str, ...], list[bool]] | None] = ContextVar(
    "migrations_policy_sql_divergence", default=None)


@contextmanager
def noting_divergence(*dialects: str) -> Iterator[Callable[[], bool]]:
    """Within it, ``from_sql`` notes whether a text it reads gives other operations for one of *dialects* than
    for what it is read for; the yielded function answers.  A recording made for one dialect stands for the
    others only when it answers False (the linter records a script that never names its dialect once)."""
    found = [False]
    token = _DIVERGENCE.set((tuple(dialects), found))
    try:
        yield lambda: found[0]
    finally:
        _DIVERGENCE.reset(token)


def from_sql(sql: str, dialects: tuple[str, ...] | None = None) -> list[m.Operation]:
    """Every operation in *sql* (one or more statements) as any server of *dialects* would run it (default:
    those of ``reading_for``, else every dialect): where servers or their settings split the text differently
    (``sql_scan``), the operations of each reading; memoized per distinct text."""
    ops = _operations(sql, _readings(dialects))
    watch = _DIVERGENCE.get()
    if watch is not None and not watch[1][0] and not plain(sql):
        watch[1][0] = any(_operations(sql, _readings((dialect,))) != ops for dialect in watch[0])
    return list(ops)


def dropped_triggers(sql: str) -> list[str]:
    """The triggers / trigger functions *sql* drops or takes out of action, by name (a qualified
    name's last part; unquoted names lower-cased): ``DROP TRIGGER`` / ``DROP FUNCTION``;
    ``CREATE OR REPLACE TRIGGER`` / ``FUNCTION`` (a replaced body); ``ALTER TRIGGER`` /
    ``ALTER FUNCTION ... RENAME``; ``ALTER TABLE t DISABLE TRIGGER name`` and ``ENABLE REPLICA`` /
    ``ALWAYS TRIGGER name`` (no longer fires for ordinary writes).  ``DISABLE`` / ``ENABLE
    REPLICA|ALWAYS TRIGGER ALL`` or ``USER`` gives ``*t``: every trigger of table ``t``."""
    upper = sql.upper()
    if "TRIGGER" not in upper and "FUNCTION" not in upper:
        return []
    names = []
    for toks in statements(sql):
        cur = _Cursor(toks)
        if cur.accept("DROP") and (cur.accept("TRIGGER") or cur.accept("FUNCTION")):
            cur.accept("IF", "EXISTS")
            names.extend(name for part in _split_top_level(cur.rest()) for name in [_Cursor(part).name()] if name)
        elif cur.accept("CREATE", "OR", "REPLACE"):
            names.extend(_replaced_trigger(cur))
        elif cur.accept("ALTER"):
            names.extend(_altered_triggers(cur))
    return names


def _replaced_trigger(cur: _Cursor) -> list[str]:
    while cur.i < len(cur.toks) and not cur.peek().is_("TRIGGER", "FUNCTION", "PROCEDURE", "VIEW", "TABLE"):
        cur.i += 1  # DEFINER = `u`@`h`, CONSTRAINT ...
    if cur.accept("TRIGGER") or cur.accept("FUNCTION"):
        name = cur.name()
        return [name] if name else []
    return []


def _altered_triggers(cur: _Cursor) -> list[str]:
    if cur.accept("TRIGGER") or (cur.accept("FUNCTION") and _has(cur.rest(), "RENAME")):
        name = cur.name()
        return [name] if name else []
    if not cur.accept("TABLE"):
        return []
    cur.optional(("IF", "EXISTS"), ("ONLY",))
    table = cur.name()
    names = []
    for action in _split_top_level(cur.rest()):
        act = _Cursor(action)
        if act.accept("DISABLE", "TRIGGER") or act.accept("ENABLE", "REPLICA", "TRIGGER") \
                or act.accept("ENABLE", "ALWAYS", "TRIGGER"):
            if act.peek().is_("ALL", "USER"):
                names.append(f"*{table}")
            else:
                names.extend([name] if (name := act.name()) else [])
    return names
