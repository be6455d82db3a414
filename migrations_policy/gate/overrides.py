"""Overrides of the gate: who forced (``forced_by``), the append-only record of every override
in ``migrations_policy_gate_overrides`` (``record_override``, ``record_force``, which also marks
the ledger and warns on stderr), and reading it back (``overrides``).
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.core.framework_tables import gate_overrides_table
from migrations_policy.gate.verdict import GateVerdict


def forced_by() -> str:
    """Who is forcing: user@host, for the ledger."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def record_override(connection: Connection, command: str, reason: str, revisions: list[str],
                    rows: list[dict[str, Any]]) -> str:
    """Append one ``migrations_policy_gate_overrides`` row per entry of *rows* ({"migration", "remaining"})
    for a forced *command* over *revisions*, committed; return who forced it."""
    from migrations_policy.data import ledger

    who = forced_by()
    gate_overrides_table.create(connection, checkfirst=True)
    connection.execute(sa.insert(gate_overrides_table), [
        {"forced_at": ledger.utcnow(), "forced_by": who[:255], "reason": reason or None, "command": command,
         "revisions": ",".join(revisions), **row} for row in rows])
    if connection.in_transaction():
        connection.commit()
    return who


def record_force(connection: Connection, verdict: GateVerdict, reason: str, command: str = "upgrade") -> None:
    """Keep the override in ``migrations_policy_gate_overrides`` (one row per forced migration,
    never overwritten), mark the ledger's rows, and say so loudly on stderr."""
    from migrations_policy.data import ledger

    rows = [{"migration": p.name, "remaining": p.remaining} for p in verdict.pending] or \
        [{"migration": None, "remaining": None}]
    who = record_override(connection, command, reason, verdict.contract_revisions, rows)
    for pending in verdict.pending:
        ledger.record_forced(connection, pending.name, remaining=pending.remaining, reason=reason, forced_by=who)
    if connection.in_transaction():
        connection.commit()
    print(f"WARNING: contract gate FORCED ({command}) by {who} ({reason or 'no reason given'}): "
          f"{verdict.summary()}; recorded in {gate_overrides_table.name}", file=sys.stderr)


def overrides(connection: Connection) -> list[dict[str, Any]]:
    """Every recorded override, oldest first ([] when there never was one)."""
    if not sa.inspect(connection).has_table(gate_overrides_table.name):
        return []
    query = sa.select(gate_overrides_table).order_by(gate_overrides_table.c.id)
    return [dict(row) for row in connection.execute(query).mappings()]
