"""While the rolling window is open no revision silently removes a sync trigger.

Release N writes only the old column; the sync triggers an expand installed
(``sync_triggers.py``) carry those writes to the new column until the contract
that drops the old column removes them.  A later revision can remove them
without saying so: on SQLite almost every ``op.batch_alter_table`` re-creates
the table (``DROP TABLE nodes`` once ``_alembic_tmp_nodes`` holds the new shape),
which drops every trigger on it; a hand-written rebuild does the same on any
dialect; ``DROP TRIGGER mp_sync_...`` (``op.execute``, ``exec_driver_sql``) or
``op.drop_sync_trigger`` in an expand removes them outright.  Release N's later
writes to the old column then never reach the new one: lost, silently.

The decision, made here for the gate's offline pass and the live run alike:

* **Explicit drops** (``op.drop_sync_trigger``, ``DROP TRIGGER`` / PostgreSQL's
  ``DROP FUNCTION`` of a live sync trigger, however sent) are the contract's job:
  a contract runs once release N is gone.  In any other revision they are refused
  (:func:`explicit_drop_refusal`, one line naming the file, revision, table and
  trigger): by ``gate.evaluate`` before any DDL when the revision's ``upgrade()``
  shows them offline, else by :func:`keeping` as the statement is about to
  execute.  An expand cannot replace a pair's triggers: create a new pair.
* **Side-effect losses** (a table re-created under its triggers): ours to undo.
  :func:`keeping` reads every live sync trigger's definition from the catalog
  before the revision, and again, for the table, just before a statement drops a
  table (so the triggers the revision itself created before re-creating their table
  count too) (SQLite: the ``CREATE TRIGGER`` text ``sqlite_master``
  keeps; PostgreSQL: ``pg_get_functiondef`` / ``pg_get_triggerdef``; MariaDB:
  ``SHOW CREATE TRIGGER``) and, when the revision's statements are done and
  before its version is recorded, re-installs those missing whose table and both
  columns still exist, from that exact text, then checks that the catalog gives
  the same definitions back.  A trigger whose table or a column is gone is left
  gone (the column drop is judged by the gate's own rules: MP160,
  ``gate.sync_trigger_checks.dropped_under_sync_triggers``).  The re-install runs in the revision's
  transaction, so release N's writes wait for it on SQLite and PostgreSQL; a
  statement that would drop a table carrying live sync triggers outside a
  transaction (MariaDB's DDL commits at once; a PostgreSQL ``autocommit_block``)
  is refused before it runs, since writes in between would be lost.  So is a
  re-install whose definition does not come back exactly.

* **Silenced triggers** (a body replaced, a PostgreSQL trigger disabled, a definition
  changed): checked before and after every revision (``sync_integrity``); a broken one
  refuses the revision (a contract may still run: it drops the pair).

A refusal raises :class:`SyncTriggerRefused` (``dbsync`` exit 4, alembic prints
``FAILED: ...``).  ``--force`` does not override it: no data migration can
recover a write that went nowhere.  Lint rule MP161 points out the rebuilds in
the scripts beforehand.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

import sqlalchemy as sa
from alembic.util import CommandError
from sqlalchemy import event
from sqlalchemy.engine import Connection

from migrations_policy.core.reflect import column_names
from migrations_policy.policy import model as m
from migrations_policy.core.revisions import CONTRACT
from migrations_policy.window.sync_integrity import changed, faults

#: Exit code of dbsync when a revision would lose a sync trigger (the gate's "refused").
EXIT_REFUSED = 4


class SyncTriggerRefused(CommandError):
    """A revision would remove a live sync trigger while release N may still write its old column."""

    exit_code = EXIT_REFUSED


def explicit_drop_refusal(where: str, revision: str, phase: str | None, trigger: Any, how: str) -> str | None:
    """Why *revision* (phase *phase*, file *where*) may not drop the live sync trigger *trigger*
    (``sync_triggers.FoundSyncTrigger``) explicitly (*how*: "op.drop_sync_trigger" or the SQL
    statement's kind), or None: a contract may."""
    if phase == CONTRACT:
        return None
    return (f"{where}: revision {revision} ({phase or 'no phase'}) drops sync trigger {trigger.trigger} on "
            f"{trigger.table} ({how}) while release N may still write {trigger.table}.{trigger.old}: its "
            f"writes would no longer reach {trigger.new}; only the contract that drops {trigger.old} removes "
            f"it (op.drop_sync_trigger({trigger.table!r}, old={trigger.old!r}, new={trigger.new!r}) there)")


def _loss_refusal(where: str, revision: str, trigger: Any, why: str) -> str:
    return (f"{where}: revision {revision} would remove sync trigger {trigger.trigger} on {trigger.table} "
            f"({trigger.table}.{trigger.old} -> {trigger.new}) {why}; release N's writes to {trigger.old} "
            "would be lost")


def rebuild_refusal(where: str, revision: str, trigger: Any) -> str:
    """Why *revision* may not drop and re-create the table of the live sync trigger *trigger* where
    DDL commits at once (MariaDB/MySQL): the trigger would be gone, with nothing to put it back."""
    return _loss_refusal(where, revision, trigger, "by dropping the table outside a transaction (re-create it "
                         "with its triggers, or use ALTER TABLE)")


def explicit_drops(operations: Iterable[Any]) -> list[tuple[str, str]]:
    """(trigger or function name, how) dropped explicitly by recorded alembic *operations*
    (``op.drop_sync_trigger`` by its pair's base name; ``op.execute`` SQL by the names it drops)."""
    from alembic.operations import ops

    from migrations_policy.policy.sql import dropped_triggers
    from migrations_policy.window.sync_triggers import DropSyncTriggerOp

    found = []
    for operation in operations:
        if isinstance(operation, DropSyncTriggerOp):
            found.append((operation.pair.name, "op.drop_sync_trigger"))
        elif isinstance(operation, ops.ExecuteSQLOp) and isinstance(operation.sqltext, (str, sa.TextClause)):
            text = operation.sqltext if isinstance(operation.sqltext, str) else operation.sqltext.text
            found.extend((name, _HOW) for name in dropped_triggers(text))
    return found


#: How a statement ``policy.sql.dropped_triggers`` names removes or silences a trigger.
_HOW = "DROP TRIGGER/FUNCTION"  # also CREATE OR REPLACE, ALTER ... RENAME, DISABLE TRIGGER


def hit(name: str, live: Iterable[Any]) -> list[Any]:
    """The live sync triggers a drop of *name* removes: the trigger itself, or every trigger of
    the pair whose base name (PostgreSQL's function, ``op.drop_sync_trigger``) it is."""
    from migrations_policy.window.sync_triggers import sync_trigger_name

    name = name.lower()
    if name.startswith("*"):  # DISABLE TRIGGER ALL / USER on a table (policy.sql.dropped_triggers)
        return [t for t in live if t.table.lower() == name[1:]]
    return [t for t in live if t.trigger.lower() == name
            or sync_trigger_name(t.table, t.old, t.new).lower() == name]


# -- while a revision runs ------------------------------------------------------------
def _in_transaction(connection: Connection) -> bool:
    """Whether a statement sent now on *connection* is undone by a rollback."""
    from migrations_policy.expand.lock_timeout import in_real_transaction

    if connection.dialect.name == "sqlite":
        return bool(connection.connection.dbapi_connection.in_transaction)
    return in_real_transaction(connection)  # PostgreSQL; MariaDB/MySQL DDL commits at once


def _columns(connection: Connection, table: str) -> set[str]:
    return set(column_names(sa.inspect(connection), table))


@contextlib.contextmanager
def keeping(connection: Connection, where: str, revision: str, phase: str | None) -> Iterator[None]:
    """Run a revision's ``upgrade()`` (the block) so that no live sync trigger is lost silently:
    explicit drops outside a contract and table drops outside a transaction are refused before
    they execute; triggers dropped with a re-created table are re-installed at the end, exactly."""
    from migrations_policy.policy.sql import dropped_triggers, from_sql, may_drop_table
    from migrations_policy.window.sync_triggers import sync_triggers, trigger_definitions

    if phase != CONTRACT:  # a contract may drop a broken pair: that is the way out
        _refuse_faults(connection, where, f"revision {revision} not run", set())
    live = sync_triggers(connection)
    definitions = trigger_definitions(connection, live) if live else {}
    released: set[str] = set()
    busy = False

    def dropped_now(conn: Connection, tables: set[str]) -> None:
        """The sync triggers on *tables* as the statement dropping them is about to run: those the
        revision itself created (``op.create_sync_trigger`` before a batch re-creates the table) are
        kept as those found before it are (read when it is true, not only before the revision)."""
        known = {t.trigger for t in live}
        found = [t for t in sync_triggers(conn) if t.table.lower() in tables and t.trigger not in known]
        if found:
            definitions.update(trigger_definitions(conn, found))
            live.extend(found)

    def before_cursor_execute(conn, cursor, statement, parameters, context, executemany):
        nonlocal busy
        if busy or not isinstance(statement, str):
            return
        refusal = None
        for name in dropped_triggers(statement):
            for trigger in hit(name, live):
                refusal = refusal or explicit_drop_refusal(where, revision, phase, trigger, _HOW)
                released.add(trigger.trigger)  # a contract's to drop: not put back
        tables = {o.table.lower() for o in from_sql(statement) if o.kind == m.DROP_TABLE and o.table} \
            if may_drop_table(statement) else set()
        if tables:
            busy = True  # the reads below execute on this connection
            try:
                dropped_now(conn, tables)
            finally:
                busy = False
        carried = [t for t in live if t.table.lower() in tables and t.trigger not in released]
        if carried and refusal is None:
            busy = True  # the check below may execute on this connection
            try:
                if not _in_transaction(conn):
                    refusal = rebuild_refusal(where, revision, carried[0])
            finally:
                busy = False
        if refusal:
            raise SyncTriggerRefused(refusal)

    event.listen(connection, "before_cursor_execute", before_cursor_execute)
    try:
        yield
    finally:
        event.remove(connection, "before_cursor_execute", before_cursor_execute)
    kept = [t for t in live if t.trigger not in released]
    _refuse_faults(connection, where, f"revision {revision} leaves it so", released)
    _restore(connection, where, revision, kept, definitions)
    _refuse(where, f"revision {revision} leaves it so", changed(connection, kept, definitions))


def _refuse_faults(connection: Connection, where: str, outcome: str, released: set[str]) -> None:
    _refuse(where, outcome, [(name, why) for name, why in faults(connection) if name not in released])


def _refuse(where: str, outcome: str, found: list[tuple[str, str]]) -> None:
    """Fail closed on the first trigger of *found* (``sync_integrity``): one line naming it."""
    if found:
        name, why = found[0]
        raise SyncTriggerRefused(
            f"{where}: sync trigger {name} {why}: {outcome}; release N's writes to its old column would not reach "
            "the new one (operator guide: A sync trigger is not whole)")


def _restore(connection: Connection, where: str, revision: str, live: list[Any],
             definitions: dict[str, list[str]]) -> None:
    """Re-install the triggers of *live* (not dropped explicitly) that are gone while their table
    and columns remain."""
    from migrations_policy.window.sync_triggers import sync_triggers, trigger_definitions

    present = {t.trigger for t in sync_triggers(connection)}
    missing = [t for t in live if t.trigger not in present
               and {t.old.lower(), t.new.lower()} <= _columns(connection, t.table)]
    if not missing:
        return
    for trigger in missing:
        for text in definitions.get(trigger.trigger, []):
            connection.exec_driver_sql(text, execution_options={"no_parameters": True})
    back = trigger_definitions(connection, missing)
    for trigger in missing:
        if not definitions.get(trigger.trigger) or back.get(trigger.trigger) != definitions[trigger.trigger]:
            raise SyncTriggerRefused(_loss_refusal(where, revision, trigger,
                                                   "and its definition cannot be restored exactly"))
