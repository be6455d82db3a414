"""Revision headers read from source text, and the phase of each script.

``read_header(text, path)`` reads ``revision`` / ``down_revision`` / ``branch_labels``
as alembic would find them on the imported module, without importing it: literals
are read directly (the fast path); anything else -- several statements on one line
(``revision = "a"; down_revision = None``), names and attributes
(``branch_labels = (migration.CONTRACT_BRANCH,)``) -- is read from the module's AST,
names resolved through the module's own constant assignments and through the modules
it imports (their source found next to the script or in a parent directory, parsed,
never executed).  It also says whether the revision declares required data
migrations (``requires_data_migrations = ...`` or ``op.require_data_migrations(...)``).

A script's phase is, in order: ``--phase``; the branch label (``expand`` /
``contract``) found by walking ``down_revision`` through the scripts in the same
directories; a directory named ``expand`` or ``contract`` in its path; otherwise
``expand`` (a project without the expand/contract layout has one branch, and it must
stay compatible with the running code -- as ``revisions.branch_statuses`` counts it).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from migrations_policy.core.config import CONTRACT, EXPAND

PHASES = (EXPAND, CONTRACT)
#: ``PhaseResolver.branch`` of a revision whose history is not all among the linted files.
UNKNOWN = "?"
_HEADER = re.compile(
    r"^(revision|down_revision|branch_labels|depends_on)\s*(?::[^=\n]+)?=\s*(.+?)\s*(?:#.*)?$", re.MULTILINE
)


@dataclass(frozen=True)
class Header:
    revision: str | None
    down_revisions: tuple[str, ...]
    branch_labels: tuple[str, ...]
    #: The revision declares required data migrations (the gate's definition of a contract revision).
    requires_data: bool = False
    #: The source assigns or imports a name ``revision`` at all, even where its value cannot be read statically
    #: (``revision = f"..."``, ``from m import X as revision``, in an ``if``, not a string): alembic would load it.
    declared: bool = False
    #: ``depends_on``: revisions (or branch labels) applied before this one, though not its parents.
    depends_on: tuple[str, ...] = ()


def _tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list, set, frozenset)):
        return tuple(str(v) for v in value)
    return ()


#: A quoted string without quotes, backslashes or newlines inside: its value is what is between the quotes.
_SIMPLE_STRING = r"'[^'" + '"' + r"\\\n]*'|" + '"' + r"[^'" + '"' + r"\\\n]*" + '"'
_STRING = re.compile(_SIMPLE_STRING)
_SEQUENCE = re.compile(rf"([(\[])\s*((?:(?:{_SIMPLE_STRING})\s*,\s*)*(?:{_SIMPLE_STRING})?)\s*([)\]])")


def _literal(raw: str):
    """``ast.literal_eval(raw)``, without parsing for the usual header values (None, 'x', ('x', 'y'))."""
    if raw == "None":
        return None
    if _STRING.fullmatch(raw):
        return raw[1:-1]
    found = _SEQUENCE.fullmatch(raw)
    if found and (found[1] + found[3]) in ("()", "[]"):
        items = [item[1:-1] for item in _STRING.findall(found[2])]
        if found[1] == "[":
            return items
        if len(items) == 1 and not found[2].rstrip().endswith(","):
            return items[0]  # ("x") is a string
        return tuple(items)
    return ast.literal_eval(raw)


_DECLARES = re.compile(r"(?:^|;)[ \t]*revision[ \t]*(?::[^=\n]+)?=(?!=)|\bas[ \t]+revision\b|"
                       r"^[ \t]*from[ \t][^\n]*\bimport\b[^\n]*\brevision\b", re.MULTILINE)
_REQUIRES_ATTRIBUTE = re.compile(r"^requires_data_migrations\s*(?::[^=\n]+)?=\s*(.*)$", re.MULTILINE)
_REQUIRES_CALL = re.compile(r"\.require_data_migrations\s*\(")
_EMPTY = ("None", "()", "[]", "(,)", "set()", "frozenset()", "''", '""')


def _requires_data(text: str) -> bool:
    """``requires_data_migrations = <anything but an empty literal>`` or an ``op.require_data_migrations(`` call."""
    if _REQUIRES_CALL.search(text):
        return True
    return any(value.split("#")[0].strip() not in _EMPTY for value in _REQUIRES_ATTRIBUTE.findall(text))


def read_header(text: str, path: Path | None = None, consulted: list[str] | None = None) -> Header:
    """The header of *text*; the files of the modules read to resolve it are appended to *consulted*.

    ``declared`` fails closed: besides ``revision = ...`` at a line start, any way the module may bind the name
    (``revision, down_revision = ...``, ``(revision := ...)``, ``for revision in ...``, ``globals()["revision"]``,
    ``exec("revision = ...")``) counts, anywhere in the file (see ``header_ast.header_facts``)."""
    values: dict[str, object] = {}
    unresolved = False
    for name, raw in _HEADER.findall(text):
        if name in values:
            continue
        try:
            values[name] = _literal(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            values[name] = None
            unresolved = True
    declared = isinstance(values.get("revision"), str) or bool(_DECLARES.search(text))
    if unresolved or (not declared and "revision" in text):
        from migrations_policy.lint.script.header_ast import header_facts

        found, may_bind = header_facts(text, path, consulted)
        values.update(found)
        declared = declared or may_bind
    revision = values.get("revision")
    return Header(
        revision=revision if isinstance(revision, str) else None,
        down_revisions=_tuple(values.get("down_revision")),
        branch_labels=_tuple(values.get("branch_labels")),
        requires_data=_requires_data(text),
        declared=declared or isinstance(revision, str),
        depends_on=_tuple(values.get("depends_on")),
    )


def header_of_bytes(data: bytes, path: Path | None = None, consulted: list[str] | None = None) -> Header:
    """``read_header`` of a file's bytes (all of them), decoded as ``_read`` reads it (UTF-8, universal newlines)."""
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return read_header(text, path, consulted)


def _read(path: Path) -> Header | None:
    try:
        with open(path, "rb") as fh:
            return header_of_bytes(fh.read(), path)
    except OSError:
        return None


class PhaseResolver:
    """Resolves phases from the headers of the linted files and their siblings."""

    def __init__(self, files: list[Path], known: dict[Path, Header] | None = None,
                 read: Callable[[Path], Header | None] = _read, listings: dict[Path, list[Path]] | None = None):
        """*listings*: the ``*.py`` files of directories already listed (``collect``'s walk), not globbed again."""
        self._read = read
        self.by_revision: dict[str, Header] = {}
        self.by_path: dict[Path, Header | None] = dict(known or {})
        self._labels: dict[str, str | None] = {}
        self._complete_memo: dict[str | None, bool] = {}
        listings = listings or {}
        candidates = dict.fromkeys(files)
        for directory in dict.fromkeys(path.parent for path in files):
            listed = listings.get(directory)
            if listed is None:
                listed = sorted((p for p in directory.glob("*.py") if p.is_file()), key=lambda p: p.parts)  # no FIFO
            candidates.update(dict.fromkeys(listed))
        for candidate in candidates:
            header = self.by_path[candidate] if candidate in self.by_path else read(candidate)
            self.by_path[candidate] = header
            if header and header.revision:
                self.by_revision.setdefault(header.revision, header)

    def _label(self, header: Header) -> str | None:
        """The first expand/contract label down the history: the script's own, else its parent's; at a merge
        point the first parent (in ``down_revision`` order) that has one.  Iterative (a history of thousands of
        merges is no deeper a stack) and memoized per revision (long chains stay linear); a cycle has none."""
        labels = self._labels
        stack, entered = [header], set()
        while stack:
            current = stack[-1]
            revision = current.revision
            if revision in labels:
                stack.pop()
                continue
            own = next((p for p in PHASES if p in current.branch_labels), None)
            downs = [self.by_revision[d] for d in current.down_revisions if d in self.by_revision]
            if own or not downs:
                labels[revision] = own
                stack.pop()
            elif revision not in entered:  # resolve the parents first
                entered.add(revision)
                stack.extend(d for d in reversed(downs) if d.revision not in labels and d.revision not in entered)
            else:  # parents resolved, or on a cycle (no label)
                labels[revision] = next((labels[d.revision] for d in downs if labels.get(d.revision)), None)
                stack.pop()
        return labels.get(header.revision)

    def header(self, path: Path) -> Header | None:
        return self.by_path[path] if path in self.by_path else self._read(path)

    def branch(self, path: Path) -> str | None:
        """The expand/contract branch alembic puts the revision at *path* on (its label or inherited); None:
        none; ``UNKNOWN`` when its history is not all there (a ``down_revision`` outside the linted files)."""
        header = self.header(path)
        if header is None:
            return UNKNOWN
        label = self._label(header)
        return label if label or self._complete(header) else UNKNOWN

    def _complete(self, header: Header) -> bool:
        """Whether every ancestor of *header* is among the known scripts (memoized per revision)."""
        memo, stack, seen = self._complete_memo, [header], set()
        complete = True
        while stack and complete:
            current = stack.pop()
            if current.revision in seen or memo.get(current.revision):
                continue
            seen.add(current.revision)
            complete = memo.get(current.revision) is not False and all(
                down in self.by_revision for down in current.down_revisions)
            stack.extend(self.by_revision[down] for down in current.down_revisions if down in self.by_revision)
        if complete:
            memo.update(dict.fromkeys(seen, True))
        else:
            memo[header.revision] = False
        return complete

    def phase(self, path: Path, header: Header | None = None) -> str:
        header = header or (self.by_path[path] if path in self.by_path else self._read(path))
        if header is not None:
            label = self._label(header)
            if label:
                return label
        for part in reversed(path.resolve().parent.parts):
            if part in PHASES:
                return part
        return EXPAND
