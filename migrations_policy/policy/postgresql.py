"""PostgreSQL: what each operation locks and rewrites (measured on PostgreSQL 15).

``effect(op, ctx) -> (Effect, alternative)``.  Facts follow the measurements in
the project's DDL lock notes: ACCESS EXCLUSIVE blocks reads and writes, SHARE
and SHARE ROW EXCLUSIVE block writes; "brief" locks are only held for a
catalog update (they still queue behind long transactions: dbsync applies a
lock_timeout and retries).
"""

from __future__ import annotations

from migrations_policy.policy import model as m
from dataclasses import replace

from migrations_policy.policy.model import Effect

DIALECT = "postgresql"

_REWRITE = Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, rewrite=True)
_CONCURRENTLY = "CREATE INDEX CONCURRENTLY (postgresql_concurrently=True) inside op.get_context().autocommit_block()"


def _add_column(op: m.Operation, ctx: m.Context) -> tuple[Effect, str]:
    if op.generated in ("stored", "identity") or op.default_kind == m.DEFAULT_VOLATILE:
        what = "an identity/serial column" if op.generated == "identity" else (
            "a STORED generated column" if op.generated == "stored" else f"volatile DEFAULT {op.server_default}")
        return replace(_REWRITE, note=f"{what} rewrites the whole table and its indexes under ACCESS EXCLUSIVE (reads and writes blocked)"), \
            "add the column nullable without default, set the default for new rows, backfill in an online data migration"
    if op.default_kind != m.DEFAULT_NONE and ctx.postgresql_version < 11:
        return replace(_REWRITE, note=f"before PostgreSQL 11 (configured: {ctx.postgresql_version}) any ADD COLUMN ... DEFAULT rewrites the table under ACCESS EXCLUSIVE"), \
            "add the column without default, then ALTER COLUMN SET DEFAULT, backfill online"
    if op.nullable is False and op.default_kind == m.DEFAULT_NONE:
        return Effect(lock="ACCESS EXCLUSIVE", fails="fails on a non-empty table (existing rows would be NULL)",
                      note="NOT NULL without a server default fails on a non-empty table"), ""
    if op.unique or op.primary_key:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True,
                      note="an inline UNIQUE/PRIMARY KEY builds an index under ACCESS EXCLUSIVE"), \
            "add the column, then " + _CONCURRENTLY.replace("INDEX", "UNIQUE INDEX")
    return m.QUIET, ""


def effect(op: m.Operation, ctx: m.Context) -> tuple[Effect, str]:
    kind = op.kind
    if kind == m.CREATE_INDEX and op.concurrently and not op.autocommit:
        return Effect(lock="SHARE UPDATE EXCLUSIVE", no_transaction=True,
                      fails="CREATE INDEX CONCURRENTLY cannot run inside a transaction block",
                      note="CONCURRENTLY is refused inside the migration's transaction"), \
            "wrap it in op.get_context().autocommit_block()"
    if kind in (m.DROP_INDEX, m.OTHER) and op.concurrently and not op.autocommit:
        return Effect(no_transaction=True, fails="CONCURRENTLY cannot run inside a transaction block",
                      note="CONCURRENTLY is refused inside the migration's transaction"), \
            "wrap it in op.get_context().autocommit_block()"
    if op.new_table:
        return m.QUIET, ""
    if kind == m.ADD_COLUMN:
        return _add_column(op, ctx)
    if kind == m.CREATE_INDEX and not op.concurrently:
        return Effect(lock="SHARE", blocks_writes=True, scan=True,
                      note="CREATE INDEX without CONCURRENTLY blocks writes to the table for the whole build"), _CONCURRENTLY
    if kind == m.ADD_FK and not op.not_valid:
        return Effect(lock="SHARE ROW EXCLUSIVE on both tables", blocks_writes=True, scan=True,
                      note="ADD FOREIGN KEY validates every row while blocking writes to both tables"), \
            "add it NOT VALID (postgresql_not_valid=True) in expand, VALIDATE CONSTRAINT in a later script"
    if kind == m.ADD_CHECK and not op.not_valid:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, scan=True,
                      note="ADD CHECK scans the table under ACCESS EXCLUSIVE (reads and writes blocked)"), \
            "add it NOT VALID (postgresql_not_valid=True), VALIDATE CONSTRAINT in a later script"
    if kind in (m.ADD_UNIQUE, m.ADD_PK) and not op.using_index:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, scan=True,
                      note="ADD UNIQUE/PRIMARY KEY builds its index under ACCESS EXCLUSIVE (reads and writes blocked)"), \
            "CREATE UNIQUE INDEX CONCURRENTLY in an autocommit block, then ADD CONSTRAINT ... USING INDEX"
    if kind == m.WIDEN_VARCHAR:
        return Effect(lock="ACCESS EXCLUSIVE (brief: catalog only)",
                      note="widening a varchar (or making it text: binary-coercible) is metadata-only: no rewrite, "
                           "the indexes are kept"), ""
    if kind == m.ALTER_TYPE:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, rewrite=True,
                      note="a type change takes ACCESS EXCLUSIVE and usually rewrites the table and its indexes"), ""
    if kind == m.SET_NOT_NULL:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, scan=True,
                      note="SET NOT NULL scans the whole table under ACCESS EXCLUSIVE"), ""
    if kind == m.TRUNCATE:
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True,
                      note="TRUNCATE takes ACCESS EXCLUSIVE and removes every row"), ""
    if kind == m.BATCH_RECREATE and op.value == "always":
        return Effect(lock="ACCESS EXCLUSIVE", blocks_reads=True, blocks_writes=True, rewrite=True,
                      note="batch recreate=\"always\" copies the table into a new one"), "use plain op.* calls (recreate=\"auto\")"
    return m.QUIET, ""
