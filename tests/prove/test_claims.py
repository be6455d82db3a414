"""Several runners on one data migration at once (claims, ``data/walk/claim_table.py``), attacked.

* runners really work side by side: every runner's first batch waits for all the others to be
  inside theirs (a barrier in the migration), which runners taking turns can never pass;
* no two batches work on the same keys at the same time, and no row is migrated twice,
  whatever the keys (dense: range stepping, sparse: keyset), batch sizes and runner count;
* a runner never enters keys another live runner claimed, and a dead runner's claim is walked
  again by the next runner to claim (generated claims held by a live, then a dead, session);
* a runner killed inside its batch: its peer, waiting at the end, takes the claim over and
  ends complete in the same run;
* a database user who may not create or write the claims table: the run says so, takes turns,
  and still migrates everything.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from migrations_policy.data import DataMigration, Registry, RunOptions, data_migration, ledger, run
from migrations_policy.data.walk import claim_table, runner
from migrations_policy.core.framework_tables import claims_table

from ..data.support import dbsync_argv, items
from ..data.support import metadata as items_metadata
from ..helpers import database_user, write_data_project

#: MP_CLAIM_SEED=N replays one draw; otherwise MP_CLAIM_SEEDS fresh draws (from the run's seeded random,
#: alike in every xdist worker), so every CI run tries other interleavings.
SEEDS = [int(os.environ["MP_CLAIM_SEED"])] if os.environ.get("MP_CLAIM_SEED") else \
    [random.randrange(10**6) for _ in range(int(os.environ.get("MP_CLAIM_SEEDS", "3")))]

metadata = sa.MetaData()
batch_log = sa.Table(
    "batch_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("low_key", sa.BigInteger, nullable=True),  # a batch's bounds may pass INTEGER's limit
    sa.Column("high_key", sa.BigInteger, nullable=False),
    sa.Column("began", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=False),
)

# Read the batch, then write row by row: a row two runners both read would be migrated twice (n == 2).
# Each batch logs its keys and its time; the first batch of each process waits at a barrier (files in
# CLAIMS_BARRIER) until CLAIMS_RUNNERS processes are inside a batch; a batch holding CLAIMS_POISON
# touches CLAIMS_BARRIER/poisoned and sleeps until it is killed.
APP_MODULE = '''
import os
import time
from pathlib import Path

import sqlalchemy as sa
from migrations_policy.data import data_migration

items = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
log = sa.table("batch_log", sa.column("pid"), sa.column("low_key"), sa.column("high_key"),
               sa.column("began"), sa.column("ended"))
arrived = []


def barrier():
    place = Path(os.environ["CLAIMS_BARRIER"])
    (place / f"in-{os.getpid()}").touch()
    deadline = time.monotonic() + 30
    while len(list(place.glob("in-*"))) < int(os.environ["CLAIMS_RUNNERS"]):
        if time.monotonic() > deadline:
            raise RuntimeError("barrier: the other runners never got a batch of their own")
        time.sleep(0.02)


@data_migration("copy_items", table=items, key="id", pending=sa.and_(items.c.dst.is_(None), items.c.src.is_not(None)))
def copy_items(connection, batch):
    began = time.time()
    rows = connection.execute(sa.select(items.c.id, items.c.src, items.c.n).where(batch.where)).all()
    if not arrived and os.environ.get("CLAIMS_RUNNERS"):
        arrived.append(True)
        barrier()
    poison = os.environ.get("CLAIMS_POISON")
    if poison and any(key == int(poison) for key, _, _ in rows):
        (Path(os.environ["CLAIMS_BARRIER"]) / "poisoned").touch()
        time.sleep(600)
    for key, src, n in rows:
        connection.execute(sa.update(items).where(items.c.id == key).values(dst=src, n=n + 1))
    time.sleep(0.01)
    connection.execute(sa.insert(log).values(pid=os.getpid(), low_key=batch.lower, high_key=batch.upper,
                                             began=began, ended=time.time()))
    return len(rows)
'''


@pytest.fixture(autouse=True)
def _servers_only(backend):
    if backend == "sqlite":
        pytest.skip("SQLite has one writer at a time: runners take turns (claim_table.unavailable)")


def fill(engine: sa.Engine, rng: random.Random) -> list[int]:
    items_metadata.create_all(engine)
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)
    rows, step = rng.randrange(150, 600), rng.choice((1, 1, 2, 9, 40))  # 9, 40: sparse keys, keyset
    keys = sorted(rng.sample(range(1, rows * step + 1), rows)) if step > 1 else list(range(1, rows + 1))
    # negative keys, and keys up to the column's limit (a claim of many batches reaches past it)
    offset = rng.choice((0, 0, -rows * step // 2, 2**31 - 1 - rows * step))
    keys = [k + offset for k in keys]
    with engine.begin() as conn:
        conn.execute(sa.insert(items), [{"id": k, "src": f"v{k}"} for k in keys])
    return keys


def copy_items() -> DataMigration:
    """The set-based migration of ``items``: ``dst = src``, ``n + 1``."""
    return DataMigration("copy_items", table=items, key="id", pending=items.c.dst.is_(None),
                         values={"dst": items.c.src, "n": items.c.n + 1})


@pytest.fixture
def claims_project(tmp_path) -> tuple[Path, Path]:
    """The project of ``APP_MODULE`` and its barrier directory."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    return write_data_project(tmp_path, "claims_app", APP_MODULE), barrier


def migrated_counts(engine: sa.Engine) -> dict[int, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(items.c.id, items.c.n)).all())


def claims_left(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        return conn.execute(sa.select(claims_table)).all()


def start(project: Path, url: sa.URL, barrier: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        dbsync_argv(project, url, "--format", "json", "--progress", "none", "online_data_migrations", *args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(project), "CLAIMS_BARRIER": str(barrier), **env})


@pytest.mark.parametrize("seed", SEEDS)
def test_runners_work_side_by_side_and_never_on_the_same_keys_at_once(claims_project, db_url, db_engine, seed):
    rng = random.Random(seed * 7919 + 11)
    keys = fill(db_engine, rng)
    project, barrier = claims_project
    count = rng.choice((2, 3, 4))
    # every runner's first batch must find keys of its own: at least twice what the others' first take
    size = rng.choice([b for b in (5, 20, 60) if 2 * b * count <= len(keys)])
    args = ("--batch-size", str(size),
            *(("--batch-seconds", "0.02") if rng.random() < 0.5 else ()))
    runners = [start(project, db_url, barrier, *args, CLAIMS_RUNNERS=str(count)) for _ in range(count)]
    results = [(r, *r.communicate(timeout=300)) for r in runners]
    for process, out, err in results:
        assert process.returncode == 0, (seed, err, out)  # nobody writes: every runner ends complete
        assert "Traceback" not in err, err
    assert migrated_counts(db_engine) == {k: 1 for k in keys}, f"seed {seed}: a row migrated twice or never"
    with db_engine.connect() as conn:
        batches = conn.execute(sa.select(batch_log)).all()
    assert len({b.pid for b in batches}) == count
    for a in batches:
        for b in batches:
            if a.id < b.id and a.began < b.ended and b.began < a.ended:  # at the same time
                assert (a.low_key is not None and a.low_key >= b.high_key) or \
                       (b.low_key is not None and b.low_key >= a.high_key), (seed, a, b)
    assert claims_left(db_engine) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_live_runners_claims_are_never_entered_and_a_dead_ones_are_walked_again(db_engine, monkeypatch, seed):
    rng = random.Random(seed * 104729 + 3)
    keys = fill(db_engine, rng)
    bounds = sorted(rng.sample(range(keys[0] - 3, keys[-1] + 3), 2 * rng.randrange(1, 5)))
    held = [(None if i == 0 and rng.random() < 0.3 else bounds[2 * i], bounds[2 * i + 1])
            for i in range(len(bounds) // 2)]
    if rng.random() < 0.5:
        migration = copy_items()
    else:
        @data_migration("copy_items", table=items, key="id", pending=items.c.dst.is_(None))
        def migration(connection, batch):
            rows = connection.execute(sa.select(items.c.id, items.c.src, items.c.n).where(batch.where)).all()
            for key, src, n in rows:
                connection.execute(sa.update(items).where(items.c.id == key).values(dst=src, n=n + 1))
            return len(rows)
    options = RunOptions(batch_size=rng.choice((3, 17, 64, 500)), batch_seconds=rng.choice((None, 0.01)))
    assert claim_table.unavailable(db_engine) is None
    other = db_engine.connect()  # another runner's session, alive
    token = claim_table.new_token()
    claim_table.hold(other, token)
    with db_engine.begin() as conn:
        for low, high in held:
            claim_table.record(conn, "copy_items", low, high, token)
    monkeypatch.setattr(runner, "PEER_WAIT", 0.3)

    report = run(db_engine, Registry([migration]), options).migrations[0]
    inside = {k for k in keys if any((low is None or k > low) and k <= high for low, high in held)}
    assert migrated_counts(db_engine) == {k: int(k not in inside) for k in keys}, (seed, held)
    assert report.state == (ledger.CAUGHT_UP if inside else ledger.COMPLETE), (seed, report)
    if inside:
        assert "still migrating claimed keys" in report.strategy_note
    assert len(claims_left(db_engine)) == len(held)

    other.invalidate()  # the other runner dies: its session, and the lock on its token, end
    other.close()
    report = run(db_engine, Registry([migration]), options).migrations[0]
    assert migrated_counts(db_engine) == {k: 1 for k in keys}, (seed, held)
    assert report.state == ledger.COMPLETE, (seed, report)
    assert report.strategy_note.count("its runner died mid-batch") == len(held)
    assert claims_left(db_engine) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_runner_killed_in_its_batch_is_taken_over_by_its_peer_in_the_same_run(claims_project, db_url, db_engine,
                                                                                  seed):
    rng = random.Random(seed * 31337 + 5)
    keys = fill(db_engine, rng)
    project, barrier = claims_project
    poison = rng.choice(keys)
    args = ("--batch-size", str(rng.choice((10, 40))))
    victim = start(project, db_url, barrier, *args, CLAIMS_POISON=str(poison))
    deadline = time.monotonic() + 60
    while not (barrier / "poisoned").exists():
        assert victim.poll() is None and time.monotonic() < deadline, victim.communicate()
        time.sleep(0.02)
    peer = start(project, db_url, barrier, *args)
    (low, high), = [(c.low_key, c.high_key) for c in claims_left(db_engine)]  # the victim's
    outside = {k for k in keys if not ((low is None or k > low) and k <= high)}
    # the peer walks everything but the victim's claim, then waits for it at the end
    while any(migrated_counts(db_engine)[k] == 0 for k in outside) and peer.poll() is None:
        time.sleep(0.05)
    time.sleep(rng.choice((0.0, 0.3)))
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    out, err = peer.communicate(timeout=120)
    assert peer.returncode == 0, (seed, err, out)
    report = json.loads(out)["migrations"][0]
    assert report["state"] == "complete" and "its runner died mid-batch" in report["note"], report
    assert migrated_counts(db_engine) == {k: 1 for k in keys}
    assert claims_left(db_engine) == []


def limited_user(db_engine: sa.Engine, on_claims: tuple[str, ...]):
    """An engine of a user who may read and write the project's tables and the ledger, has the
    privileges *on_claims* on the claims table, and (PostgreSQL 15's default for ``public``, kept
    for every user here) may create nothing."""
    grants = {table: "SELECT, INSERT, UPDATE" for table in ("items", "batch_log", ledger.LEDGER_TABLE)}
    if on_claims:
        grants[claims_table.name] = ", ".join(on_claims)
    return database_user(db_engine, grants, may_create=False)


@pytest.mark.parametrize("access", ["absent", "read-only", "granted"])
def test_a_user_who_may_not_use_the_claims_table_takes_turns_and_says_why(db_url, db_engine, backend, access,
                                                                        monkeypatch):
    """PostgreSQL 15 no longer lets every user create tables in ``public``: a runner whose user
    may not create the claims table (absent), or may only read it (an administrator's run created
    it: read-only), finds out before any work, migrates everything taking turns, and says why;
    one that can read the claims keeps out of those live runners hold.  Granted what the
    operator guide says, the same user claims."""
    keys = fill(db_engine, random.Random(f"{backend}{access}"))
    if access != "absent":
        assert claim_table.unavailable(db_engine) is None  # created by a user who may
    privileges = {"absent": (), "read-only": ("SELECT",), "granted": ("SELECT", "INSERT", "UPDATE", "DELETE")}
    with limited_user(db_engine, privileges[access]) as limited:
        why = {"absent": "cannot create", "read-only": "cannot use", "granted": None}[access]
        unavailable = claim_table.unavailable(limited)
        assert unavailable is None if why is None else unavailable.startswith(f"{why} {claims_table.name}: ")
        migration = copy_items()
        claimed: set[int] = set()
        other = db_engine.connect()  # read-only: a runner that may claim is at work meanwhile
        if access == "read-only":
            monkeypatch.setattr(runner, "PEER_WAIT", 0.2)
            token = claim_table.hold_new(other)
            low, high = keys[len(keys) // 4], keys[len(keys) // 2]
            with db_engine.begin() as conn:
                claim_table.record(conn, "copy_items", low, high, token)
            claimed = {k for k in keys if low < k <= high}
        report = run(limited, Registry([migration]), RunOptions(batch_size=50)).migrations[0]
        other.invalidate()  # that runner dies: its claim's keys are anyone's again
        other.close()
        assert report.errors == 0, report
        assert report.state == (ledger.CAUGHT_UP if claimed else ledger.COMPLETE), report
        assert migrated_counts(db_engine) == {k: int(k not in claimed) for k in keys}  # kept out of the claim
        assert ("runners take turns" in report.strategy_note) == (why is not None), report.strategy_note
        if why:
            assert f"runners take turns: {why}" in report.strategy_note
        assert "limited-pw" not in report.strategy_note
        if claimed:
            again = run(limited, Registry([migration]), RunOptions(batch_size=50)).migrations[0]
            assert again.state == ledger.COMPLETE, again
    assert migrated_counts(db_engine) == {k: 1 for k in keys}
    assert access != "granted" or claims_left(db_engine) == []  # a dead claim waits for a runner that claims


@pytest.mark.parametrize("seed", SEEDS)
def test_batches_are_sized_by_time_with_other_runners_about(db_engine, monkeypatch, seed):
    """With another live runner, every claim is one batch: the batches must still grow toward
    ``--batch-seconds`` (and a runner alone, claiming many at a time, likewise)."""
    rng = random.Random(seed)
    keys = fill(db_engine, rng)
    migration = copy_items()
    assert claim_table.unavailable(db_engine) is None
    monkeypatch.setattr(runner, "PEER_WAIT", 0.2)
    other = db_engine.connect()
    try:
        if rng.random() < 0.7:  # a live runner, its claim past the table's end
            token = claim_table.new_token()
            claim_table.hold(other, token)
            with db_engine.begin() as conn:
                claim_table.record(conn, "copy_items", keys[-1] + 10, keys[-1] + 20, token)
        start_size = rng.choice((2, 3, 5))
        options = RunOptions(batch_size=start_size, batch_seconds=30.0)
        report = run(db_engine, Registry([migration]), options).migrations[0]
    finally:
        other.close()
    assert migrated_counts(db_engine) == {k: 1 for k in keys}
    assert report.batch_sizes[1] >= 4 * start_size, report  # grown 2x per batch toward 30 s


@pytest.mark.parametrize("seed", SEEDS)
def test_a_walk_whose_batches_hop_between_worker_threads_keeps_its_claims(db_engine, monkeypatch, seed):
    """``--workers``: a migration's batches run on whichever worker thread is free, each with its
    own connection and token.  A claim made on one must move with the walk: left with the other
    thread's live session, it looked like a peer's claim in flight forever (every runner waited
    60 s for it at its end, seen in test_concurrent_runners on MariaDB)."""
    rng = random.Random(seed)
    monkeypatch.setattr(runner, "PEER_WAIT", 0.2)
    migrations, expected = [], {}
    for i in range(3):
        table = sa.Table(f"flags{i}", sa.MetaData(),
                         sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                         sa.Column("flag", sa.Integer, nullable=False))
        table.create(db_engine)
        rows = rng.randrange(200, 900)
        with db_engine.begin() as conn:
            conn.execute(sa.insert(table), [{"id": k, "flag": 0} for k in range(1, rows + 1)])
        expected[table.name] = rows
        migrations.append(DataMigration(f"flags{i}", table=table, key="id", pending=table.c.flag == 0,
                                        values={"flag": table.c.flag + 1}))
    ledger.metadata.create_all(db_engine)
    report = run(db_engine, Registry(migrations), RunOptions(batch_size=rng.choice((5, 20)), workers=2,
                                                              batch_seconds=rng.choice((None, 0.01))))
    for m in report.migrations:
        assert m.state == ledger.COMPLETE and "still migrating" not in m.strategy_note, m
    with db_engine.connect() as conn:
        for name, rows in expected.items():
            flags = sa.table(name, sa.column("flag", sa.Integer))
            assert conn.execute(sa.select(sa.func.count()).where(flags.c.flag == 1)).scalar() == rows
    assert claims_left(db_engine) == []


def test_taking_over_a_claim_never_waits_for_the_batch_migrating_it(db_engine, monkeypatch):
    """A walk moving its claim to another worker thread's session holds the claim's row until its
    batch commits, and updates the ledger row last.  A runner that saw the old session gone must
    not wait for that row under the migration's lock: on PostgreSQL its lock read holds the ledger
    row, so both would wait for each other (a deadlock: one of them failed)."""
    keys = fill(db_engine, random.Random(7))
    migration = copy_items()
    assert claim_table.unavailable(db_engine) is None
    with db_engine.begin() as conn:
        ledger._insert_missing(conn, "copy_items")
    gone = db_engine.connect()  # the session that made the claim, then died
    old = claim_table.new_token()
    claim_table.hold(gone, old)
    low, high = keys[len(keys) // 3], keys[len(keys) // 2]
    with db_engine.begin() as conn:
        claim_table.record(conn, "copy_items", low, high, old)
    gone.invalidate()
    gone.close()
    monkeypatch.setattr(runner, "PEER_WAIT", 0.3)
    moving = db_engine.connect()  # the walk's batch on another thread's session: it has the row
    new = claim_table.new_token()
    claim_table.hold(moving, new)
    moving.begin()
    assert claim_table.take_over(moving, "copy_items", claim_table.Claim(low, high, old, True), new)
    reports: list = []
    other = threading.Thread(
        target=lambda: reports.append(run(db_engine, Registry([migration]), RunOptions(batch_size=20))))
    other.start()
    time.sleep(0.5)  # the runner meets the claim while the batch holds it
    ledger.record_batch(moving, "copy_items", 0, 0)  # the batch's last statement: the ledger row
    moving.commit()
    other.join(60)
    report = reports[0].migrations[0]
    assert report.errors == 0 and "deadlock" not in (report.error or "").lower(), report
    # the claim was in flight when the runner reached its end: it waited, then said so
    assert report.state == ledger.CAUGHT_UP and "still migrating claimed keys" in report.strategy_note
    moving.invalidate()  # now that session is gone too: the next run walks the claim again
    moving.close()
    again = run(db_engine, Registry([migration]), RunOptions(batch_size=20)).migrations[0]
    assert again.state == ledger.COMPLETE and "its runner died mid-batch" in again.strategy_note, again
    assert migrated_counts(db_engine) == {k: 1 for k in keys}
    assert claims_left(db_engine) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_runners_killed_at_random_while_others_work_lose_nothing_and_double_nothing(
        claims_project, db_url, db_engine, seed):
    """Three runners; again and again one of them, at random, is SIGKILLed at a random moment
    (inside a claim, a batch, a takeover, at its end) and started again.  Every row ends migrated
    exactly once (the migration reads its batch, then writes row by row: a row two batches both
    read ends with n == 2), and no claim is left behind."""
    rng = random.Random(seed * 7 + 1)
    keys = fill(db_engine, rng)
    project, barrier = claims_project
    args = ("--batch-size", str(rng.choice((3, 10, 30))), "--workers", str(rng.choice((1, 2))))
    running = [start(project, db_url, barrier, *args) for _ in range(3)]
    for _ in range(rng.randrange(3, 7)):
        time.sleep(rng.uniform(0.05, 0.6))
        victim = rng.randrange(3)
        running[victim].send_signal(signal.SIGKILL)
        running[victim].wait(timeout=30)
        running[victim] = start(project, db_url, barrier, *args)
    for process in running:
        out, err = process.communicate(timeout=300)
        assert process.returncode in (0, 3), (seed, err, out)  # 3: a killed runner's rows were in flight
        assert "Traceback" not in err, err
    final = start(project, db_url, barrier, *args)
    out, err = final.communicate(timeout=300)
    assert final.returncode == 0, (seed, err, out)
    assert migrated_counts(db_engine) == {k: 1 for k in keys}, f"seed {seed}: a row migrated twice or never"
    assert claims_left(db_engine) == []


def test_a_runner_token_already_held_is_drawn_again(db_engine, monkeypatch):
    """Tokens are 32 random bits: when one drawn is held by another session, a runner draws again
    instead of failing its migration (and gives up, with a clear error, only after three)."""
    assert claim_table.unavailable(db_engine) is None
    busy = db_engine.connect()
    taken = claim_table.new_token()
    claim_table.hold(busy, taken)
    draws = iter([taken, taken, claim_table.new_token()])
    monkeypatch.setattr(claim_table, "new_token", lambda: next(draws))
    with db_engine.connect() as conn:
        token = claim_table.hold_new(conn)
        assert token != taken
        claim_table.let_go(conn, token)
        monkeypatch.setattr(claim_table, "new_token", lambda: taken)
        with pytest.raises(claim_table.TokenInUse, match="already in use"):
            claim_table.hold_new(conn)
    busy.invalidate()
    busy.close()
