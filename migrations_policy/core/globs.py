"""Path globs of the settings (``exclude``, ``per_file_ignores``), compiled once and checked strictly.

``compile_glob(pattern)`` returns a ``Glob``; a malformed pattern raises ``ValueError``
with one line saying why.  Patterns are POSIX paths (``/`` separates directories):

* ``*`` matches within one path component, ``?`` one character, ``[abc]`` / ``[!abc]``
  one character of (not of) a set; ``**`` as a whole component matches any number
  of directories (zero included);
* a pattern without ``/`` matches any single component of the path (``legacy``
  matches the directory ``legacy`` wherever it is, ``*_old.py`` any such file name);
* a pattern with ``/`` is matched against the whole relative path, and also matches
  everything under a directory it matches (``migrations/versions/2019*``).

Malformed: empty, an unclosed ``[``, ``**`` mixed with other characters in a component
(``a**``), an empty component (``a//b``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Glob:
    pattern: str
    _regex: re.Pattern
    _component: bool  # no "/": matches any one component

    def matches(self, path: str | PurePath) -> bool:
        """Whether the relative POSIX *path* (or a directory above it) matches."""
        text = path if isinstance(path, str) else PurePath(path).as_posix()
        if self._component:
            return any(self._regex.fullmatch(part) for part in text.split("/"))
        return self._regex.fullmatch(text) is not None


def _component(part: str, pattern: str) -> str:
    if "**" in part:
        raise ValueError(f"bad glob {pattern!r}: '**' must be a whole path component")
    out, i = [], 0
    while i < len(part):
        char = part[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = part.find("]", i + 2 if part[i + 1:i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise ValueError(f"bad glob {pattern!r}: unclosed '['")
            body = part[i + 1:end]
            negate = body.startswith("!")
            body = re.sub(r"([\\\]\[^])", r"\\\1", body[1:] if negate else body).replace("/", "")
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> Glob:
    """The ``Glob`` of *pattern* (see the module docstring); ``ValueError`` when malformed."""
    text = pattern.strip().replace("\\", "/")
    if not text:
        raise ValueError("bad glob '': empty pattern")
    text = text[2:] if text.startswith("./") else text
    parts = text.rstrip("/").split("/")
    if "" in parts[1:] or (parts[0] == "" and len(parts) == 1):
        raise ValueError(f"bad glob {pattern!r}: empty path component")
    if len(parts) == 1:
        return Glob(pattern, re.compile(_component(parts[0], pattern)), True)
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _component(part, pattern) + ("" if last else "/")
    return Glob(pattern, re.compile(f"{regex}(?:/.*)?"), False)
