"""Where each branch (expand, contract) stands: applied, head, pending.

Alembic keeps one row per *head* in its version table, and once a contract
revision that depends on the expand head is applied the expand row disappears.
So "what is applied" is computed as every ancestor (down revisions and
dependencies) of the current heads, and each branch is judged from that set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from alembic.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from sqlalchemy.engine import Connection

from migrations_policy.core.config import CONTRACT, EXPAND, PHASES  # noqa: F401  (re-exported)


@dataclass
class BranchStatus:
    """One branch's position: revisions applied, the head, and what is pending (oldest first)."""

    name: str
    head: str | None
    current: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"current": self.current, "head": self.head, "pending": self.pending}


def current_heads(connection: Connection) -> tuple[str, ...]:
    """The revisions alembic's version table records for this database."""
    return tuple(MigrationContext.configure(connection).get_current_heads())


def _as_tuple(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def parents(script: ScriptDirectory, rev: Script) -> list[Script]:
    """Down revisions and dependencies of *rev*, resolved to scripts."""
    found = []
    for ident in _as_tuple(rev.down_revision) + _as_tuple(rev.dependencies):
        found.extend(r for r in script.get_revisions(ident) if r is not None)
    return found


def applied_revisions(script: ScriptDirectory, heads: Iterable[str]) -> set[str]:
    """Every revision at or below *heads*, following dependencies too."""
    seen: set[str] = set()
    stack = [r for h in heads for r in script.get_revisions(h) if r is not None]
    while stack:
        rev = stack.pop()
        if rev.revision in seen:
            continue
        seen.add(rev.revision)
        stack.extend(parents(script, rev))
    return seen


def phase_of(rev: Script) -> str | None:
    """``expand`` or ``contract`` from the revision's (inherited) branch labels.

    A revision on both branches (a merge of the two heads) is ``contract``: it
    runs after contract revisions, so it is judged as one."""
    labels = set(rev.branch_labels or ())
    if CONTRACT in labels:
        return CONTRACT
    return EXPAND if EXPAND in labels else None


def revisions_in_order(script: ScriptDirectory) -> list[Script]:
    """All revisions, oldest first (dependencies before dependents)."""
    return list(reversed(list(script.walk_revisions())))


def branch_statuses(script: ScriptDirectory, heads: Iterable[str]) -> dict[str, BranchStatus]:
    """Per-phase status for an expand/contract layout.  Unlabelled revisions count as ``expand``."""
    applied = applied_revisions(script, heads)
    statuses = {name: BranchStatus(name=name, head=None) for name in PHASES}
    for rev in revisions_in_order(script):
        status = statuses[phase_of(rev) or EXPAND]
        if rev.is_head:
            status.head = rev.revision
        if rev.revision in applied:
            if not any(child in applied for child in _as_tuple(rev.nextrev)):
                status.current.append(rev.revision)
        else:
            status.pending.append(rev.revision)
    return statuses
