"""Failed expands and rollbacks can always be recovered: random histories, random kills.

Each case draws (from a printed seed) a chain of expand revisions (``expand_history.py``),
installs release 1 plus a random prefix of them on an empty database (a completed release:
``dbsync rollback`` goes back to exactly there), and the app (release N) writes rows.  Then:

* ``rollback``: the rest is expanded (in one or two runs), and ``dbsync rollback`` is
  interrupted at a random statement, once or twice, then resumed to completion.  Modes:
  SIGKILL as the journal reaches a drawn statement (``racing``) or as a drawn statement's
  object shows in or leaves the catalog (``catalog``); SIGKILL while a statement waits for a
  lock an app transaction holds (``blocked``); a lock holder that makes a statement give up
  after its retries (``timeout``, exit 8); SIGKILL after a drawn delay (``delay``).  SQLite
  gets the three modes that need no lock.  Each stop but a delay's is a SIGKILL or a SIGINT (Ctrl-C:
  exit 130 and the one line ``dbsync: interrupted``, or the run's own end if it got there first);
* ``interleaved``: ``dbsync upgrade --expand`` is interrupted the same way; while it is partly
  applied, a rollback must be refused (exit 4) and change nothing; the expand is resumed, then
  the rollback is interrupted and resumed as above.

After every step: ``status`` tells the truth (the statements it calls done are applied in the
catalog, or reverted; the ones after the running one are not), ``check`` exits as documented,
an upgrade on a partly reverted schema is refused and changes nothing, no traceback, one error
line.  After the rollback: the schema (tables, columns, indexes, constraints, triggers,
functions) is that of a fresh database migrated straight to the target, the journal is empty,
the app's rows are all there; and a new expand reaches the schema of a fresh database at head.

``MP_ROLLBACK_KILL_SEED`` replays a seed, ``MP_ROLLBACK_KILL_CASES`` draws more cases per backend.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config

from migrations_policy import cli
from ..gate.expand_project import ExpandProject
from ..helpers import hold_lock
from . import expand_history as history

CASES = int(os.environ.get("MP_ROLLBACK_KILL_CASES", "2"))
UP, DOWN = 1, -1
ROLLBACK = ("rollback", "--force", "--reason", "rollback kill test")
EXPAND = ("upgrade", "--expand")


# -- databases and the app ----------------------------------------------------------------------
class Databases:
    """Fresh databases on one backend (SQLite: files), dropped at the end."""

    def __init__(self, backend: str, directory, server_for):
        self.directory, self.made = directory, []
        self.server = None if backend == "sqlite" else server_for(backend)
        directory.mkdir(parents=True, exist_ok=True)

    def new(self) -> sa.URL:
        if self.server is None:
            url = sa.URL.create("sqlite", database=str(self.directory / f"db{len(self.made)}.sqlite"))
        else:
            url = self.server.create_database()
        self.made.append(url)
        return url

    def drop_all(self) -> None:
        if self.server is not None:
            for url in self.made:
                self.server.drop_database(url)


@dataclass
class App:
    """Release N writing its own columns between the steps; what it wrote is kept in Python."""

    engine: sa.Engine
    rng: random.Random
    rows: dict[str, dict[int, tuple]] = field(default_factory=dict)

    COLUMNS = {"books": ("title",), "loans": ("book_id", "who"), **{t: ("v",) for t in history.BASE_TABLES}}

    def write(self) -> None:
        with self.engine.begin() as conn:
            for table, columns in self.COLUMNS.items():
                rows = self.rows.setdefault(table, {})
                for _ in range(self.rng.randint(1, 3)):
                    key = len(rows) + 1
                    rows[key] = self._values(table)
                    conn.execute(sa.table(table, sa.column("id"), *map(sa.column, columns)).insert()
                                 .values(id=key, **dict(zip(columns, rows[key]))))
                key = self.rng.choice(sorted(rows))
                rows[key] = self._values(table)
                conn.execute(sa.table(table, sa.column("id"), *map(sa.column, columns)).update()
                             .where(sa.column("id") == key).values(**dict(zip(columns, rows[key]))))

    def _values(self, table: str) -> tuple:
        word = "".join(self.rng.choices("abcdefghij", k=self.rng.randint(1, 30)))
        if table == "books":
            return (word,)
        if table == "loans":  # an existing book: a NOT VALID foreign key still checks new rows
            return (self.rng.choice(sorted(self.rows["books"])), word)
        return (self.rng.randint(0, 10**6),)

    def verify(self) -> None:
        with self.engine.connect() as conn:
            for table, columns in self.COLUMNS.items():
                got = {r[0]: tuple(r[1:]) for r in conn.execute(
                    sa.select(sa.column("id"), *map(sa.column, columns)).select_from(sa.table(table)))}
                assert got == self.rows[table], f"{table}: the app's rows changed"


# -- running dbsync ------------------------------------------------------------------------------
def dbsync(proj: ExpandProject, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.dbsync_main(["-c", str(proj.ini), *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    if code and args[-1] not in ("check", "status"):  # check's codes are answers, not errors
        assert len([line for line in err.splitlines() if line.startswith("dbsync: error:")]) == 1, err
    return code, out, err


def fresh_schema(proj: ExpandProject, dbs: Databases, revision: str) -> dict:
    """The schema of an empty database migrated straight to *revision* with the same scripts."""
    url = dbs.new()
    config = Config(str(proj.ini))
    config.set_main_option("sqlalchemy.url", url.render_as_string(hide_password=False).replace("%", "%%"))
    alembic_command.upgrade(config, revision)
    engine = sa.create_engine(url)
    try:
        return history.schema(engine)
    finally:
        engine.dispose()


def _read(proj: ExpandProject, read):
    for _ in range(200):
        try:
            return read()
        except (sa.exc.DBAPIError, sa.exc.NoSuchTableError):  # SQLite: the run holds the write lock while
            # it commits; reflecting while the run drops a table
            time.sleep(0.01)
    return read()


class Attack:
    """One case: the project, its revisions, and the checks after every step."""

    def __init__(self, proj: ExpandProject, revs: list[history.Revision], rng: random.Random, capsys):
        self.proj, self.revs, self.rng, self.capsys = proj, revs, rng, capsys
        self.chain = ["r1_release1"] + [r.revision for r in revs]
        self.dialect = proj.engine.dialect.name
        self.log: list[str] = []
        self.target = 0  # where the rollback goes: the revision installed on the empty database

    def position(self) -> int:
        (head,) = _read(self.proj, self.proj.heads)
        return self.chain.index(head)

    def _statements_done(self, direction: int, start: int) -> int:
        """Statements of this run done so far: those of revisions moved past, plus the journal's."""
        position = self.position()
        moved = self.revs[position:start] if direction == DOWN else self.revs[start:position]
        done = sum(1 for ordinal, state in _read(self.proj, self.proj.journal)
                   if state == "done" and ordinal * direction > 0)
        return sum(len(r.statements(direction)) for r in moved) + done

    def _lock_wait(self) -> bool:
        if self.dialect == "postgresql":
            query = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                     "AND wait_event_type = 'Lock'")
        else:
            query = ("SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() "
                     "AND state LIKE 'Waiting for%lock%'")
        with self.proj.engine.connect() as conn:
            return bool(conn.execute(sa.text(query)).scalar())

    def interrupt(self, args: tuple[str, ...], direction: int) -> str:
        """Run ``dbsync *args`` and interrupt it at a drawn point; returns how."""
        start = self.position()
        pending = self.revs[self.target:start][::-1] if direction == DOWN else self.revs[start:]
        statements = [obj for r in pending for obj in r.statements(direction)]
        modes = ["racing", "catalog", "delay"] + (["blocked", "timeout"] if self.dialect != "sqlite" else [])
        mode = self.rng.choice(modes)
        # a kill, or Ctrl-C once the run has begun (Ctrl-C while Python imports prints its own traceback)
        stop = signal.SIGINT if mode != "delay" and self.rng.random() < 0.5 else signal.SIGKILL
        holder, release = None, threading.Event()
        if mode in ("blocked", "timeout"):
            existing = set(sa.inspect(self.proj.engine).get_table_names())  # not the ones the run creates
            table = self.rng.choice(sorted(set().union(*map(history.tables_of, statements)) & existing))
            statement = f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE" if self.dialect == "postgresql" \
                else f"SELECT count(*) FROM {table}"  # noqa: S608 - the test's own table names
            holder = hold_lock(self.proj.engine, statement, release=release)
            mode = f"{mode}:{table}"
        proc = self.proj.popen(*args)
        deadline = time.monotonic() + 90
        try:
            began = False  # seen doing something: Ctrl-C reaches dbsync, not Python's start-up
            if mode == "racing":
                k = self.rng.randint(1, len(statements))
                mode = f"racing:{k}/{len(statements)}"
                while proc.poll() is None and self._statements_done(direction, start) < k \
                        and time.monotonic() < deadline:
                    time.sleep(0.003)
                    began = True
            elif mode == "catalog":  # as soon as a drawn statement's object shows in (or leaves) the catalog
                k, obj = self.rng.choice([(k, o) for k, o in enumerate(statements, 1) if o is not None])
                mode = f"catalog:{k}/{len(statements)}"
                while proc.poll() is None and time.monotonic() < deadline and \
                        history.present(_read(self.proj, lambda: history.schema(self.proj.engine)), obj) != \
                        (direction == UP):
                    time.sleep(0.003)
                    began = True
            elif mode == "delay":
                delay = self.rng.uniform(0.5, 4.0)
                mode = f"delay:{delay:.2f}"
                while proc.poll() is None and time.monotonic() < deadline and delay > 0:
                    time.sleep(0.01)
                    delay -= 0.01
            elif mode.startswith("blocked"):
                while proc.poll() is None and not self._lock_wait() and time.monotonic() < deadline:
                    time.sleep(0.01)
                began = True  # its statement waits for the lock
                time.sleep(self.rng.uniform(0, 0.3))
            else:  # timeout: the statement gives up after its retries, the run exits 2
                proc.wait(90)
            killed = proc.poll() is None
            if not began:  # the condition held before the run could have started (an earlier run's work)
                stop = signal.SIGKILL
            if killed:
                proc.send_signal(stop)
            _, stderr = proc.communicate(timeout=90)
        finally:
            release.set()
            if holder is not None:
                holder.join()
        assert "Traceback" not in stderr, stderr
        errors = [line for line in stderr.splitlines() if line.startswith("dbsync: error:")]
        interrupted = killed and stop == signal.SIGINT and proc.returncode == 130
        if interrupted:  # Ctrl-C: one line, exit 130, whatever it was doing (it may have ended first: 0)
            assert errors == [] and stderr.strip().splitlines()[-1] == "dbsync: interrupted", stderr
        elif killed and stop == signal.SIGINT and proc.returncode == -signal.SIGINT:
            # while the interpreter shut down (its work done, said by its progress lines): Python's default
            assert errors == [] and all(line.startswith(f"{args[0]}: ") for line in stderr.splitlines()), stderr
        elif proc.returncode and not (killed and stop == signal.SIGKILL):
            assert len(errors) == 1, (proc.returncode, stderr)
            assert "gave up waiting for a lock" in errors[0], stderr
        how = "killed" if stop == signal.SIGKILL else "interrupted"
        outcome = f"{args[0]} {mode} -> {f'{how} (exit {proc.returncode})' if killed else f'exit {proc.returncode}'}"
        self.log.append(outcome)
        return outcome

    # -- the truth ------------------------------------------------------------------------------
    def partly(self) -> list[dict]:
        code, out, _ = dbsync(self.proj, self.capsys, "--format", "json", "status")
        assert code == 0
        return json.loads(out)["partly_applied"]

    def check_truth(self) -> list[dict]:
        """status and check say what the catalog holds; returns status's partly_applied."""
        partly = self.partly()
        assert len(partly) <= 1, partly
        self.log.extend(f"[{p['direction']} {p['revision']} {p['done']}/{p['total']}"
                        f"{' +running' if p['in_flight'] else ''}]" for p in partly)
        position = self.position()
        snapshot = history.schema(self.proj.engine)
        interrupted = {p["revision"]: p for p in partly}
        for n, rev in enumerate(self.revs, start=1):
            entry = interrupted.get(rev.revision)
            if entry is None:
                expected = n <= position
                for obj in rev.objects():
                    assert history.present(snapshot, obj) == expected, (rev.revision, obj, self.log)
                continue
            direction = UP if entry["direction"] == "upgrade" else DOWN
            assert (n <= position) == (direction == DOWN), (entry, position)
            objects = rev.statements(direction)
            assert entry["total"] == len(objects) and entry["script_matches"], entry
            done = entry["done"]
            running = entry["in_flight"]["statement"] if entry["in_flight"] else None
            assert running in (None, done + 1), entry
            for ordinal, obj in enumerate(objects, start=1):
                if obj is None or ordinal == running or obj[0] == "index" and obj[2] in snapshot["invalid_indexes"]:
                    continue
                applied = history.present(snapshot, obj)
                # upgrade: statements done are applied, later ones not; downgrade: the reverse
                assert applied == ((ordinal <= done) == (direction == UP)), (rev.revision, ordinal, obj, entry,
                                                                           self.log)
        code, out, _ = dbsync(self.proj, self.capsys, "status")  # the text says the same
        assert code == 0 and out.count("partly ") == len(partly), out
        for p in partly:
            state = "applied" if p["direction"] == "upgrade" else "reverted"
            assert f"revision {p['revision']} partly {state}: {p['done']} of {p['total']} statements" in out, out
        code, out, _ = dbsync(self.proj, self.capsys, "check")
        reverted = any(p["direction"] == "downgrade" for p in partly)
        expected = 2 if reverted else 5 if position == len(self.chain) - 1 else 3
        assert code == expected, (out, partly, self.log)
        return partly

    def upgrade_refused_while_reverted(self) -> None:
        """An upgrade on a schema that is neither release's is refused and changes nothing."""
        before = (self.proj.heads(), self.proj.journal(), history.schema(self.proj.engine))
        code, _, err = dbsync(self.proj, self.capsys, *EXPAND)
        assert code == 2, (err, self.log)
        assert "partly reverted" in err, err
        assert (self.proj.heads(), self.proj.journal(), history.schema(self.proj.engine)) == before

    def rollback_refused_while_applied(self) -> None:
        before = (self.proj.heads(), self.proj.journal(), history.schema(self.proj.engine))
        code, _, err = dbsync(self.proj, self.capsys, *ROLLBACK)
        assert code == 4, (err, self.log)
        assert "partly applied" in err, err
        assert (self.proj.heads(), self.proj.journal(), history.schema(self.proj.engine)) == before


def run_case(seed: int, backend: str, tmp_path, server_for, capsys) -> list[str]:
    rng = random.Random(seed)
    dbs = Databases(backend, tmp_path, server_for)
    proj = None
    try:
        url = dbs.new()
        proj = ExpandProject(tmp_path / "project", url, "pass", extra_tables=history.BASE_TABLES)
        revs = history.generate(rng, proj.engine.dialect.name, rng.randint(2, 4))
        history.write(proj.directory / "migrations" / "versions", revs)
        attack = Attack(proj, revs, rng, capsys)
        target = attack.target = rng.randrange(0, len(attack.chain) - 1)  # installed in one run: a complete release
        alembic_command.upgrade(Config(str(proj.ini)), attack.chain[target])
        app = App(proj.engine, rng)
        app.write()

        if rng.random() < 0.5:  # interleaved: the expand is interrupted first
            attack.log.append("interleaved")
            attack.interrupt(EXPAND, UP)
            if any(p["direction"] == "upgrade" for p in attack.check_truth()):
                attack.rollback_refused_while_applied()
            app.write()
        elif target + 2 < len(attack.chain) and rng.random() < 0.5:  # two expand runs
            alembic_command.upgrade(Config(str(proj.ini)), attack.chain[rng.randrange(target + 1, len(attack.chain) - 1)])
        code, _, err = dbsync(proj, capsys, *EXPAND)
        assert code == 0, err
        attack.check_truth()
        app.write()

        for _ in range(rng.choice((1, 2))):
            if attack.position() == target:
                break
            attack.interrupt(ROLLBACK, DOWN)
            partly = attack.check_truth()
            if partly and rng.random() < 0.5:
                attack.upgrade_refused_while_reverted()
            app.write()
        # Each expand run is a release of its own (migrations_policy_releases): after two expand runs,
        # one rollback reverts the last, a second one the run before it.
        for _ in range(2):
            if attack.position() != target or attack.partly():
                code, _, err = dbsync(proj, capsys, *ROLLBACK)
                assert code == 0, (err, attack.log)
        assert attack.position() == target
        assert proj.journal() == []
        assert attack.check_truth() == []
        assert history.schema(proj.engine) == fresh_schema(proj, dbs, attack.chain[target]), attack.log
        app.verify()

        code, _, err = dbsync(proj, capsys, *EXPAND)  # and the release expands again
        assert code == 0, (err, attack.log)
        assert proj.journal() == []
        assert history.schema(proj.engine) == fresh_schema(proj, dbs, attack.chain[-1]), attack.log
        app.write()
        app.verify()
        return attack.log
    finally:
        if proj is not None:
            proj.engine.dispose()
        dbs.drop_all()


@pytest.mark.parametrize("backend", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_interrupted_expand_and_rollback_recover_to_a_fresh_schema(tmp_path, backend, server_for, capsys):
    base = int(os.environ.get("MP_ROLLBACK_KILL_SEED", random.randrange(10**6)))
    with capsys.disabled():
        print(f"\nMP_ROLLBACK_KILL_SEED={base} MP_ROLLBACK_KILL_CASES={CASES} ({backend})")
    for case in range(CASES):
        seed = base + case
        with capsys.disabled():
            print(f"  seed {seed}: ", end="", flush=True)
        try:
            log = run_case(seed, backend, tmp_path / f"case{case}", server_for, capsys)
        except Exception as failed:  # the seed in the failure itself (xdist keeps no stdout)
            raise AssertionError(f"MP_ROLLBACK_KILL_SEED={seed} MP_ROLLBACK_KILL_CASES=1 ({backend}): "
                                 f"{type(failed).__name__}: {failed}") from failed
        with capsys.disabled():
            print("; ".join(log))
