"""``dbsync history`` and ``dbsync current``: alembic's two commands, with each revision's phase.

The lines are alembic's own (``Script.cmd_format``: ``down -> rev (head), message``) followed by
``[expand]`` or ``[contract]`` (``core.revisions.phase_of``; an unlabelled revision counts as
expand, as ``status`` counts it).  ``history`` marks the revisions the database has applied
and its current ones when it can be reached; it needs no database otherwise (``--offline``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alembic.script.revision import RevisionError
from alembic.util import CommandError

from migrations_policy.core.project import Project
from migrations_policy.core.result import Result
from migrations_policy.core.revisions import EXPAND, applied_revisions, current_heads, phase_of


def _entry(rev: Any, applied: set[str] | None, current: set[str]) -> dict[str, Any]:
    down = rev.down_revision
    return {
        "revision": rev.revision,
        "down_revisions": [] if down is None else [down] if isinstance(down, str) else list(down),
        "phase": phase_of(rev) or EXPAND,
        "head": bool(rev.is_head),
        "current": rev.revision in current,
        "applied": None if applied is None else rev.revision in applied,
        "message": rev.doc or "",
    }


def _line(rev: Any, entry: dict[str, Any]) -> str:
    text = rev.cmd_format(verbose=False, include_branches=False, include_doc=True, include_parents=True,
                          tree_indicators=True)
    if entry["current"]:
        head, _, doc = text.partition(", ")
        text = f"{head} (current), {doc}" if doc else f"{head} (current)"
    return f"{text} [{entry['phase']}]"


@dataclass
class HistoryResult(Result):
    revisions: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"revisions": self.revisions}

    def text(self) -> str:
        return "\n".join(self.lines) if self.lines else "(no revisions)"


def history(project: Project, offline: bool = False) -> HistoryResult:
    """Every revision, newest first (alembic's order), with its phase; where the database is
    read (not *offline*), which ones it has applied and which are current."""
    script = project.script
    applied: set[str] | None = None
    current: set[str] = set()
    if not offline:
        with project.connect() as conn:
            current = set(current_heads(conn))
        applied = applied_revisions(script, current)
    result = HistoryResult()
    for rev in script.walk_revisions():
        entry = _entry(rev, applied, current)
        result.revisions.append(entry)
        result.lines.append(_line(rev, entry))
    return result


@dataclass
class CurrentResult(Result):
    current: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.current}

    def text(self) -> str:
        return "\n".join(self.lines) if self.lines else "(no revision applied)"


def current(project: Project) -> CurrentResult:
    """The revisions the database's version table records (``alembic current``), each with
    ``(head)`` when it is its branch's head, and its phase."""
    script = project.script
    with project.connect() as conn:
        heads = sorted(current_heads(conn))
    result = CurrentResult()
    for ident in heads:
        try:
            rev = script.get_revision(ident)
        except (CommandError, RevisionError):
            rev = None
        if rev is None:  # recorded, but no script has it: say so, as alembic would fail to
            result.current.append({"revision": ident, "phase": None, "head": False, "message": ""})
            result.lines.append(f"{ident} (no script has this revision)")
            continue
        entry = _entry(rev, None, set(heads))
        del entry["applied"], entry["current"]
        result.current.append(entry)
        result.lines.append(f"{ident}{' (head)' if rev.is_head else ''} [{entry['phase']}]")
    return result
