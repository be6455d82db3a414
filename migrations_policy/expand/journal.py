"""The statement journal: which statements of an interrupted revision are already applied.

A revision that is not one transaction can stop half way: every DDL statement
commits on its own on MariaDB/MySQL, and on PostgreSQL an
``autocommit_block()`` (``CREATE INDEX CONCURRENTLY``) commits what came before
it.  After a SIGKILL, a lost connection or a lock give-up, the schema then holds
part of the revision while the version table does not name it, and simply
running the revision again fails (``Duplicate column name``).

So on PostgreSQL and MariaDB/MySQL every statement alembic executes for an
upgrade or a downgrade step is recorded in ``migrations_policy_statements``: the
revision, the statement's ordinal in the revision (1, 2, ... for ``upgrade()``;
-1, -2, ... for ``downgrade()``, so one table serves both directions), the SHA-256
of its SQL text and a short description (``add column nodes.meta``).

* PostgreSQL, inside the revision's transaction: the row is written after the
  statement in the same transaction, so both commit or roll back together.
* Outside a transaction (every statement on MariaDB/MySQL, a PostgreSQL
  ``autocommit_block``): a ``running`` row is committed before the statement and
  turned into ``done`` (committed) after it; a statement that fails with an
  error removes its row again, unless it left something behind: a PostgreSQL
  ``CREATE`` / ``DROP INDEX CONCURRENTLY`` that gave up leaves its index INVALID,
  and its row stays ``running`` (the revision is reported partly applied or
  reverted, and the rerun runs the statement again).  A ``running`` row left behind means the process
  died inside that statement: it may or may not have been applied.

When the version table moves for a revision (it completes, is downgraded or
stamped), its rows are deleted in the transaction that moves the version.  A rerun
of the step (``dbsync upgrade`` or ``dbsync rollback``, or plain ``alembic upgrade``
/ ``alembic downgrade`` through env.py) pairs its statements with the journal's by their
SQL, in order (``journal_match``: a re-runnable script may issue fewer), skips those recorded
as done and notes the applied ones it did not issue; a statement edited since (other SQL
for the same object) is refused (one line), never silently skipped.  The statement that was
``running`` counts as done when the database's state shows it applied (``journal_state``:
what it creates is there, what it drops is gone, what it renames has its new name), and is
executed again otherwise; only where the catalog cannot tell does an "already exists" (or,
for a drop, "does not exist") answer count as done.  A failed rerun of it leaves its row
``running``.  ``dbsync status`` / ``check`` report each interrupted revision
("revision X partly applied: 3 of 5 statements", "revision X partly reverted: ...").
While a revision is partly reverted, upgrades and stamps are refused (the schema is
neither release's): finish the rollback first.

Only statements alembic's operations execute (``op.add_column``, ``op.execute`` ...)
are journaled; what a script runs itself on ``op.get_bind()`` is not.  Offline
(``--sql``) mode keeps no journal.  SQLite is not journaled: its revisions run in
one transaction (``sqlite_transactions.py`` makes them one, DDL included).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import sqlalchemy as sa
from alembic.runtime.migration import RevisionStep
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from migrations_policy.core.framework_tables import JOURNAL_TABLE, journal_table
from migrations_policy.expand.journal_match import Edited, Resume
from migrations_policy.expand.journal_state import applied
from migrations_policy.expand.lock_timeout import (LockRetryStats,
    error_code,
    in_real_transaction,
    left_invalid_index,
    retry_segments)
from migrations_policy.core.offline_run import record_operations
from migrations_policy.policy.sql import from_sql
from migrations_policy.core.sqltext import statement_text

log = logging.getLogger(__name__)

JOURNALED_DIALECTS = ("postgresql", "mysql", "mariadb")
RUNNING, DONE = "running", "done"
#: The sign of a statement's ordinal: ``upgrade()``'s statements count up from 1, ``downgrade()``'s down from -1.
UPGRADE, DOWNGRADE = 1, -1
_FUNCTION = {UPGRADE: "upgrade()", DOWNGRADE: "downgrade()"}

#: "already exists" / "does not exist" answers: a statement that was running when the last run
#: died and now gets one of these had been applied.  PostgreSQL SQLSTATEs, MariaDB/MySQL errnos.
#: Triggers (sync triggers) too: MariaDB 1359 "already exists" / 1360 "does not exist", and
#: PostgreSQL 42883 for a function that no longer exists.
_PG_APPLIED = {"42P07", "42701", "42710", "42P06", "42723", "42P01", "42703", "42704", "42883"}
_MYSQL_APPLIED = {1050, 1060, 1061, 1826, 1022, 1091, 1051, 1146, 1359, 1360}


class JournalMismatch(CommandError):
    """The script no longer matches what an interrupted run of it applied."""

    exit_code = 2


class PartlyReverted(CommandError):
    """An upgrade or stamp while a revision's downgrade stopped half way."""

    exit_code = 2


@dataclass
class _Entry:
    sql_hash: str
    description: str
    state: str


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def describe(text: str) -> str:
    """``add column nodes.meta`` for a statement's SQL; its first 120 characters if unknown."""
    try:
        operations = from_sql(text)
    except Exception:  # noqa: BLE001 - a description is best effort
        operations = []
    known = [o.describe() for o in operations if o.kind != "other"]
    label = "; ".join(known) if known else " ".join(text.split())[:120]
    return label[:255]


_ADDED = re.compile(r"(?:^|; )add column (?P<table>[^\s.;]+(?:\.[^\s.;]+)?)\.(?P<column>[^\s.;]+)(?=;|$)")


def added_by_description(description: str) -> set[tuple[str, str | None]]:
    """``(table, column)`` of the columns a journaled statement adds, from its description
    (``add column nodes.version``): what an interrupted run applied, without its script."""
    return {(match.group("table").split(".")[-1].lower(), match.group("column").lower())
            for match in _ADDED.finditer(description or "")}


_DROPPED = re.compile(r"(?:^|; )drop (?:column (?P<table>[^\s.;]+(?:\.[^\s.;]+)?)\.(?P<column>[^\s.;]+)"
                      r"|table (?P<whole>[^\s;]+))(?=;|$)")


def dropped_by_its_run(connection: Connection, revisions: Iterable[str]) -> set[tuple[str, str | None]]:
    """``(table, column)`` (column None: the table) that the ``upgrade()`` statements of an
    interrupted run of *revisions* dropped or were dropping (done, or running when the run stopped:
    on MariaDB a DDL commits before the journal can say so), from the journal's descriptions.  The
    caller asks only about what is missing from the database, so a running statement that did not
    get to apply changes nothing."""
    found: set[tuple[str, str | None]] = set()
    wanted = set(revisions)
    for revision, entries in read_entries(connection).items():
        if revision not in wanted:
            continue
        for ordinal, entry in entries.items():
            if ordinal > 0 and entry.state in (DONE, RUNNING):
                for match in _DROPPED.finditer(entry.description or ""):
                    if match.group("whole"):
                        found.add((match.group("whole").split(".")[-1].lower(), None))
                    else:
                        found.add((match.group("table").split(".")[-1].lower(), match.group("column").lower()))
    return found


def _applied_already(exc: BaseException) -> bool:
    code = error_code(exc)
    return code in _PG_APPLIED or code in _MYSQL_APPLIED


def read_entries(connection: Connection, revision: str | None = None) -> dict[str, dict[int, _Entry]]:
    """{revision: {ordinal: entry}} of the journal (empty when the table does not exist)."""
    if not sa.inspect(connection).has_table(JOURNAL_TABLE):
        return {}
    query = sa.select(journal_table).order_by(journal_table.c.revision, journal_table.c.ordinal)
    if revision is not None:
        query = query.where(journal_table.c.revision == revision)
    found: dict[str, dict[int, _Entry]] = {}
    for row in connection.execute(query):
        found.setdefault(row.revision, {})[row.ordinal] = _Entry(row.sql_hash, row.description, row.state)
    return found


def _in_direction(entries: dict[int, _Entry], direction: int) -> dict[int, _Entry]:
    """The entries of one direction, keyed by the statement's position (1, 2, ...)."""
    return {ordinal * direction: entry for ordinal, entry in entries.items() if ordinal * direction > 0}


def stopped_half_way(connection: Connection, direction: int) -> list[str]:
    """Revisions whose ``upgrade()`` (UPGRADE: the version table does not name them yet) or
    ``downgrade()`` (DOWNGRADE: it still names them) stopped half way."""
    return [revision for revision, entries in read_entries(connection).items()
            if _in_direction(entries, direction)]


class PartlyAppliedRefusal(CommandError):
    """A downgrade while a revision's upgrade stopped half way."""

    exit_code = 4


def refuse_while_partly_reverted(connection: Connection, finish_with: str) -> None:
    """Fail closed: nothing is applied on a schema that is neither release's."""
    reverted = stopped_half_way(connection, DOWNGRADE)
    if reverted:
        raise PartlyReverted(
            f"revision {', '.join(reverted)} is partly reverted (its downgrade() stopped half way): "
            f"finish it first with {finish_with}, then upgrade")


def refuse_while_partly_applied(connection: Connection, finish_with: str) -> None:
    """Fail closed: no downgrade while an upgrade stopped half way; its objects are in the schema,
    but no ``downgrade()`` would remove them (``dbsync rollback`` and plain ``alembic downgrade``)."""
    applied = stopped_half_way(connection, UPGRADE)
    if applied:
        raise PartlyAppliedRefusal(
            f"rollback refused: revision {', '.join(applied)} is partly applied (its upgrade() stopped half way; "
            f"`dbsync status` says how far): finish it first with {finish_with} (it resumes), then roll back")


# -- while alembic runs a revision -----------------------------------------------------
class _Run:
    """One upgrade or downgrade step: statement ordinals, the journal's entries, and the writes."""

    def __init__(self, connection: Connection, revision: str, direction: int = UPGRADE):
        self.connection = connection
        self.revision = revision
        self.direction = direction
        self.entries = _in_direction(read_entries(connection, revision).get(revision, {}), direction)
        self.ordinal = 0  # statements issued so far
        self.resume = Resume(self.entries)
        if self.entries:
            done = sum(e.state == DONE for e in self.entries.values())
            log.warning("revision %s: its %s was interrupted after %d statement(s): resuming after them",
                        revision, _FUNCTION[direction], done)

    def _key(self, ordinal: int):
        return sa.and_(journal_table.c.revision == self.revision,
                       journal_table.c.ordinal == ordinal * self.direction)

    def _commit(self) -> None:
        """Make the last journal write durable now (outside the revision's transaction)."""
        if self.connection.dialect.name in ("mysql", "mariadb"):
            self.connection.exec_driver_sql("COMMIT")
        # PostgreSQL outside a transaction: the connection is in autocommit already.

    def _record(self, ordinal: int, sql_hash: str, text: str, state: str, exists: bool) -> None:
        if exists:
            self.connection.execute(sa.update(journal_table).where(self._key(ordinal)).values(state=state))
        else:
            self.connection.execute(sa.insert(journal_table).values(
                revision=self.revision, ordinal=ordinal * self.direction, sql_hash=sql_hash, description=describe(text),
                state=state))

    def statement(self, construct: Any, execute: Callable[[], Any]) -> Any:
        self.ordinal += 1
        text = statement_text(construct, self.connection)
        sql_hash = digest(text)
        try:
            ordinal, entry = self.resume.take(sql_hash, describe(text))
        except Edited as edited:
            raise JournalMismatch(
                f"revision {self.revision}: {_FUNCTION[self.direction]} statement {self.ordinal} ({describe(text)}) "
                "is not the statement its "
                f"interrupted run applied ({edited.entry.description}): the script changed since; restore the script "
                "that run used, or repair by hand (operator guide: When an expand fails)") from None
        if entry is not None and entry.state == DONE:
            return None  # applied by the interrupted run
        if entry is not None and not self._left_something(construct) and applied(self.connection, text):
            return self._applied_by_interrupted_run(ordinal, sql_hash, text)
        if in_real_transaction(self.connection):  # PostgreSQL: the row commits with the statement
            result = execute()
            self._record(ordinal, sql_hash, text, DONE, exists=entry is not None)
            return result
        if entry is None:
            self._record(ordinal, sql_hash, text, RUNNING, exists=False)
            self._commit()
        try:
            result = execute()
        except sa.exc.DBAPIError as exc:
            if entry is not None and self._applied_after(text, exc):
                return self._applied_by_interrupted_run(ordinal, sql_hash, text)
            if entry is not None:  # still "may or may not be applied": the row stays running
                raise
            if self._left_something(construct):  # neither applied nor not: the rerun runs it again
                log.warning("revision %s %s statement %d (%s) failed half way and left an INVALID index: "
                            "it stays recorded as running", self.revision, _FUNCTION[self.direction], ordinal,
                            describe(text))
                raise
            else:
                self._forget(ordinal)
                raise
        except CommandError:  # refused before it reached the database (drop_guard.watching)
            self._forget(ordinal)
            raise
        self._record(ordinal, sql_hash, text, DONE, exists=True)
        self._commit()
        return result

    def _applied_after(self, text: str, exc: BaseException) -> bool:
        """The rerun of a statement left running failed: had the interrupted run applied it?  The
        database's state decides (the server may have finished it meanwhile); the error code only
        when the state cannot be told (``journal_state``)."""
        try:
            state = applied(self.connection, text)
        except sa.exc.DBAPIError:
            state = None
        return _applied_already(exc) if state is None else state

    def _applied_by_interrupted_run(self, ordinal: int, sql_hash: str, text: str) -> None:
        log.warning("revision %s %s statement %d (%s) had been applied by the interrupted run",
                    self.revision, _FUNCTION[self.direction], ordinal, describe(text))
        self._record(ordinal, sql_hash, text, DONE, exists=True)
        self._commit()
        return None

    def _left_something(self, construct: Any) -> bool:
        """A failed ``CREATE``/``DROP INDEX CONCURRENTLY`` that left its index INVALID (PostgreSQL)."""
        try:
            return left_invalid_index(self.connection, construct)
        except sa.exc.DBAPIError:  # connection lost: _forget cannot run either, the row stays running
            return True

    def _forget(self, ordinal: int) -> None:
        """The statement failed with an error: it is not applied, drop its ``running`` row."""
        try:
            self.connection.execute(sa.delete(journal_table).where(self._key(ordinal)))
            self._commit()
        except sa.exc.DBAPIError:  # connection lost: the row stays "running" (may or may not be applied)
            pass

    def finish(self) -> None:
        """The revision's statements all ran (``forget_versioned`` then clears its rows, with the
        version-table update): one note per statement the interrupted run applied and this run
        did not issue (``journal_match``)."""
        for ordinal, entry in self.resume.left_over():
            state = "applied" if entry.state == DONE else "was running (may or may not be applied)"
            log.warning("revision %s: %s statement %d of the interrupted run (%s) %s and was not issued by this "
                        "run (a conditional statement, or the script changed since): its effect stays",
                        self.revision, _FUNCTION[self.direction], ordinal, entry.description, state)


def forget_versioned(ctx: Any, step: Any, heads: Any, run_args: Any) -> None:
    """``on_version_apply``: the version table now names (or no longer names) these revisions, by an
    upgrade, a downgrade or a stamp: their journal entries describe nothing any more.  Deleted in the
    transaction that moves the version, so a stamped, then downgraded revision never "resumes"."""
    connection = ctx.connection
    if ctx.as_sql or connection is None or connection.dialect.name not in JOURNALED_DIALECTS:
        return
    revisions = {r for r in (*step.up_revision_ids, *step.down_revision_ids) if r}
    if revisions and sa.inspect(connection).has_table(JOURNAL_TABLE):
        connection.execute(sa.delete(journal_table).where(journal_table.c.revision.in_(revisions)))


class _Journal:
    def __init__(self, connection: Connection):
        self.connection = connection
        self.run: _Run | None = None

    def revision(self, revision: str, migration_fn: Callable[..., Any], direction: int) -> Callable[..., Any]:
        @functools.wraps(migration_fn)  # alembic names the step after the function ("upgrade")
        def migrate(**kw: Any) -> Any:
            self.run = _Run(self.connection, revision, direction)
            try:
                result = migration_fn(**kw)
                self.run.finish()
                return result
            finally:
                self.run = None

        return migrate

    def statements(self, execute: Callable[..., Any]) -> Callable[..., Any]:
        def exec_(construct: Any, *args: Any, **kwargs: Any) -> Any:
            if self.run is None:  # alembic's own version-table statements
                return execute(construct, *args, **kwargs)
            return self.run.statement(construct, lambda: execute(construct, *args, **kwargs))

        return exec_


def install(migration_context: Any, steps: list, retries: LockRetryStats | None = None) -> list:
    """Journal the statements of every upgrade and downgrade step in *steps* (a live
    PostgreSQL/MariaDB run).

    Wraps the context's ``impl._exec`` (outside the lock-timeout retries) and each
    step's ``migration_fn``; with *retries* (``lock_timeout.install_statement_retries``)
    a lost lock wait inside a PostgreSQL transaction reruns the step, resuming from
    the journal (``lock_timeout.retry_segments``).  Returns *steps*.
    """
    connection = migration_context.connection
    if migration_context.as_sql or connection is None or connection.dialect.name not in JOURNALED_DIALECTS:
        return steps
    journal_table.create(connection, checkfirst=True)
    if connection.in_transaction():
        connection.commit()
    journal = _Journal(connection)
    migration_context.impl._exec = journal.statements(migration_context.impl._exec)
    for step in steps:
        if isinstance(step, RevisionStep):
            step.migration_fn = journal.revision(step.revision.revision, step.migration_fn,
                                                 UPGRADE if step.is_upgrade else DOWNGRADE)
            if retries is not None:
                step.migration_fn = retry_segments(step.migration_fn, retries)
    return steps


# -- what status / check report ------------------------------------------------------------
@dataclass
class PartlyApplied:
    """An upgrade or downgrade step that stopped half way, as its journal records it."""

    revision: str
    done: int
    #: Statements the step runs now (its script rendered offline); None if it cannot be rendered.
    total: int | None
    #: (ordinal, description) of a statement that was running when the process died.
    in_flight: tuple[int, str] | None
    #: False when a recorded statement differs from the script's: the rerun will refuse.
    script_matches: bool = True
    direction: int = UPGRADE

    def describe(self) -> str:
        of = f" of {self.total}" if self.total is not None else ""
        state = "partly applied" if self.direction == UPGRADE else "partly reverted"
        text = f"revision {self.revision} {state}: {self.done}{of} statements"
        if self.in_flight is not None:
            text += (f"; statement {self.in_flight[0]} ({self.in_flight[1]}) was running when the run stopped "
                     "and may or may not be applied (the rerun checks)")
        if not self.script_matches:
            text += "; its script changed since, the rerun will refuse (operator guide: When an expand fails)"
        elif self.direction == UPGRADE:
            text += "; dbsync upgrade resumes after the applied statements"
        else:
            text += "; dbsync rollback resumes after the reverted statements (upgrades are refused until then)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "direction": _FUNCTION[self.direction][:-2],
                "done": self.done, "total": self.total,
                "in_flight": None if self.in_flight is None else
                {"statement": self.in_flight[0], "description": self.in_flight[1]},
                "script_matches": self.script_matches}


def planned_statements(script: ScriptDirectory, revision: str, connection: Connection,
                       direction: int = UPGRADE) -> list[str] | None:
    """The SQL text of every statement *revision*'s upgrade() (or downgrade()) runs on this dialect,
    rendered offline (no database access); None when the script cannot run offline."""
    rev = script.get_revision(revision)
    if rev is None:
        return None
    texts: list[str] = []
    function = rev.module.upgrade if direction == UPGRADE else rev.module.downgrade
    _, problem = record_operations(function, connection.dialect,
                                   on_statement=lambda construct: texts.append(statement_text(construct, connection)))
    return None if problem else texts


def partly_applied(connection: Connection, script: ScriptDirectory) -> list[PartlyApplied]:
    """Every revision the journal says stopped half way, in either direction."""
    found = []
    for revision, all_entries in read_entries(connection).items():
        for direction in (UPGRADE, DOWNGRADE):
            entries = _in_direction(all_entries, direction)
            if not entries:
                continue
            planned = planned_statements(script, revision, connection, direction)
            running = [(o, e.description) for o, e in sorted(entries.items()) if e.state == RUNNING]
            matches = planned is None or _resumes(entries, planned)
            found.append(PartlyApplied(revision=revision, done=sum(e.state == DONE for e in entries.values()),
                                       total=None if planned is None else len(planned),
                                       in_flight=running[0] if running else None, script_matches=matches,
                                       direction=direction))
    return found


def _resumes(entries: dict[int, _Entry], planned: list[str]) -> bool:
    """Whether a rerun issuing *planned* resumes (no statement of it is refused as edited)."""
    resume = Resume(entries)
    try:
        for text in planned:
            resume.take(digest(text), describe(text))
    except Edited:
        return False
    return True
