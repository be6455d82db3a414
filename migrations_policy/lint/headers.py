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

from ..policy.model import CONTRACT, EXPAND

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


def read_header(text: str) -> Header:
    values = {}
    for name, raw in _HEADER.findall(text):
        if name in values:
            continue
        try:
            values[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            values[name] = None
    revision = values.get("revision")
    return Header(
        revision=revision if isinstance(revision, str) else None,
        down_revisions=_tuple(values.get("down_revision")),
        branch_labels=_tuple(values.get("branch_labels")),
    )


def _read(path: Path) -> Header | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return read_header(fh.read(20000))
    except OSError:
        return None


class PhaseResolver:
    """Resolves phases from the headers of the linted files and their siblings."""

    def __init__(self, files: list[Path]):
        self.by_revision: dict[str, Header] = {}
        candidates = dict.fromkeys(files)
        for directory in dict.fromkeys(path.parent for path in files):
            candidates.update(dict.fromkeys(sorted(directory.glob("*.py"))))
        for candidate in candidates:
            header = _read(candidate)
            if header and header.revision:
                self.by_revision.setdefault(header.revision, header)

    def _label(self, header: Header) -> str | None:
        stack, seen = [header], set()
        while stack:
            current = stack.pop()
            for phase in PHASES:
                if phase in current.branch_labels:
                    return phase
            for down in current.down_revisions:
                if down not in seen and down in self.by_revision:
                    seen.add(down)
                    stack.append(self.by_revision[down])
        return None

    def phase(self, path: Path, header: Header | None = None) -> str:
        header = header or _read(path)
        if header is not None:
            label = self._label(header)
            if label:
                return label
        for part in reversed(path.resolve().parent.parts):
            if part in PHASES:
                return part
        return EXPAND
