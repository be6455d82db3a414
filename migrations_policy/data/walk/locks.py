"""One transaction per batch, serialised per migration across concurrent runners.

* PostgreSQL: a transaction-scoped advisory lock per migration
  (``pg_advisory_xact_lock``), released by COMMIT, ROLLBACK or a dead session;
  taken by the same statement that reads the batch's ledger row (one round trip).
* MariaDB / MySQL: ``GET_LOCK`` per migration, released after the commit (and by
  the server when the session dies).
* SQLite: ``BEGIN IMMEDIATE``, the database's own write lock, taken before the
  batch reads anything.

Two runners on the same migration therefore never interleave inside a batch;
since every batch re-evaluates the pending predicate, rows the other runner
migrated are simply no longer selected, and no row is migrated twice.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from contextlib import contextmanager
from typing import Any, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

# High 32 bits of the PostgreSQL advisory lock key: "mp" (migrations_policy).
_PG_NAMESPACE = 0x6D70
MYSQL_LOCK_TIMEOUT = 60


class LockTimeout(RuntimeError):
    """Another runner held the migration's lock for too long."""


def pg_lock_key(name: str) -> int:
    return (_PG_NAMESPACE << 32) | zlib.crc32(name.encode())


def mysql_lock_name(name: str) -> str:
    text = f"migrations_policy.{name}"
    return text if len(text) <= 64 else "migrations_policy." + hashlib.sha1(name.encode()).hexdigest()[:40]


def batch_connection(engine: Engine) -> Connection:
    """A connection for batches.

    * SQLite: in driver autocommit, so that we can ``BEGIN IMMEDIATE`` ourselves.
    * MariaDB / MySQL: READ COMMITTED where the binary log allows it.  Under InnoDB's
      default REPEATABLE READ, a batch's ``UPDATE ... WHERE key > a AND key <= b``
      takes next-key (gap) locks over its range; the batch that reaches the end of
      the table locks the gap up to the supremum, and every INSERT of the
      application (new keys go at the end) waits for that batch to commit.  READ
      COMMITTED takes no gap locks for these scans and releases the locks of rows
      it did not change, so writers only ever wait for the rows a batch migrates.
      Row locks and the batch's own reads are unaffected.  With statement-based
      binary logging InnoDB refuses READ COMMITTED writes, so the default is kept.
    """
    conn = engine.connect()
    if engine.dialect.name == "sqlite":
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
    elif engine.dialect.name == "mysql":
        logged = conn.execute(sa.select(sa.literal_column("@@log_bin"),
                                        sa.literal_column("@@binlog_format"))).one()
        conn.rollback()
        if not (logged[0] and str(logged[1]).upper() == "STATEMENT"):
            conn = conn.execution_options(isolation_level="READ COMMITTED")
    return conn


def _pg_lock(name: str) -> sa.ColumnElement:
    return sa.func.pg_advisory_xact_lock(sa.cast(pg_lock_key(name), sa.BigInteger))


@functools.lru_cache(maxsize=64)
def _pg_locked_read(read: sa.Select, name: str) -> sa.Select:
    """*read* taking the migration's advisory lock, ``FOR UPDATE`` (one statement object per read)."""
    return read.add_columns(_pg_lock(name).label("locked")).with_for_update()


def _locked_read(conn: Connection, read: sa.Select | None) -> Any:
    """Under the migration's lock: the first column of *read*'s first row (None without *read*)."""
    return None if read is None else conn.execute(read).scalar()


@contextmanager
def batch_transaction(conn: Connection, name: str, read: sa.Select | None = None) -> Iterator[Any]:
    """One batch: lock the migration, run the body, commit (roll back on any error).

    Yields the first column of *read* (a one-row SELECT) as committed once the lock is held
    (None without *read*).  On PostgreSQL the lock and the read are one statement: its
    snapshot predates the lock, but ``FOR UPDATE`` returns the newest committed version of
    the row (READ COMMITTED re-fetches a row updated since the snapshot), so the value is
    the one the previous lock holder committed.
    """
    dialect = conn.dialect.name
    if dialect == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield _locked_read(conn, read)
        except BaseException:
            # an interrupt inside a statement already rolled back (``core.engines``); a connection
            # something else invalidated rolls back as it closes
            if not conn.invalidated and conn.connection.dbapi_connection.in_transaction:
                conn.exec_driver_sql("ROLLBACK")
            raise
        conn.exec_driver_sql("COMMIT")
        return
    if dialect == "mysql":
        lock = mysql_lock_name(name)
        got = conn.execute(sa.select(sa.func.get_lock(lock, MYSQL_LOCK_TIMEOUT))).scalar()
        if got != 1:
            conn.rollback()
            raise LockTimeout(f"another runner held the lock {lock!r} for {MYSQL_LOCK_TIMEOUT} s")
        conn.commit()  # end the implicit transaction of the SELECT; the lock is session-scoped
        try:
            with conn.begin():
                yield _locked_read(conn, read)
        finally:
            # Not on a connection an interrupted or failed statement invalidated: the caller
            # discards it, and the server releases the lock with the session.
            if not conn.invalidated:
                conn.execute(sa.select(sa.func.release_lock(lock)))
                conn.commit()
        return
    with conn.begin():
        if dialect != "postgresql":
            yield _locked_read(conn, read)
            return
        if read is not None:
            row = conn.execute(_pg_locked_read(read, name)).first()
            if row is not None:
                yield row[0]
                return
        conn.execute(sa.select(_pg_lock(name)))  # no read, or no row: the lock alone
        yield None
