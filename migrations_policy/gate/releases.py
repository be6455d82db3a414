"""Release boundaries are state: every upgrade run the env.py hook lets through is recorded once.

``migrations_policy_releases`` (``core/framework_tables.py``, created on demand like the
framework's other tables, so an existing database needs no revision) holds one row per
run that applies revisions: who started it (user@host) and when, the heads it started from
and those it reached, the expand and the contract revisions it applied, and whether it
*installed* the schema (it started on a database with no application table).  The row is
written as the run starts and completed as each revision is applied, in the transaction
that moves the version table (``runtime._record_phase``), so it never says more than the
version table.  A run that resumes an interrupted one (the last run stopped before applying
all it planned, and the version table has not moved since) continues that row: a release is
recorded once, however many runs it takes.

``dbsync rollback`` reads it (:func:`last_release`): it reverts exactly the expand revisions
of the last release whose contract has not run and that are still applied; it never reverts
a release that installed the schema ("to the root"), nor one whose contract ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from alembic.runtime.migration import RevisionStep
from sqlalchemy.engine import Connection

from migrations_policy.core.framework_tables import releases_table
from migrations_policy.core.revisions import CONTRACT, EXPAND


@dataclass
class Release:
    id: int
    run: str
    started_by: str
    started_at: datetime
    from_heads: list[str]
    to_heads: list[str]
    expand_applied: list[str]
    contract_applied: list[str]
    install: bool
    planned: list[str]

    @property
    def finished(self) -> bool:
        """Whether the run applied every revision it set out to (an interrupted one is resumed
        by the next run, which is still the same release)."""
        return set(self.planned) <= set(self.expand_applied) | set(self.contract_applied)

    def describe(self) -> str:
        return (f"the upgrade started {self.started_at:%Y-%m-%d %H:%M:%S} UTC by {self.started_by} "
                f"({', '.join(self.from_heads) or 'base'} -> {', '.join(self.to_heads) or 'base'})")


def _split(text: str | None) -> list[str]:
    return [part for part in (text or "").split(",") if part]


def start(migration_context: Any, heads: Any, steps: list, run: str) -> None:
    """Record the run *run* about to apply *steps* (nothing when it applies no revision)."""
    from migrations_policy.gate.overrides import forced_by
    from migrations_policy.gate.verdict import schema_is_empty

    if not any(isinstance(step, RevisionStep) and step.is_upgrade for step in steps):
        return
    connection = migration_context.connection
    releases_table.create(connection, checkfirst=True)
    from_heads = ",".join(sorted(heads))
    planned = [step.revision.revision for step in steps if isinstance(step, RevisionStep) and step.is_upgrade]
    resumed = _interrupted(connection, from_heads)
    if resumed is not None:  # the same release, resumed: its row goes on (install, who, when, what it applied)
        connection.execute(sa.update(releases_table).where(releases_table.c.id == resumed.id).values(
            run=run, planned=",".join(dict.fromkeys(_split(resumed.planned) + planned))))
    else:
        install = not heads and schema_is_empty(connection, migration_context.version_table)
        connection.execute(sa.insert(releases_table).values(planned=",".join(planned),
            run=run, started_by=forced_by()[:255], started_at=datetime.now(timezone.utc).replace(tzinfo=None),
            from_heads=from_heads, to_heads=from_heads, expand_applied="", contract_applied="", install=install))
    if connection.in_transaction():
        connection.commit()


def _interrupted(connection: Connection, heads: str) -> Any:
    """The last recorded run, when it stopped before applying every revision it set out to and nothing
    moved the version table since (the heads are those it reached): the run about to start resumes
    that release.  A release is one row whatever the number of runs it takes, so an install resumed
    after a kill is still the install (a rollback never reverts it), and a rollback reverts every
    revision of the release, not only those of its last run."""
    row = connection.execute(sa.select(releases_table).order_by(releases_table.c.id.desc()).limit(1)).first()
    if row is None or (row.to_heads or "") != heads:
        return None
    if set(_split(row.planned)) <= set(_split(row.expand_applied)) | set(_split(row.contract_applied)):
        return None  # finished: the run about to start is a new release
    return row


def record_step(ctx: Any, run: str, ids: list[str], phases: dict[str, str | None], heads: Any) -> None:
    """An upgrade step of *run* applied *ids* (in the step's own transaction)."""
    connection = ctx.connection
    row = connection.execute(sa.select(releases_table).where(releases_table.c.run == run)).first()
    if row is None:
        return
    expand = _split(row.expand_applied) + [i for i in ids if phases[i] == EXPAND]
    contract = _split(row.contract_applied) + [i for i in ids if phases[i] == CONTRACT]
    connection.execute(sa.update(releases_table).where(releases_table.c.id == row.id).values(
        to_heads=",".join(sorted(heads)), expand_applied=",".join(expand),
        contract_applied=",".join(contract)))


def read(connection: Connection) -> list[Release]:
    """Every recorded release run that applied something, oldest first ([] before the first)."""
    if not sa.inspect(connection).has_table(releases_table.name):
        return []
    rows = connection.execute(sa.select(releases_table).order_by(releases_table.c.id))
    return [Release(r.id, r.run, r.started_by, r.started_at, _split(r.from_heads), _split(r.to_heads),
                    _split(r.expand_applied), _split(r.contract_applied), bool(r.install), _split(r.planned))
            for r in rows if r.expand_applied or r.contract_applied]


def previous_release_unfinished(connection: Connection, script: Any, heads: Any, registry: Any) -> tuple[Any, list]:
    """The nova rule for an expand about to run: (the previous release, its unfinished data
    migrations recounted live) when that release's upgrade finished, its contract has not run and
    data migrations are unfinished; (None, []) otherwise.  A migration whose table or columns do not
    exist yet belongs to the release about to be expanded, not to the previous one."""
    from migrations_policy.core.revisions import applied_revisions
    from migrations_policy.data.remaining.pending import pending_migrations

    applied = applied_revisions(script, heads)
    for release in reversed(read(connection)):
        if not any(rev in applied for rev in release.expand_applied + release.contract_applied):
            continue  # reverted
        if release.install or release.contract_applied or not release.finished:
            return None, []
        return release, [p for p in pending_migrations(connection, list(registry)) if p.remaining]
    return None, []
