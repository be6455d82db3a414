"""What the gate refuses, before any DDL, about the live sync triggers of the rolling window:
a revision dropping a column or table a live trigger keeps in step without dropping the trigger
first, dropping a live trigger explicitly where the run's own watch would refuse it, or (on
MariaDB/MySQL) re-creating a table that carries live triggers; and, for ``dbsync check`` and
``status``, the triggers no pending revision removes (``sync_triggers_left_behind``).  Each is
read from the revision's ``upgrade()`` run offline; the verdict (``verdict.evaluate``) asks these.
"""

from __future__ import annotations

from typing import Any, Iterable

from alembic.script import Script
from sqlalchemy.engine import Connection

from migrations_policy.core.revisions import phase_of


def dropped_under_sync_triggers(rev: Script, dialect_name: str, triggers: list[Any]) -> list[str]:
    """Live sync triggers whose column or table *rev*'s ``upgrade()`` drops without dropping the
    trigger first (``op.drop_sync_trigger``): on MariaDB/SQLite every later write to the table
    would fail.  One line each, naming the file."""
    from alembic.operations import ops

    from migrations_policy.core.offline_run import dropping_operations
    from migrations_policy.window.sync_triggers import DropSyncTriggerOp

    recorded, _ = dropping_operations(rev.module.upgrade, dialect_name)
    columns = {(o.table_name, o.column_name) for o in recorded if isinstance(o, ops.DropColumnOp)}
    tables = {o.table_name for o in recorded if isinstance(o, ops.DropTableOp)}
    released = {(o.pair.table, o.pair.old, o.pair.new) for o in recorded if isinstance(o, DropSyncTriggerOp)}
    return [f"{rev.path}: revision {rev.revision} drops {t.table}.{t.old if (t.table, t.old) in columns else t.new}"
            f"{'' if t.table not in tables else ' (the table)'} while sync trigger {t.trigger} keeps "
            f"{t.old} and {t.new} in step: call op.drop_sync_trigger({t.table!r}, old={t.old!r}, "
            f"new={t.new!r}) before the drop"
            for t in triggers
            if (t.table, t.old, t.new) not in released
            and (t.table in tables or (t.table, t.old) in columns or (t.table, t.new) in columns)]


def live_sync_triggers(connection: Connection) -> list[Any]:
    from migrations_policy.window.sync_triggers import sync_triggers

    return sync_triggers(connection)


def explicit_sync_drops(rev: Script, dialect_name: str) -> tuple[list[tuple[str, str]], list[tuple[str, list[str]]]]:
    """(name, how) of the triggers and functions *rev*'s ``upgrade()``, run offline, drops
    explicitly (``op.drop_sync_trigger``, ``DROP TRIGGER`` in ``op.execute``), and the tables it
    re-creates (``batch_alter_table(..., recreate="always")``), each with the names dropped before."""
    from migrations_policy.core.offline_run import RebuiltTable, dropping_operations
    from migrations_policy.window.sync_keeper import explicit_drops

    recorded, _ = dropping_operations(rev.module.upgrade, dialect_name)
    dropped: list[tuple[str, str]] = []
    rebuilt: list[tuple[str, list[str]]] = []
    for operation in recorded:
        if isinstance(operation, RebuiltTable):
            rebuilt.append((operation.table, [name for name, _ in dropped]))
        else:
            dropped.extend(explicit_drops([operation]))
    return dropped, rebuilt


def rebuild_refusals(rev: Script, rebuilt: list[tuple[str, list[str]]], triggers: list[Any],
                     dialect_name: str) -> list[str]:
    """On MariaDB/MySQL, where DDL commits at once, a table *rev* re-creates while it carries live
    sync triggers (not dropped before, in a contract): refused before any DDL (the run would refuse
    at its ``DROP TABLE``, after the statements before it had committed).  Elsewhere the
    re-creation runs in the revision's transaction and the triggers are put back at its end
    (``sync_keeper``).  One line per table."""
    if dialect_name not in ("mysql", "mariadb"):
        return []
    from migrations_policy.window.sync_keeper import hit, rebuild_refusal

    first: dict[str, Any] = {}
    for table, dropped_before in rebuilt:
        gone = {t.trigger for name in dropped_before for t in hit(name, triggers)}
        for trigger in triggers:
            if trigger.table.lower() == table.lower() and trigger.trigger not in gone:
                first.setdefault(table.lower(), trigger)
    return [rebuild_refusal(rev.path, rev.revision, trigger) for trigger in first.values()]


def sync_drop_refusals(rev: Script, dropped: list[tuple[str, str]], triggers: list[Any]) -> list[str]:
    """``sync_keeper.explicit_drop_refusal`` for each live sync trigger *rev* drops (*dropped*):
    the run's own watch decides the same as each statement is about to execute."""
    from migrations_policy.window.sync_keeper import explicit_drop_refusal, hit

    first: dict[tuple, Any] = {}  # one line per pair of columns and way of dropping
    for name, how in dropped:
        for trigger in hit(name, triggers):
            first.setdefault((trigger.table, trigger.old, trigger.new, how), trigger)
    lines = [explicit_drop_refusal(rev.path, rev.revision, phase_of(rev), trigger, key[3])
             for key, trigger in first.items()]
    return [line for line in lines if line]


def sync_triggers_left_behind(connection: Connection, pending: Iterable[Script]) -> list[str]:
    """Installed sync triggers that no *pending* revision removes (``op.drop_sync_trigger``): left
    behind after their contract, worse when stale (a column they keep in step is gone, so every
    write to the table fails).  One line per pair of columns, for ``dbsync check`` and ``status``.
    One that a pending revision removes is expected (the rolling window), stale or not."""
    from migrations_policy.core.offline_run import dropping_operations
    from migrations_policy.window.sync_triggers import (DropSyncTriggerOp,
        stale_sync_triggers,
        sync_trigger_name,
        sync_triggers)

    live = sync_triggers(connection)
    if not live:
        return []
    stale = {(t.table, t.old, t.new) for t in stale_sync_triggers(connection, live)}
    released = set()
    for rev in pending:
        recorded, _ = dropping_operations(rev.module.upgrade, connection.dialect.name)
        released.update((o.pair.table, o.pair.old, o.pair.new) for o in recorded if isinstance(o, DropSyncTriggerOp))
    lines = []
    for table, old, new in dict.fromkeys((t.table, t.old, t.new) for t in live):
        drop = f"op.drop_sync_trigger({table!r}, old={old!r}, new={new!r})"
        name = sync_trigger_name(table, old, new)
        if (table, old, new) in released:
            continue
        if (table, old, new) in stale:
            lines.append(f"sync trigger {name} keeps {table}.{old} and {table}.{new} in step, but the table or a "
                         f"column is gone: every write to {table} fails; remove it ({drop} in a revision)")
        else:
            lines.append(f"sync trigger {name} ({table}.{old} <-> {table}.{new}) is left behind: no pending "
                         f"revision removes it, and every write to {table} still runs it; remove it ({drop})")
    return lines
