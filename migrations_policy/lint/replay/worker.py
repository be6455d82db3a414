"""The replay worker: upgrades a history on a scratch database, one script at a time, each in a forked child.

Started by ``replay`` as ``python -m migrations_policy.lint.replay.worker`` with the job of
``parallel``'s workers plus ``url`` (the scratch database), ``graph`` (task index ->
``(revision, down_revisions, parent task indexes)``) and ``blocked`` (task index -> the
``(revision, path)`` of a failed ancestor, when a worker is restarted).  Tasks come in
alembic's upgrade order.  As ``lint.sandbox.worker`` does, it imports what the analysis needs once,
then forks a child per script (same clean state for every script, killed after the time
limit); the child connects, runs ``upgrade()`` in one transaction per script (as alembic's
``transaction_per_migration``) through ``recorder.run_online``, records every op and
statement, moves ``alembic_version`` on and commits -- or rolls back on error -- and sends
the script's findings judged from what really ran:

* an error of the database (``DBAPIError``, a table that reflection cannot find) is the
  script's ``MP004`` finding, at the script's line, with the database's first line of text;
* any other exception of ``upgrade()``, a timeout, a script ending the child: ``MP000``;
* a script whose ancestor did not commit is not run: ``MP000`` naming that ancestor.

Frames to the parent are ``lint.sandbox.worker``'s; a ``done`` frame ends with whether the script committed
and, when not, the ``(revision, path)`` of the failure that blocks its descendants.
"""

from __future__ import annotations

import marshal
import os
import signal
import sys

from migrations_policy.lint.sandbox import worker
from migrations_policy.lint.sandbox.worker import UNLOADABLE

REPLAY_ERROR = "MP004"


def _version_table(length: int):
    import sqlalchemy as sa

    return sa.Table("alembic_version", sa.MetaData(), sa.Column("version_num", sa.String(length), nullable=False),
                    sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


def _stamp(conn, table, revision: str, down_revisions: tuple[str, ...]) -> None:
    """``alembic_version`` after upgrading to *revision*: its down revisions are no longer heads, it is."""
    if down_revisions:
        conn.execute(table.delete().where(table.c.version_num.in_(down_revisions)))
    conn.execute(table.insert().values(version_num=revision))


def _recorder(engine, revision: str, down_revisions: tuple[str, ...], table, outcome: dict):
    """``engine.analyse``'s *record*: run ``upgrade()`` on *url* in its own transaction (see the module docstring)."""

    def record(module, source, upgrade, path, options, hits, dependent):
        from alembic.migration import MigrationContext

        from migrations_policy.lint.engine import Hit
        from migrations_policy.lint.offline.loader import LoadError, line_in, one_line
        from migrations_policy.lint.offline.recorder import run_online
        from migrations_policy.lint.scratch.url import describe_refusal, refused

        filename, dialect = str(path), options.dialects[0]
        engine.dispose(close=False)  # the worker's connections, if any, are not this process's to use
        ops, error = [], None
        try:
            with engine.connect() as conn:
                ctx = MigrationContext.configure(connection=conn, opts={"transaction_per_migration": True})
                try:
                    with ctx.begin_transaction(_per_migration=True):
                        rec, error = run_online(upgrade, ctx, filename)
                        ops = rec.ops
                        if error is not None:
                            raise error  # rolls this script back (MySQL/MariaDB keep the DDL that ran)
                        _stamp(ctx.connection, table, revision, down_revisions)
                    outcome["committed"] = True
                except BaseException as exc:  # noqa: BLE001 - judged below
                    error = error or exc
        except Exception as exc:  # noqa: BLE001 - connecting (or disconnecting) failed
            error = error or exc
            if not ops:
                raise LoadError(f"cannot use the scratch database: {describe_refusal(exc)}") from None
        if error is None:
            return {dialect: ops}
        from migrations_policy.lint.offline.missing import MissingError

        if isinstance(error, (MissingError, ImportError)):
            raise Unimportable(one_line(error))
        where = f"at down_revision {', '.join(down_revisions) or 'base'}"
        if refused(error):
            hits.append(Hit(line_in(error, filename) or 1, REPLAY_ERROR,
                            f"the database refused upgrade() {where}: {describe_refusal(error)}", dialect))
            return {dialect: ops}  # what ran before the error is judged too
        raise LoadError(f"upgrade() raised {one_line(error)} when replayed {where}", line_in(error, filename))

    return record


class Unimportable(Exception):
    """``upgrade()`` used what its module could not import (a package that is not installed): it cannot run on
    the database; its offline verdict is given instead, and the scripts after it get theirs (``_offline``)."""


#: The third item of a blocker whose script could not be imported (not refused by the database).
UNIMPORTABLE = "unimportable"


def _offline(why: str):
    """A child's ``run`` for a script that is not replayed for *why*: its offline verdict (``engine.analyse``,
    the source read where it cannot run) with a ``MP001`` warning saying why; never committed."""

    def run(path: str, phase: str, options) -> tuple:
        from pathlib import Path

        from migrations_policy.lint.engine import OFFLINE, Hit, analyse

        hits = [hit.to_list() for hit in analyse(Path(path), phase, options)]
        if not any(hit[1] == UNLOADABLE for hit in hits):
            hits.insert(0, Hit(1, OFFLINE, f"not replayed: {why}; linted offline instead",
                               options.dialects[0]).to_list())
        return hits, False

    return run


def _replay(engine, revision: str, down_revisions: tuple[str, ...], table):
    """The child's ``run``: the script's hits, and whether its transaction committed (and, when it could not
    be imported, the marker that its descendants get their offline verdicts)."""

    def run(path: str, phase: str, options) -> tuple:
        from pathlib import Path

        from migrations_policy.lint.engine import analyse

        outcome: dict = {}
        try:
            hits = analyse(Path(path), phase, options,
                           record=_recorder(engine, revision, down_revisions, table, outcome))
        except Unimportable as exc:
            hits, _ = _offline(f"upgrade() uses what could not be imported ({exc})")(path, phase, options)
            return hits, False, UNIMPORTABLE
        return [hit.to_list() for hit in hits], bool(outcome.get("committed"))

    return run


def _not_replayed(blocker) -> list:
    revision, path = blocker[:2]
    return [[1, UNLOADABLE, f"not replayed: its ancestor {revision} ({path}) failed on the database, so the "
             "database is not at this script's down_revision; fix that script first", "", "error"]]


def _prepare_database(url: str, table):
    """The engine every child uses, its dialect initialized by a first connection that creates
    ``alembic_version``; its pool is emptied before any fork (no child inherits a connection)."""
    from migrations_policy.lint.scratch.url import scratch_engine

    engine = scratch_engine(url)
    try:
        with engine.begin() as conn:
            table.create(conn, checkfirst=True)
    finally:
        engine.dispose()
    return engine


def serve(job: dict) -> None:
    options = worker.start({**job, "url": None})  # the scratch database is ours to run on, not a reflection source
    if options is None:
        return
    graph, blocked = job["graph"], dict(job["blocked"])
    table = _version_table(max([32, *(len(graph[index][0]) for index, _, _ in job["tasks"])]))
    engine = _prepare_database(job["url"], table)
    for index, path, phase in job["tasks"]:
        revision, down_revisions, parents = graph[index]
        blockers = [blocked[parent] for parent in parents if parent in blocked]
        blocker = next((b for b in blockers if len(b) < 3 or b[2] != UNIMPORTABLE), None)
        if blocker is not None:  # an ancestor the database refused: MP000 naming it
            blocked[index] = blocker
            worker._send(("start", index))
            worker._send(("done", index, _not_replayed(blocker), None, [], False, blocker))
            continue
        worker._send(("start", index))
        if blockers:  # after a script that could not be imported: the offline verdict, never MP000
            blocker = blockers[0]
            run = _offline(f"its ancestor {blocker[0]} ({blocker[1]}) could not be imported, so the database is "
                           "not at this script's down_revision")
        else:
            run = _replay(engine, revision, tuple(down_revisions), table)
        child = worker._start(index, path, phase, options, run)
        running = {child.pid: child}
        finished = []
        while running:
            finished.extend(worker._collect(running))
        (child, status), = finished
        hits, internal, modules, *committed = worker._verdict(child, status, options.timeout)
        unimportable = len(committed) > 1 and committed[1] == UNIMPORTABLE
        committed = bool(committed and committed[0] is True)
        if blockers:
            blocked[index] = blockers[0]
        elif unimportable:
            blocked[index] = (revision, path, UNIMPORTABLE)
        elif not committed:
            blocked[index] = (revision, path)
        worker._send(("done", index, hits, internal, modules, committed, blocked.get(index)))
    worker._send(("end",))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills us when interrupted
    job = marshal.loads(sys.stdin.buffer.read())
    serve(job)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
