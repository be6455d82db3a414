"""``dbsync rollback``: undo the upgrade the operator started, before its release's contract runs.

Until the contract runs, release N's schema is still whole: the expand revisions of
release N+1 only added to it.  A rollback reverts exactly those (newest first, through
alembic's ``downgrade`` and the project's env.py, so under the same lock timeouts and
retries as an upgrade, and the same judgement of every statement), then forgets the
ledger entries of the data migrations whose table or columns went with them.

Which revisions is state, not inference: ``migrations_policy_releases``
(``gate/releases.py``) records every upgrade run, with the expand and contract revisions
it applied.  The last recorded release whose expand revisions are still applied is the
one reverted, and only its own:

* its contract ran (the run applied a contract revision, or a later one did): refused,
  "a rollback is possible only before the release's contract runs";
* it installed the schema (the run started on a database with no application table):
  refused, a rollback never reverts to the root (it would drop every table);
* nothing recorded (a database upgraded before the releases table existed): refused,
  ``--to REV`` names the target instead.

``--to REV`` reverts every revision applied above *REV* (the operator means something
else than the last release): refused when that would revert an applied contract revision
or an expand revision a contract depends on, a root revision, or a release that installed
the schema.

What would be lost: each candidate's ``downgrade()`` is run offline and what it destroys is
read through the knowledge base (alembic operations and raw SQL alike); each table and column
is counted by ``gate.at_risk.count``, the one judgement, which the env.py hook makes again for
each statement under its lock as it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from migrations_policy.core.errors import PolicyError
from migrations_policy.expand.journal import PartlyAppliedRefusal, refuse_while_partly_applied
from migrations_policy.core.offline_run import dropping_operations
from migrations_policy.core.revisions import CONTRACT, EXPAND, applied_revisions, phase_of
from migrations_policy.gate.drops import at_risk
from migrations_policy.gate import releases
from migrations_policy.gate.drops.at_risk import AtRisk  # noqa: F401  (re-exported)

#: Exit code when the rollback is refused (a contract ran, or rows would be lost without --force).
EXIT_REFUSED = 4


@dataclass
class RollbackPlan:
    revisions: list[str] = field(default_factory=list)  # newest first
    target: str | None = None  # alembic's downgrade target
    dropped_tables: list[str] = field(default_factory=list)
    dropped_columns: list[tuple[str, str]] = field(default_factory=list)
    at_risk: list[AtRisk] = field(default_factory=list)
    #: Revisions whose downgrade() could not be run offline to see what it drops: why.
    unknown: list[str] = field(default_factory=list)

    @property
    def rows_at_risk(self) -> int:
        return sum(r.rows for r in self.at_risk)

    def to_dict(self) -> dict[str, Any]:
        return {"revisions": self.revisions, "target": self.target, "dropped_tables": self.dropped_tables,
                "dropped_columns": [f"{t}.{c}" for t, c in self.dropped_columns],
                "at_risk": [{"table": r.table, "column": r.column, "rows": r.rows, "why": r.why}
                            for r in self.at_risk],
                "rows_at_risk": self.rows_at_risk, "unknown": self.unknown}

    def lines(self) -> list[str]:
        lines = [f"revert {', '.join(self.revisions)} (newest first), down to {self.target}"]
        if self.dropped_tables:
            lines.append(f"  drops tables: {', '.join(self.dropped_tables)}")
        if self.dropped_columns:
            lines.append(f"  drops columns: {', '.join(f'{t}.{c}' for t, c in self.dropped_columns)}")
        lines += [f"  at risk: {r.describe()}" for r in self.at_risk]
        lines += [f"  cannot see what it drops: {u}" for u in self.unknown]
        return lines


# -- which revisions ------------------------------------------------------------------
def revisions_to_revert(connection: Connection, script: ScriptDirectory, heads: Any, to: str | None = None) -> list[str]:
    """The expand revisions of the last release whose contract has not run (or those above *to*),
    newest first (refusals as PolicyError)."""
    try:  # the same refusal as the env.py hook's for any downgrade (journal.py decides)
        refuse_while_partly_applied(connection, "dbsync upgrade --expand")
    except PartlyAppliedRefusal as exc:
        raise PolicyError(str(exc), exit_code=EXIT_REFUSED) from None
    applied = applied_revisions(script, heads)
    recorded = releases.read(connection)
    installed = {rev for release in recorded if release.install for rev in release.expand_applied}
    if to is not None:
        candidates = _above(script, applied, to)
    else:
        candidates = _last_release(recorded, applied)
    for rev in candidates:
        script_rev = script.get_revision(rev)
        if phase_of(script_rev) == CONTRACT:
            raise PolicyError(f"cannot roll back to {to}: contract revision {rev} ran; a rollback is possible only "
                              "before the release's contract runs", exit_code=EXIT_REFUSED)
        if script_rev.down_revision is None:
            raise PolicyError(f"cannot roll back to {to or 'base'}: it would revert the root revision {rev} "
                              "(every table); a rollback never reverts to the root", exit_code=EXIT_REFUSED)
        if rev in installed:
            raise PolicyError(f"cannot roll back: revision {rev} installed the schema (its upgrade started on a "
                              "database with no application table); a rollback never reverts to the root",
                              exit_code=EXIT_REFUSED)
    for rev in applied:
        script_rev = script.get_revision(rev)
        if phase_of(script_rev) == CONTRACT and applied_revisions(script, [rev]) & set(candidates):
            raise PolicyError(f"cannot roll back: contract revision {rev} depends on "
                              f"{', '.join(sorted(applied_revisions(script, [rev]) & set(candidates)))}, "
                              "which would be reverted", exit_code=EXIT_REFUSED)
    order = {rev.revision: n for n, rev in enumerate(script.walk_revisions())}  # newest first
    return sorted(candidates, key=lambda rev: order.get(rev, 0))


def _above(script: ScriptDirectory, applied: set[str], to: str) -> list[str]:
    """The applied revisions that reverting down to *to* reverts."""
    try:
        target = script.get_revision(to)
    except Exception as exc:  # noqa: BLE001 - alembic's own message names what is wrong
        raise PolicyError(f"--to {to}: {exc}") from None
    if target is None:
        raise PolicyError(f"--to {to}: a rollback never reverts to the root (base)", exit_code=EXIT_REFUSED)
    if target.revision not in applied:
        raise PolicyError(f"--to {to}: revision {target.revision} is not applied")
    keep = applied_revisions(script, [target.revision])
    found = [rev for rev in applied if rev not in keep and target.revision in applied_revisions(script, [rev])]
    if not found:
        raise PolicyError(f"nothing to roll back: nothing is applied above {target.revision}", exit_code=EXIT_REFUSED)
    return found


def _last_release(recorded: list, applied: set[str]) -> list[str]:
    """The expand revisions, still applied, of the last recorded release (see the module doc)."""
    if not recorded:
        raise PolicyError("cannot roll back: no release is recorded (migrations_policy_releases is written by the "
                          "env.py hook from the first upgrade on); name the target with --to REV",
                          exit_code=EXIT_REFUSED)
    for release in reversed(recorded):
        if release.contract_applied:
            raise PolicyError(f"nothing to roll back: the last release's contract ran ({', '.join(release.contract_applied)}"
                              f", {release.describe()}); a rollback is possible only before the release's contract "
                              "runs", exit_code=EXIT_REFUSED)
        still = [rev for rev in release.expand_applied if rev in applied]
        if not still:
            continue  # reverted already (a rollback, or a plain alembic downgrade)
        if release.install:
            raise PolicyError(f"nothing to roll back: the last release installed the schema ({release.describe()}); "
                              "a rollback never reverts to the root", exit_code=EXIT_REFUSED)
        return still
    raise PolicyError("nothing to roll back: every recorded release was reverted already", exit_code=EXIT_REFUSED)


def _downgrade_target(script: ScriptDirectory, revisions: list[str]) -> str:
    oldest = script.get_revision(revisions[-1])
    down = oldest.down_revision
    if isinstance(down, str) or down is None:
        return down or "base"
    return f"{EXPAND}@-{len(revisions)}"


# -- what would be lost -----------------------------------------------------------------
def plan(connection: Connection, script: ScriptDirectory, heads: Any, registry: Any, to: str | None = None) -> RollbackPlan:
    """What a rollback would revert, drop and lose (reads only)."""
    from alembic.operations import ops
    from migrations_policy.policy.alembic_ops import from_alembic

    result = RollbackPlan(revisions=revisions_to_revert(connection, script, heads, to))
    result.target = to or _downgrade_target(script, result.revisions)
    dialect = connection.dialect.name
    targets: list[tuple[str, str | None]] = []
    for ident in result.revisions:
        downgrade = script.get_revision(ident).module.downgrade
        recorded, problem = dropping_operations(downgrade, dialect)
        if problem:
            result.unknown.append(f"{ident}: {problem}")
        for op in recorded:
            if isinstance(op, ops.DropTableOp) and op.table_name not in result.dropped_tables:
                result.dropped_tables.append(op.table_name)
            elif isinstance(op, ops.DropColumnOp) and (op.table_name, op.column_name) not in result.dropped_columns:
                result.dropped_columns.append((op.table_name, op.column_name))
            for table, column in at_risk.destroying(from_alembic(op)):  # raw SQL too, read as in an upgrade
                if table == at_risk.UNCOUNTABLE or column == at_risk.REWRITTEN:
                    pass  # nothing it names is dropped; counted below
                elif column is None and table not in result.dropped_tables:
                    result.dropped_tables.append(table)
                elif column is not None and (table, column) not in result.dropped_columns:
                    result.dropped_columns.append((table, column))
                targets.append((table, column))
        for table, column in _sent_on_the_bind(downgrade, connection):  # op.get_bind().execute(text(...))
            if table == at_risk.UNCOUNTABLE or column == at_risk.REWRITTEN:
                pass
            elif column is not None and (table, column) not in result.dropped_columns:
                result.dropped_columns.append((table, column))
            elif column is None and table not in result.dropped_tables:
                result.dropped_tables.append(table)
            targets.append((table, column))
    for table, column in dict.fromkeys(targets):
        if column is not None and table in result.dropped_tables:
            continue
        found = at_risk.count(connection, registry, table, column)
        if found:
            result.at_risk.append(found)
    if connection.in_transaction():
        connection.rollback()
    return result


def _sent_on_the_bind(downgrade: Any, connection: Connection) -> list[tuple[str, str | None]]:
    """What *downgrade* destroys by statements it sends itself (``op.get_bind().execute(...)``:
    offline, alembic hands them to the same place as its operations' SQL), read through the
    knowledge base."""
    from migrations_policy.core.offline_run import record_operations
    from migrations_policy.core.sqltext import statement_text
    from migrations_policy.policy.sql import from_sql

    sent: list[Any] = []
    record_operations(downgrade, connection.dialect.name, on_statement=sent.append, flush_batches=False)
    found: list[tuple[str, str | None]] = []
    for construct in sent:
        try:
            found += at_risk.destroying(from_sql(statement_text(construct, connection), (connection.dialect.name,)))
        except Exception:  # noqa: BLE001 - a construct that does not render destroys nothing we can name
            continue
    return found


def forget_ledger_entries(connection: Connection, registry: Any) -> list[str]:
    """Delete the ledger rows of data migrations whose table or columns no longer exist
    (``gate.downgrades.forget_gone``, committed here)."""
    from migrations_policy.gate.hook.downgrades import forget_gone

    with connection.begin_nested() if connection.in_transaction() else connection.begin():
        gone = forget_gone(connection, registry)
    if connection.in_transaction():
        connection.commit()
    return gone
