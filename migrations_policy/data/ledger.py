"""The ledger: one row per data migration, owned by the framework.

It records what runs did (state, rows migrated, last key, timestamps, last
error) and a contract gate's ``--force``.  It never decides what remains: the
remaining count is always computed live from each migration's pending
predicate, so rows that old code dirties again are never missed.

A project creates it in its expand root revision (any expand revision works
for a project adopting migrations_policy later)::

    from migrations_policy.data.ledger import create_ledger, drop_ledger

    def upgrade():
        create_ledger(op)

    def downgrade():
        drop_ledger(op)

Its name starts with ``migrations_policy_``, which the env.py ``include_object``
hides from autogenerate.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.core.framework_tables import TABLE_PREFIX
from migrations_policy.core.errors import DatabaseError

LEDGER_TABLE = f"{TABLE_PREFIX}data_migrations"

# States a run leaves behind (``running`` stays after a killed run; the next run replaces it).
# ``caught up``: the walk reached the end, yet rows written behind it meanwhile remain (code of
# the previous release still running); ``interrupted``: Ctrl-C or SIGTERM, the batch rolled back.
RUNNING, COMPLETE, INCOMPLETE, STUCK, ERROR, WAITING, INAPPLICABLE, CAUGHT_UP, INTERRUPTED = (
    "running", "complete", "incomplete", "stuck", "error", "waiting", "inapplicable", "caught up", "interrupted")
NEVER_RUN = "never run"
#: Written by the env.py hook when a forced downgrade re-creates the columns a completed migration
#: read (``gate/hook/downgrades.py``): the runner never runs it again.  Forging it stops the runner only
#: (fail closed: the gate still recounts the rows).
RETIRED = "retired"


def _columns() -> list[sa.Column]:
    return [
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("rows_migrated", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("rows_stuck", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("last_key", sa.String(255), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("forced_at", sa.DateTime(), nullable=True),
        sa.Column("forced_by", sa.String(255), nullable=True),
        sa.Column("forced_reason", sa.Text(), nullable=True),
        sa.Column("forced_remaining", sa.BigInteger(), nullable=True),
    ]


metadata = sa.MetaData()
ledger = sa.Table(LEDGER_TABLE, metadata, *_columns())


def create_ledger(op: Any) -> None:
    """Create the ledger table from an alembic revision (``create_ledger(op)``)."""
    op.create_table(LEDGER_TABLE, *_columns())


def drop_ledger(op: Any) -> None:
    op.drop_table(LEDGER_TABLE)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def exists(connection: Connection) -> bool:
    return sa.inspect(connection).has_table(LEDGER_TABLE)


def require(connection: Connection) -> None:
    """One-line error when the ledger table has not been created."""
    if not exists(connection):
        raise DatabaseError(
            f"the data-migration ledger ({LEDGER_TABLE}) does not exist: apply the expand revisions first "
            "(dbsync upgrade --expand); the project's expand root must call create_ledger(op)"
        )


def _insert_missing(connection: Connection, name: str) -> None:
    found = connection.execute(sa.select(ledger.c.name).where(ledger.c.name == name)).first()
    if found is None:
        connection.execute(sa.insert(ledger).values(name=name, state=NEVER_RUN))


def _ensure_row(connection: Connection, name: str) -> None:
    """Insert *name*'s row if missing, in its own transaction (another runner may race us)."""
    try:
        with connection.begin():
            _insert_missing(connection, name)
    except sa.exc.IntegrityError:
        pass  # another runner inserted it first


def _update(connection: Connection, name: str, **values: Any) -> None:
    connection.execute(sa.update(ledger).where(ledger.c.name == name).values(updated_at=utcnow(), **values))


def record_start(connection: Connection, name: str) -> None:
    """Mark *name* running (in its own transaction)."""
    _ensure_row(connection, name)
    with connection.begin():
        _update(connection, name, state=RUNNING, rows_stuck=0, started_at=utcnow(), finished_at=None,
                last_error=None)


def as_key_text(key: Any) -> str | None:
    return None if key is None else str(key)[:255]


def record_batch(connection: Connection, name: str, migrated: int, stuck: int, key: Any = None,
                 along: sa.Update | sa.Delete | None = None) -> None:
    """Inside the batch's transaction: what the batch did (atomic with the batch itself);
    *key*, the batch's upper key, unless a claim recorded it already (None).  *along*: another
    bookkeeping statement of the batch (its claim's advance), sent with this one: on PostgreSQL
    in the same statement (a data-modifying ``WITH``, one round trip), elsewhere just before."""
    keys = {} if key is None else {"last_key": as_key_text(key)}
    statement = sa.update(ledger).where(ledger.c.name == name).values(
        updated_at=utcnow(), rows_migrated=ledger.c.rows_migrated + migrated,
        rows_stuck=ledger.c.rows_stuck + stuck, **keys)
    if along is not None:
        if connection.dialect.name == "postgresql":
            statement = statement.add_cte(along.returning(sa.literal(1)).cte("along"))
        else:
            connection.execute(along)
    connection.execute(statement)


def record_claim(connection: Connection, name: str, key: Any) -> None:
    """Under the migration's lock: a runner claimed the keys up to *key* (``claims.py``)."""
    _update(connection, name, last_key=as_key_text(key))


def last_key_query(name: str) -> sa.Select:
    return sa.select(ledger.c.last_key).where(ledger.c.name == name)


def last_key(connection: Connection, name: str) -> str | None:
    return connection.execute(last_key_query(name)).scalar()


#: States after which the next run resumes at ``last_key``: the walk stopped before its end.
RESUMABLE = (INCOMPLETE, INTERRUPTED, RUNNING, ERROR)


def position(connection: Connection, name: str) -> tuple[str, str | None]:
    """*name*'s state and ``last_key`` (``never run``, None without a row)."""
    row = connection.execute(sa.select(ledger.c.state, ledger.c.last_key).where(ledger.c.name == name)).first()
    return (NEVER_RUN, None) if row is None else (row.state, row.last_key)


def record_finish(connection: Connection, name: str, state: str, error: str | None = None, stuck: int = 0) -> None:
    """The run's end: *state*, and the *stuck* rows counted once the walk was over."""
    _ensure_row(connection, name)
    with connection.begin():
        values: dict[str, Any] = {"state": state, "finished_at": utcnow(), "rows_stuck": ledger.c.rows_stuck + stuck}
        if error is not None:
            values["last_error"] = error
        _update(connection, name, **values)


def record_forced(connection: Connection, name: str, *, remaining: int | None, reason: str = "",
                  forced_by: str = "") -> None:
    """Record that a contract gate proceeded with ``--force`` while *name* had *remaining* rows.

    Commits in its own transaction when the connection has none open; otherwise
    it is part of the caller's transaction.
    """
    def write() -> None:
        _insert_missing(connection, name)
        _update(connection, name, forced_at=utcnow(), forced_by=forced_by[:255] or None,
                forced_reason=reason or None, forced_remaining=remaining)

    if connection.in_transaction():
        write()
    else:
        with connection.begin():
            write()


def read(connection: Connection) -> dict[str, dict[str, Any]]:
    """Every ledger row by name ({} when the ledger does not exist yet)."""
    if not exists(connection):
        return {}
    rows = connection.execute(sa.select(ledger)).mappings().all()
    return {row["name"]: dict(row) for row in rows}
