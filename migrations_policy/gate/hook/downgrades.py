"""Downgrades go through the same env.py hook as upgrades (``runtime._guard``), for ``dbsync rollback``
and plain ``alembic downgrade`` alike.

* **Across a completed contract**: a downgrade step of an applied contract revision is refused
  before any step runs (:class:`ContractDowngradeRefused`, one line, exit 4 for dbsync; plain
  alembic prints ``FAILED: ...``) unless forced with a reason (``alembic -x
  migrations_policy_force=REASON downgrade ...``), recorded in ``migrations_policy_gate_overrides``
  (command ``downgrade``).  A forced one forgets nothing the ledger knows: the data migrations
  reading what the contract had dropped are marked ``retired`` in the ledger, and the runner never
  runs a retired migration again (its source column comes back empty: copying it would write NULLs
  over every value the migration had copied).
* **Rows at risk** (``at_risk.py``, the one judgement): before any step, each step's
  ``downgrade()`` is run offline and what it destroys (alembic operations and raw SQL alike, read
  through the knowledge base) is counted: rows at risk refuse the run before it changes anything
  (on MariaDB nothing is half-reverted for it).  That count is a preview; the judgement that holds is
  made again for each statement as it executes, under its table's lock (``at_risk.judging``).
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import sqlalchemy as sa
from alembic.util import CommandError

from migrations_policy.core.revisions import CONTRACT, phase_of
from migrations_policy.gate.drops import at_risk

EXIT_REFUSED = 4


class ContractDowngradeRefused(CommandError):
    exit_code = EXIT_REFUSED

    def __init__(self, contracts: list[str], ini: str):
        super().__init__(
            f"downgrade refused: contract revision(s) {', '.join(contracts)} ran; reverting a completed contract "
            "re-creates dropped columns empty (a rollback is possible only before the release's contract runs). "
            f"To force it (recorded): alembic -c {ini} -x migrations_policy_force='REASON' downgrade ...")


def _rollback(connection: Any) -> None:
    if connection.in_transaction():
        connection.rollback()


def judge_before(context: Any, migration_context: Any, reverting: list, registry: Any, reason: str | None) -> None:
    """Refuse (or record the force of) a downgrade across a completed contract, and one whose
    ``downgrade()`` would destroy rows at risk, before any step runs."""
    from migrations_policy.core.offline_run import dropping_operations
    from migrations_policy.gate.overrides import record_override
    from migrations_policy.policy.alembic_ops import from_alembic

    connection = migration_context.connection
    contracts = [step.revision.revision for step in reverting if phase_of(step.revision) == CONTRACT]
    if contracts and reason is None:
        _rollback(connection)
        raise ContractDowngradeRefused(contracts, getattr(context.config, "config_file_name", None) or "alembic.ini")
    if contracts:
        who = record_override(connection, "downgrade", reason, contracts, [{"migration": None, "remaining": None}])
        print(f"WARNING: downgrade across contract revision(s) {', '.join(contracts)} FORCED by {who} ({reason}); "
              "recorded in migrations_policy_gate_overrides", file=sys.stderr)
    if reason is not None:
        return
    found: list[at_risk.AtRisk] = []
    dialect = connection.dialect.name
    for step in reverting:
        recorded, _ = dropping_operations(step.revision.module.downgrade, dialect)
        targets = at_risk.destroying(o for op in recorded for o in from_alembic(op))
        found += [r for r in (at_risk.count(connection, registry, t, c) for t, c in targets) if r]
    _rollback(connection)
    if found:
        raise at_risk.RowsAtRisk(", ".join(step.revision.revision for step in reverting), found)


def judge_each_statement(connection: Any, reverting: list, registry: Any, reason: str | None, command: str) -> None:
    """Every downgrade step runs under ``at_risk.judging``; a forced loss is recorded, and a forced
    contract downgrade retires the migrations reading what the contract had dropped."""
    def judged(script: Any, migration_fn: Callable) -> Callable:
        @functools.wraps(migration_fn)
        def migrate(**kw: Any) -> Any:
            with at_risk.judging(connection, registry, script.revision, reason) as judge:
                result = migration_fn(**kw)
            if judge.forced_losses:
                _record_loss(connection, command, reason or "", script.revision, judge.forced_losses)
            if phase_of(script) == CONTRACT:
                retire(connection, registry, script)
            forget_gone(connection, registry)
            return result

        return migrate

    for step in reverting:
        step.migration_fn = judged(step.revision, step.migration_fn)


def _record_loss(connection: Any, command: str, reason: str, revision: str, losses: list[at_risk.AtRisk]) -> None:
    from migrations_policy.core.framework_tables import gate_overrides_table
    from migrations_policy.data import ledger
    from migrations_policy.gate.overrides import forced_by

    if not sa.inspect(connection).has_table(gate_overrides_table.name):
        gate_overrides_table.create(connection)
    connection.execute(sa.insert(gate_overrides_table).values(
        forced_at=ledger.utcnow(), forced_by=forced_by()[:255], reason=reason or None, command=command[:16],
        revisions=revision, migration=None, remaining=sum(max(r.rows, 0) for r in losses)))


def retire(connection: Any, registry: Any, script: Any) -> None:
    """Mark ``retired`` the data migrations reading what *script* (a contract) dropped."""
    from migrations_policy.data import ledger
    from migrations_policy.gate.drops.drop_guard import readers
    from migrations_policy.gate.verdict import drops_of

    names = list(readers(registry, drops_of(script, connection.dialect.name)))
    if not names:
        return
    ledger.ledger.create(connection, checkfirst=True)
    known = set(ledger.read(connection))
    for name in names:
        if name not in known:
            connection.execute(sa.insert(ledger.ledger).values(name=name, state=ledger.RETIRED))
        else:
            connection.execute(sa.update(ledger.ledger).where(ledger.ledger.c.name == name).values(state=ledger.RETIRED))


def forget_gone(connection: Any, registry: Any) -> list[str]:
    """Delete the ledger rows of the data migrations whose table or columns a downgrade step took
    away (plain ``alembic downgrade`` per step, ``dbsync rollback`` after its run): the next expand
    starts them afresh, and a ``retired`` mark does not outlive the columns it was about.  Runs in
    the caller's transaction; returns the names forgotten."""
    from migrations_policy.data import ledger
    from migrations_policy.data.remaining.pending import missing_columns

    if not ledger.exists(connection):
        return []
    known = ledger.read(connection)
    gone = [m.name for m in registry if m.name in known and missing_columns(connection, m)]
    if gone:
        connection.execute(sa.delete(ledger.ledger).where(ledger.ledger.c.name.in_(gone)))
    return gone
