"""Adopting the policy on a long history: which collected scripts a run reports, which codes per file it drops.

* ``baseline`` (revisions): the baseline revisions and their ancestors -- in the
  revision graph (``down_revision`` and ``depends_on``: what alembic applies before
  the baseline), not in file order -- are not analysed nor
  reported unless ``include_baseline``; a baseline that is not a revision of the
  history is a ``ConfigError``.  A unique prefix of a revision id is accepted, as
  alembic accepts one.
* ``exclude`` (globs, ``migrations_policy.core.globs``): matching scripts are skipped.
* ``per_file_ignores`` (``{glob: [code or prefix]}``): findings of those codes are
  dropped for matching paths (``MP000``, a file that could not be analysed, never is);
  a code that is no rule's is a ``ConfigError``.

Paths are matched relative to the current directory.  None of this changes what one
script's analysis finds, so the content cache does not depend on it: it is applied
to the files before the analysis and to the findings after it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from migrations_policy.core.errors import ConfigError
from migrations_policy.core.globs import Glob, compile_glob
from migrations_policy.lint.script.headers import Header


@dataclass
class Selection:
    """The files a run analyses and reports, and how many of the collected ones it skipped."""

    files: list[Path]
    baseline: int = 0
    excluded: int = 0
    #: path -> the code prefixes ``per_file_ignores`` drops for it.
    ignored: dict[Path, tuple[str, ...]] = field(default_factory=dict)


def relative(path: Path, cwd: str) -> str:
    """*path* as the settings' globs see it: POSIX, relative to *cwd* (the current directory) when under it."""
    text = os.path.normpath(os.path.join(cwd, path))  # an absolute path stays itself
    prefix = cwd.rstrip(os.sep) + os.sep
    return (text[len(prefix):] if text.startswith(prefix) else text).replace(os.sep, "/")


def _revision(wanted: str, known: dict[str, Header]) -> str | None:
    if wanted in known:
        return wanted
    found = [revision for revision in known if revision.startswith(wanted)]
    return found[0] if len(found) == 1 else None


def baseline_revisions(baseline: list[str], known: dict[str, Header], more: Callable[[], dict[str, Header]],
                       source: str) -> set[str]:
    """The baseline revisions and all their ancestors in *known* (``more()`` is asked once for further
    headers when a baseline is not in *known*); ``ConfigError`` naming *source* for an unknown one."""
    start = []
    for wanted in baseline:
        revision = _revision(wanted, known)
        if revision is None and more is not None:
            known = {**more(), **known}
            more = None
            revision = _revision(wanted, known)
        if revision is None:
            ambiguous = sum(r.startswith(wanted) for r in known) > 1
            raise ConfigError(f"{source}: baseline {wanted!r} is {'an ambiguous prefix of revisions' if ambiguous else 'not a revision'} "
                              "of the linted history")
        start.append(revision)
    seen: set[str] = set()
    while start:
        revision = start.pop()
        if revision in seen or revision not in known:
            continue
        seen.add(revision)
        start.extend(known[revision].down_revisions)
        start.extend(_dependency(name, known) for name in known[revision].depends_on)
    return seen


def _dependency(name: str, known: dict[str, Header]) -> str:
    """The revision a ``depends_on`` entry names: itself, a unique prefix, or the revision that
    declares the branch label (alembic accepts all three); *name* itself when none is known."""
    if name in known:
        return name
    labelled = [revision for revision, header in known.items() if name in header.branch_labels]
    if len(labelled) == 1:
        return labelled[0]
    return _revision(name, known) or name


def _globs(patterns: list[str]) -> list[Glob]:
    return [compile_glob(pattern) for pattern in patterns]  # validated when read: cannot fail here


def rule_codes() -> list[str]:
    """The codes of the rule modules (``rules/mpNNN_name.py``), from their file names: a run that
    answers from the cache imports no rule."""
    directory = Path(__file__).resolve().parent / "rules"
    return sorted(name[:5].upper() for name in os.listdir(directory) if name.startswith("mp") and name.endswith(".py"))


def check_codes(per_file_ignores: dict[str, list[str]], source: str, known: list[str] | None = None) -> None:
    """``ConfigError`` for a code or prefix of *per_file_ignores* that names no rule (or ``MP000``)."""
    known = rule_codes() if known is None and per_file_ignores else known or []
    for glob, codes in per_file_ignores.items():
        for code in codes:
            if code == "MP000" or code == "MP00":
                raise ConfigError(f"{source}: per_file_ignores {glob!r}: MP000 (a script that could not be analysed) "
                                  "cannot be ignored")
            if not any(rule.startswith(code) for rule in known):
                raise ConfigError(f"{source}: per_file_ignores {glob!r}: unknown rule code {code!r} "
                                  f"(known: {', '.join(known)})")


def select(files: list[Path], header: Callable[[Path], Header | None], baseline: set[str], exclude: list[str],
           per_file_ignores: dict[str, list[str]]) -> Selection:
    """Split *files* into those to lint and those skipped (see the module docstring)."""
    excluded_globs = _globs(exclude)
    ignore_globs = [(compile_glob(glob), tuple(codes)) for glob, codes in per_file_ignores.items()]
    selection = Selection([])
    cwd = os.getcwd()
    for path in files:
        name = relative(path, cwd) if excluded_globs or ignore_globs else ""
        if any(glob.matches(name) for glob in excluded_globs):
            selection.excluded += 1
            continue
        found = header(path) if baseline else None
        if found is not None and found.revision in baseline:
            selection.baseline += 1
            continue
        selection.files.append(path)
        codes = tuple(code for glob, codes in ignore_globs if glob.matches(name) for code in codes)
        if codes:
            selection.ignored[path] = codes
    return selection
