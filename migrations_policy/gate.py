"""The contract gate: no contract revision runs while the data it needs is unmigrated.

A contract revision declares the online data migrations it needs, in either form::

    requires_data_migrations = ("nodes_extra_to_meta", "port_node_orphans")

    def upgrade():
        op.require_data_migrations("nodes_extra_to_meta")   # same effect, inside upgrade()

Before alembic applies anything, ``environment.run_migrations`` (called from the
project's env.py, so plain ``alembic upgrade heads`` is gated as well as
``dbsync upgrade``) works out which revisions this run will apply and asks this
module.  The gate refuses, before any DDL, when

* a required migration still has rows to migrate (counted live by the
  database from its pending predicate — the ledger alone could be stale), or is
  stuck or failed, or is unknown;
* the expand revision a contract revision depends on is not applied yet —
  also when it is part of this same run: between expand and contract, data
  migrations must run (``alembic upgrade heads`` on a database at release N is
  refused; on a fresh, empty database everything applies in one go).

``--force`` (``dbsync upgrade --contract --force``, or
``alembic -x migrations_policy_force=REASON upgrade ...``) lets it proceed and
records who, when and what remained in the ledger.
"""

from __future__ import annotations

import ast
import getpass
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from .revisions import CONTRACT, EXPAND, applied_revisions, parents, phase_of


#: Exit code of dbsync when the gate refuses.
EXIT_REFUSED = 4


@dataclass
class PendingMigration:
    name: str
    remaining: int | None
    state: str
    required_by: list[str] = field(default_factory=list)
    #: *remaining* is the planner's estimate (a pending row was found; counting them all is not needed).
    estimated: bool = False

    def describe(self) -> str:
        rows = ("unknown rows (its table or columns do not exist yet)" if self.remaining is None
                else f"{'~' if self.estimated else ''}{self.remaining:,} row{'' if self.remaining == 1 else 's'} "
                     f"remaining{' (estimate)' if self.estimated else ''}")
        return f"{self.name}: {rows}, state {self.state} (required by {', '.join(self.required_by)})"


@dataclass
class GateVerdict:
    """What the gate found for the revisions about to be applied."""

    contract_revisions: list[str] = field(default_factory=list)
    pending: list[PendingMigration] = field(default_factory=list)
    missing_expand: list[tuple[str, str]] = field(default_factory=list)  # (contract rev, expand rev it needs)

    @property
    def allowed(self) -> bool:
        return not self.pending and not self.missing_expand

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "contract_revisions": self.contract_revisions,
            "pending": [{"name": p.name, "remaining": p.remaining, "estimated": p.estimated, "state": p.state,
                         "required_by": p.required_by} for p in self.pending],
            "missing_expand": [{"revision": c, "needs": e} for c, e in self.missing_expand],
        }


class GateRefused(CommandError):
    """Raised from env.py: alembic prints it (``FAILED: ...``), dbsync exits with code 4."""

    exit_code = EXIT_REFUSED

    def __init__(self, verdict: GateVerdict, how_to_finish: str):
        self.verdict = verdict
        lines = ["contract refused: " + _summary(verdict)]
        lines += [f"  - {p.describe()}" for p in verdict.pending]
        lines += [f"  - {c} needs expand revision {e}, which is not applied: run the expand phase first"
                  for c, e in verdict.missing_expand]
        lines.append(how_to_finish)
        super().__init__("\n".join(lines))


def _summary(verdict: GateVerdict) -> str:
    parts = []
    if verdict.pending:
        parts.append(f"{len(verdict.pending)} data migration(s) not complete")
    if verdict.missing_expand:
        parts.append(f"{len(verdict.missing_expand)} expand revision(s) missing")
    return "; ".join(parts)


# -- what a contract revision requires ---------------------------------------------
def requirements_of(rev: Script) -> tuple[str, ...]:
    """Data migrations *rev* declares: its ``requires_data_migrations`` plus every
    ``op.require_data_migrations("...")`` call found in its source."""
    declared = getattr(rev.module, "requires_data_migrations", ()) or ()
    if isinstance(declared, str):
        declared = (declared,)
    names = list(declared)
    try:
        with open(rev.path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), rev.path)
    except (OSError, SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "require_data_migrations":
            names.extend(arg.value for arg in node.args
                         if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return tuple(dict.fromkeys(names))


# -- the check --------------------------------------------------------------------
def evaluate(connection: Connection, script: ScriptDirectory, revisions: list[Script],
             current: Iterable[str], registry: Any) -> GateVerdict:
    """Judge *revisions* (about to be applied) against the ledger and live counts."""
    verdict = GateVerdict()
    applied = applied_revisions(script, current)
    if not applied:
        return verdict  # a fresh database: no data to migrate, no old code running
    required: dict[str, list[str]] = {}
    for rev in revisions:
        if phase_of(rev) != CONTRACT:
            continue
        verdict.contract_revisions.append(rev.revision)
        for parent in parents(script, rev):
            if phase_of(parent) == EXPAND and parent.revision not in applied:
                verdict.missing_expand.append((rev.revision, parent.revision))
        for name in requirements_of(rev):
            required.setdefault(name, []).append(rev.revision)
    verdict.pending = unfinished(connection, registry, required)
    return verdict


def unfinished(connection: Connection, registry: Any, required: dict[str, list[str]]) -> list[PendingMigration]:
    """Of the *required* data migrations ({name: [requiring revisions]}), those not complete.

    The rows decide, live (the ledger's state is only reported): one pending row is
    enough to refuse (found with LIMIT 1, its count then estimated); a migration whose
    table or columns do not exist yet, or that is not declared at all, is not complete either.
    """
    if not required:
        return []
    from .data.pending import pending_migrations

    known = [registry[name] for name in required if name in registry]
    live = {p.name: p for p in pending_migrations(connection, known)}
    found = []
    for name, required_by in required.items():
        migration = live.get(name)
        if migration is None:
            found.append(PendingMigration(name, None, "unknown (not declared)", required_by))
        elif migration.remaining is None or migration.remaining > 0:
            found.append(PendingMigration(name, migration.remaining, migration.state, required_by,
                                          migration.estimated))
    return found


def forced_by() -> str:
    """Who is forcing: user@host, for the ledger."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def record_force(connection: Connection, verdict: GateVerdict, reason: str) -> None:
    """Write the override into the ledger and say so loudly on stderr."""
    from .data import ledger

    who = forced_by()
    for pending in verdict.pending:
        ledger.record_forced(connection, pending.name, remaining=pending.remaining, reason=reason, forced_by=who)
    if connection.in_transaction():
        connection.commit()
    print(f"WARNING: contract gate FORCED by {who} ({reason or 'no reason given'}): "
          f"{_summary(verdict)}; recorded in the ledger", file=sys.stderr)
