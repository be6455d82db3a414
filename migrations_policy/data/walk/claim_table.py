"""Claims: several runners on one data migration, each on a key range of its own.

Without claims, the runners of one migration take turns: a batch holds the migration's
lock (``locks.batch_transaction``) from its first read to its commit.  With claims, the
lock is held only to choose a key range and record it here, a short transaction; the
runner then migrates the range in batches, each a transaction of its own, while other
runners claim and migrate the ranges after it:

* a claim is one row ``(migration, low_key, high_key, holder)``: the keys
  ``low_key < key <= high_key`` (no lower bound when ``low_key`` is NULL).  It is made
  under the migration's lock and never overlaps another claim (the claimer stops short
  of, or skips past, any it would overlap).  Each batch's own transaction moves its start
  past the batch's keys (``advance``) and deletes it with the last one: a claim holds
  exactly the keys its runner has not migrated yet;
* a runner alone claims several batches at a time (one short transaction per several
  batches), with others about one batch at a time (``claiming.CLAIM_BATCHES``);
* ``holder`` is a token on which the runner's session holds a lock for as long as it
  lives (PostgreSQL ``pg_advisory_lock``, MariaDB/MySQL ``GET_LOCK``).  A claim whose
  holder's lock is free belongs to a session that died, so its batch in progress rolled
  back: the next runner to claim takes it over and migrates what it holds;
* integer keys only: claim bounds are compared by the database and by Python, which
  order strings differently (collations).  Other keys, and SQLite (one writer at a
  time), keep taking turns.

No row is ever lost through a claim: what remains is always the pending predicate,
evaluated live.  Claims keep runners out of each other's rows: a function-form migration
that reads its batch and then writes would otherwise migrate a row twice.
"""

from __future__ import annotations

import secrets
from typing import Any, Iterable, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from migrations_policy.core.urls import mask_text
from migrations_policy.core.framework_tables import CLAIMS_TABLE, claims_table
from migrations_policy.core.project import _one_line
from migrations_policy.data.ledger import utcnow

#: High 32 bits of a runner token (PostgreSQL advisory lock key; migration locks use 0x6D70).
_RUNNER_NAMESPACE = 0x6D71
#: A claim's bounds are BIGINT; walks whose keys come near the limits take turns instead.
KEY_LIMIT = 2**62
DIALECTS = ("postgresql", "mysql")


class TokenInUse(RuntimeError):
    """Another session holds the lock of this runner token."""


class Claim(NamedTuple):
    low: int | None
    high: int
    holder: int
    free: bool  # its holder's session is gone: the batch rolled back


def unavailable(engine: Engine) -> str | None:
    """Why runners of one migration must take turns on *engine* (None: claims work).

    Creates the claims table when it is missing (a framework table, like the ledger's
    siblings); another runner creating it at the same moment is not an error."""
    if engine.dialect.name not in DIALECTS:
        return f"{engine.dialect.name}: one writer at a time"
    with engine.connect() as conn:
        try:
            if not _exists(conn):
                try:
                    with conn.begin():
                        claims_table.create(conn, checkfirst=True)
                except sa.exc.DBAPIError:
                    conn.rollback()
                    if not _exists(conn):
                        raise
        except sa.exc.DBAPIError as exc:
            return f"cannot create {CLAIMS_TABLE}: {mask_text(_one_line(exc))}"
        for attempt in range(3):  # a deadlock or a lock wait with another runner's probe: again
            try:
                _probe(conn)
                break
            except sa.exc.DBAPIError as exc:
                if attempt == 2 or not _transient(exc):
                    return f"cannot use {CLAIMS_TABLE}: {mask_text(_one_line(exc))}"
            finally:
                conn.rollback()
    return None


def _transient(exc: sa.exc.DBAPIError) -> bool:
    """A deadlock or lock wait timeout (MariaDB 1213 / 1205, PostgreSQL 40P01 / 55P03)."""
    code = getattr(exc.orig, "sqlstate", None) or (exc.orig.args[0] if getattr(exc.orig, "args", None) else None)
    return code in (1213, 1205, "40P01", "55P03", "40001")


def readable(engine: Engine) -> bool | None:
    """Whether a runner that cannot claim can still read other runners' claims, to keep out of
    them (None: there is no claims table, so nobody claims)."""
    if engine.dialect.name not in DIALECTS:
        return None
    with engine.connect() as conn:
        try:
            if not _exists(conn):
                return None
        except sa.exc.DBAPIError:
            # MariaDB hides a table its user has no privilege on ("SELECT command denied"): it
            # cannot tell whether the table exists.  Run every runner as one user (docs).
            conn.rollback()
            return None
        try:
            others(conn, "", 0)
            return True
        except sa.exc.DBAPIError:
            return False
        finally:
            conn.rollback()


def _exists(conn: Connection) -> bool:
    found = sa.inspect(conn).has_table(CLAIMS_TABLE)
    conn.rollback()
    return found


def _probe(conn: Connection) -> None:
    """Every statement a runner sends to the claims table, on a row no migration can have
    (an empty name), rolled back: a user who may not write the table is found before any work."""
    conn.begin()
    token = new_token()
    key = -token  # a row of this probe's own: concurrent probes never wait for each other
    record(conn, "", None, key, token)
    take_over(conn, "", Claim(None, key, token, True), token)
    others(conn, "", token)
    advance(conn, "", key, token, key - 1)
    advance(conn, "", key, token, key)


def usable_key(*keys: Any) -> bool:
    return all(isinstance(k, int) and not isinstance(k, bool) and -KEY_LIMIT < k < KEY_LIMIT for k in keys)


def new_token() -> int:
    return (_RUNNER_NAMESPACE << 32) | secrets.randbits(32)


def _mysql_lock(token: Any) -> sa.ColumnElement:
    """The GET_LOCK name of a token (computed by the server from the token, on both sides)."""
    return sa.func.concat(sa.literal("migrations_policy.runner."), token)


def hold(conn: Connection, token: int) -> None:
    """Take the session lock that says *token*'s runner is alive (on the batch connection)."""
    if conn.dialect.name == "postgresql":
        got = conn.execute(sa.select(sa.func.pg_try_advisory_lock(sa.cast(token, sa.BigInteger)))).scalar()
    else:
        got = conn.execute(sa.select(sa.func.get_lock(_mysql_lock(sa.cast(token, sa.BigInteger)), 0))).scalar()
    conn.commit()
    if got not in (True, 1):
        raise TokenInUse(f"runner token {token} is already in use by another session")


def hold_new(conn: Connection, tries: int = 3) -> int:
    """A new token, held by *conn*'s session (another one while a token drawn is in use)."""
    while True:
        token = new_token()
        try:
            hold(conn, token)
            return token
        except TokenInUse:
            tries -= 1
            if tries == 0:
                raise


def let_go(conn: Connection, token: int) -> None:
    """The run is over: end *token*'s claims (the rest of a range a ``--max-count`` run did not
    reach) and release its session lock (the connection goes back to the pool)."""
    conn.execute(sa.delete(claims_table).where(claims_table.c.holder == token))
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_unlock(sa.cast(token, sa.BigInteger))))
    else:
        conn.execute(sa.select(sa.func.release_lock(_mysql_lock(sa.cast(token, sa.BigInteger)))))
    conn.commit()


def others(conn: Connection, name: str, token: int) -> list[Claim]:
    """Under the migration's lock: the claims of other sessions on *name*, in key order,
    each saying whether its holder is gone (PostgreSQL tries the holder's lock for the rest
    of this transaction; MariaDB/MySQL asks ``IS_FREE_LOCK``)."""
    c = claims_table.c
    rows = conn.execute(sa.select(c.low_key, c.high_key, c.holder, _free(conn, c.holder).label("free"))
                        .where(c.migration == name, c.holder != token).order_by(c.high_key)).all()
    return [Claim(row.low_key, row.high_key, row.holder, bool(row.free)) for row in rows]


def _free(conn: Connection, holder: Any) -> sa.ColumnElement:
    """True where *holder*'s session is gone: PostgreSQL takes the holder's lock for the rest of
    this transaction (re-entrant: a holder seen twice is free twice); MariaDB/MySQL asks
    ``IS_FREE_LOCK``."""
    if conn.dialect.name == "postgresql":
        return sa.func.pg_try_advisory_xact_lock(holder)
    return sa.func.is_free_lock(_mysql_lock(holder)) == 1


def runners_at_work(conn: Connection) -> dict[str, int]:
    """{migration: how many live runner sessions hold claims on it} (``dbsync status``); empty
    where there are no claims (SQLite, or no run has created the table)."""
    if conn.dialect.name not in DIALECTS or not sa.inspect(conn).has_table(CLAIMS_TABLE):
        return {}
    c = claims_table.c
    holders = conn.execute(sa.select(c.migration, c.holder, _free(conn, c.holder).label("free")).distinct()).all()
    found: dict[str, int] = {}
    for migration, _holder, free in holders:
        if not free:
            found[migration] = found.get(migration, 0) + 1
    return found


def first_overlap(claims: Iterable[Claim], low: int | None, high: int) -> Claim | None:
    """The claim with the smallest keys among those sharing a key with ``low < key <= high``."""
    hits = [c for c in claims if (c.low is None or c.low < high) and (low is None or c.high > low)]
    return min(hits, key=lambda c: (c.low is not None, c.low or 0), default=None)


def record(conn: Connection, name: str, low: int | None, high: int, token: int) -> None:
    """Under the migration's lock: claim ``low < key <= high``.  On PostgreSQL the claim's
    transaction commits without waiting for its WAL to reach disk: the batch's own commit
    flushes it (WAL is written in order), and a crash that loses the claim loses no row: its
    batch had not committed, and what remains is the pending predicate."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.set_config("synchronous_commit", "off", True)))
    conn.execute(sa.insert(claims_table).values(migration=name, low_key=low, high_key=high, holder=token,
                                                claimed_at=utcnow()))


def take_over(conn: Connection, name: str, claim: Claim, token: int) -> bool:
    """Make *claim*, held by *claim.holder*, ours (False: another runner has it).

    The row is locked ``SKIP LOCKED`` first, never waited for: a transaction holding it is
    migrating it right now (a walk moving its claim to another worker thread's session), and
    waiting for it under the migration's lock, which on PostgreSQL also holds the ledger row
    that transaction updates last, would deadlock."""
    c = claims_table.c
    mine = (c.migration == name, c.high_key == claim.high, c.holder == claim.holder)
    free = conn.execute(sa.select(c.high_key).where(*mine).with_for_update(skip_locked=True)).first()
    if free is None:
        return False
    conn.execute(sa.update(claims_table).where(*mine).values(holder=token, claimed_at=utcnow()))
    return True


def advance(conn: Connection, name: str, high: int, token: int, done_to: int) -> None:
    """Inside a batch's transaction: the claim ``(.., high]`` is migrated up to *done_to*: its
    start moves there, or it ends (deleted) once *done_to* reaches *high* (on the batch's commit)."""
    conn.execute(advance_statement(name, high, token, done_to))


def advance_statement(name: str, high: int, token: int, done_to: int) -> sa.Update | sa.Delete:
    """``advance``'s statement, for a caller that sends it with others (``ledger.record_batch``)."""
    c = claims_table.c
    mine = (c.migration == name, c.high_key == high, c.holder == token)
    if done_to >= high:
        return sa.delete(claims_table).where(*mine)
    return sa.update(claims_table).where(*mine).values(low_key=done_to)