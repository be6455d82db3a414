"""Are the live sync triggers whole and firing?  Checked before and after every revision.

``sync_keeper.keeping`` refuses (exit 4, one line naming the trigger and the revision) when
a trigger named like a sync trigger (``mp_sync_...``):

* does not carry its pair's marker: its body was replaced (MariaDB ``CREATE OR REPLACE
  TRIGGER``, PostgreSQL ``CREATE OR REPLACE FUNCTION``) by something the framework did not
  generate;
* is disabled (PostgreSQL ``pg_trigger.tgenabled`` other than ``O``: ``DISABLE TRIGGER``,
  ``ENABLE REPLICA`` / ``ALWAYS TRIGGER``, which fire for replication sessions, not release N);
* after the revision: no longer has the definition the catalog gave before it.

A trigger of a pair that is merely missing is left to the keeper's re-install (a table
rebuilt under it) or to the rerun of the expand that creates the pair (MariaDB: stopped
between its two ``CREATE TRIGGER`` statements).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.window.sync_triggers import PREFIX, FoundSyncTrigger, sync_triggers, trigger_definitions


def _catalog(connection: Connection) -> dict[str, bool]:
    """{trigger named like a sync trigger: enabled for ordinary sessions}."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        t = sa.table("pg_trigger", sa.column("tgname"), sa.column("tgenabled"), sa.column("tgisinternal"))
        query = sa.select(t.c.tgname, t.c.tgenabled == "O").where(sa.not_(t.c.tgisinternal))
    elif dialect in ("mysql", "mariadb"):
        t = sa.table("triggers", sa.column("trigger_name"), sa.column("trigger_schema"), schema="information_schema")
        query = sa.select(t.c.trigger_name, sa.true()).where(t.c.trigger_schema == sa.func.database())
    elif dialect == "sqlite":
        t = sa.table("sqlite_master", sa.column("type"), sa.column("name"))
        query = sa.select(t.c.name, sa.true()).where(t.c.type == "trigger")
    else:
        return {}
    return {name: bool(on) for name, on in connection.execute(query) if name.startswith(PREFIX)}


def faults(connection: Connection) -> list[tuple[str, str]]:
    """(trigger, what is wrong with it) for every sync-named trigger not whole and firing."""
    marked = {t.trigger for t in sync_triggers(connection)}
    found = []
    for name, enabled in sorted(_catalog(connection).items()):
        if name not in marked:
            found.append((name, "is no longer the trigger the framework generated (its body was replaced)"))
        elif not enabled:
            found.append((name, "is disabled (it no longer fires for release N's writes)"))
    return found


def changed(connection: Connection, live: list[FoundSyncTrigger], before: dict[str, list[str]]
            ) -> list[tuple[str, str]]:
    """(trigger, why) for each trigger of *live* still present whose definition differs from *before*."""
    now = trigger_definitions(connection, live)
    return [(name, "has another definition than before the revision") for name in sorted(now)
            if name in before and now[name] != before[name]]
