"""Revision headers read from source text, and the phase of each script.

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

from ..config import CONTRACT, EXPAND

PHASES = (EXPAND, CONTRACT)
_HEADER = re.compile(
    r"^(revision|down_revision|branch_labels)\s*(?::[^=\n]+)?=\s*(.+?)\s*(?:#.*)?$", re.MULTILINE
)


@dataclass(frozen=True)
class Header:
    revision: str | None
    down_revisions: tuple[str, ...]
    branch_labels: tuple[str, ...]


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


def read_header(text: str) -> Header:
    values = {}
    for name, raw in _HEADER.findall(text):
        if name in values:
            continue
        try:
            values[name] = _literal(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            values[name] = None
    revision = values.get("revision")
    return Header(
        revision=revision if isinstance(revision, str) else None,
        down_revisions=_tuple(values.get("down_revision")),
        branch_labels=_tuple(values.get("branch_labels")),
    )


def header_of_bytes(data: bytes) -> Header:
    """``read_header`` of a file's bytes, decoded as ``_read`` reads it (UTF-8, universal newlines)."""
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return read_header(text[:20000])


def _read(path: Path) -> Header | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return read_header(fh.read(20000))
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
        listings = listings or {}
        candidates = dict.fromkeys(files)
        for directory in dict.fromkeys(path.parent for path in files):
            listed = listings.get(directory)
            if listed is None:
                listed = sorted(directory.glob("*.py"), key=lambda p: p.parts)
            candidates.update(dict.fromkeys(listed))
        for candidate in candidates:
            header = self.by_path[candidate] if candidate in self.by_path else read(candidate)
            self.by_path[candidate] = header
            if header and header.revision:
                self.by_revision.setdefault(header.revision, header)

    def _label(self, header: Header) -> str | None:
        """The first expand/contract label down the history (memoized: long chains stay linear)."""
        chain, current, label = [], header, None
        while current is not None:
            if current.revision in self._labels:
                label = self._labels[current.revision]
                break
            if current.revision in chain:
                break  # a cycle: alembic would refuse it; no label
            chain.append(current.revision)
            label = next((p for p in PHASES if p in current.branch_labels), None)
            if label:
                break
            downs = [self.by_revision[d] for d in current.down_revisions if d in self.by_revision]
            if len(downs) > 1:  # a merge point: the first parent that has a label
                label = next((found for found in map(self._label, downs) if found), None)
                break
            current = downs[0] if downs else None
        for revision in chain:
            self._labels[revision] = label
        return label

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
