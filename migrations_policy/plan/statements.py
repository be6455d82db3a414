"""What ``dbsync upgrade`` would run, read without running it.

The pending revisions in the order upgrade applies them (the expand branch, then the
contract branch), each revision's ``upgrade()`` recorded offline by the linter's
recorder (``lint.offline.recorder.run_offline``: alembic ops, batch recreates, raw SQL, the
line in the script) on the database's dialect, and annotated as the linter annotates
a script (``policy.script.annotate``).  A revision that cannot be read offline (it
raised, or it inspected the database, which is empty offline) is kept with the reason:
its statements are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alembic.script import ScriptDirectory

from migrations_policy.lint.offline import recorder
from migrations_policy.core.offline_run import first_line
from migrations_policy.policy import model as m
from migrations_policy.policy.script import annotate
from migrations_policy.core.revisions import CONTRACT, EXPAND, BranchStatus


@dataclass
class PendingRevision:
    revision: str
    phase: str
    path: str
    #: (operation, line in the script), in the order upgrade() runs them.
    operations: list[tuple[m.Operation, int]] = field(default_factory=list)
    #: Why the statements are unknown (None: read to the end).
    unread: str | None = None


def pending_revisions(script: ScriptDirectory, branches: dict[str, BranchStatus],
                      dialect: str) -> list[PendingRevision]:
    """Every revision ``dbsync upgrade`` would apply, expand first, with its recorded operations."""
    found = []
    for phase in (EXPAND, CONTRACT):
        for ident in branches[phase].pending:
            found.append(_read(script.get_revision(ident), phase, dialect))
    return found


def _read(rev, phase: str, dialect: str) -> PendingRevision:
    pending = PendingRevision(rev.revision, phase, rev.path)
    try:
        upgrade = rev.module.upgrade
    except Exception as exc:  # noqa: BLE001 - the project's script does not load
        pending.unread = f"the script does not load: {type(exc).__name__}: {first_line(exc)}"
        return pending
    recording, error = recorder.run_offline(upgrade, dialect, rev.path)
    if error is not None:
        pending.unread = f"upgrade() cannot run offline: {type(error).__name__}: {first_line(error)}"
    elif recording.inspected:
        pending.unread = (f"upgrade() inspects the database (line {recording.inspected}): what it runs depends "
                          "on what it finds, which an offline reading cannot know")
    operations = annotate([op for op, _ in recording.ops])
    pending.operations = [(op, line) for op, (_, line) in zip(operations, recording.ops)]
    return pending
