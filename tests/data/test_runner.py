"""The runner in-process, on every backend: batching, fairness, stuck rows, errors, re-dirtied rows."""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa

from migrations_policy.data import (DataMigration,
    Registry,
    RunOptions,
    data_migration,
    ledger,
    pending_migrations,
    record_forced,
    run)
from migrations_policy.data.walk.runner import MAX_GROWTH, next_batch_size
from migrations_policy.core.errors import UsageError
from migrations_policy.gate.verdict import unfinished

from .support import create_schema, insert_items, items, scalar

t = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
PENDING = sa.and_(t.c.dst.is_(None), t.c.src.is_not(None))


def copy(name="copy_items", **kw) -> DataMigration:
    return DataMigration(name, table=t, key="id", pending=PENDING, values={"dst": t.c.src, "n": t.c.n + 1}, **kw)


def flags(engine: sa.Engine, table: str, rows: int) -> DataMigration:
    """A second table ``table(id, flag)`` with *rows* rows and a migration setting flag 0 -> 1."""
    created = sa.Table(table, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                       sa.Column("flag", sa.Integer))
    created.create(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(created), [{"id": i, "flag": 0} for i in range(1, rows + 1)])
    light = sa.table(table, sa.column("id", sa.Integer), sa.column("flag", sa.Integer))
    return DataMigration(f"{table}_flags", table=light, key="id", pending=light.c.flag == 0, values={"flag": 1})


def by_name(report):
    return {m.name: m for m in report.migrations}


def test_batches_complete_and_ledger(db_engine):
    create_schema(db_engine, rows=1000)
    report = run(db_engine, Registry([copy()]), RunOptions(batch_size=100))
    m = by_name(report)["copy_items"]
    assert (report.exit_code, m.state, m.strategy) == (0, "complete", "range")
    assert (m.remaining_before, m.migrated, m.stuck, m.remaining_after) == (1000, 1000, 0, 0)
    assert m.batches == 10
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n == 1)) == 1000
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.dst != items.c.src)) == 0
    with db_engine.connect() as conn:
        row = ledger.read(conn)["copy_items"]
    assert (row["state"], row["rows_migrated"], row["rows_stuck"]) == ("complete", 1000, 0)
    assert row["last_key"] == "1000" and row["started_at"] <= row["finished_at"]
    # Cheap to rerun when complete: no batch at all.
    again = by_name(run(db_engine, Registry([copy()]), RunOptions(batch_size=100)))["copy_items"]
    assert (again.remaining_before, again.batches, again.state) == (0, 0, "complete")


def test_sparse_and_text_keys_fall_back_to_keyset(db_engine):
    create_schema(db_engine, rows=300, start=10, step=10)  # ids 10, 20, ... : 10% dense
    report = run(db_engine, Registry([copy()]), RunOptions(batch_size=50))
    m = by_name(report)["copy_items"]
    assert (m.strategy, m.migrated, m.batches, report.exit_code) == ("keyset", 300, 6, 0)
    assert "few are pending" in m.strategy_note and "batches follow the pending rows" in report.text()

    words = sa.Table("words", sa.MetaData(), sa.Column("word", sa.String(20), primary_key=True),
                     sa.Column("upper", sa.String(20)))
    words.create(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(words), [{"word": f"w{i:03d}"} for i in range(120)])
    w = sa.table("words", sa.column("word"), sa.column("upper"))
    upper = DataMigration("upper_words", table=w, key="word", pending=w.c.upper.is_(None),
                          values={"upper": sa.func.upper(w.c.word)})
    m = by_name(run(db_engine, Registry([upper]), RunOptions(batch_size=25)))["upper_words"]
    assert (m.strategy, m.migrated, m.state) == ("keyset", 120, "complete")
    assert "is not a number" in m.strategy_note


def test_max_count_is_shared_fairly(db_engine):
    create_schema(db_engine, rows=1000)
    registry = Registry([copy(), flags(db_engine, "big", 1000), flags(db_engine, "small", 30)])
    report = run(db_engine, registry, RunOptions(batch_size=200, max_count=400))
    found = by_name(report)
    assert report.exit_code == 1 and report.max_count_reached
    assert found["small_flags"].state == "complete" and found["small_flags"].migrated == 30
    first, second = found["copy_items"].migrated, found["big_flags"].migrated
    assert first + second + 30 <= 400
    assert abs(first - second) <= 0.1 * (first + second), (first, second)  # neither starves
    assert "--max-count reached" in report.text()
    rest = run(db_engine, registry, RunOptions(batch_size=200))
    assert rest.exit_code == 0
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n != 1)) == 0


def test_stuck_rows_fail_the_run_and_are_not_reselected(db_engine):
    create_schema(db_engine, rows=500)
    with db_engine.begin() as conn:
        conn.execute(sa.update(items).where(items.c.id % 100 == 0).values(src="bad"))
    stuck = DataMigration("copy_unless_bad", table=t, key="id", pending=PENDING,
                          values={"dst": sa.func.nullif(t.c.src, "bad"), "n": t.c.n + 1})
    report = run(db_engine, Registry([stuck, flags(db_engine, "other", 120)]), RunOptions(batch_size=50))
    m, other = by_name(report)["copy_unless_bad"], by_name(report)["other_flags"]
    assert report.exit_code == 8
    assert (m.state, m.stuck, m.migrated, m.remaining_after, m.batches) == ("stuck", 5, 495, 5, 10)
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n == 0)) == 5  # stuck rows are never written
    assert "cannot migrate them" in report.text()
    assert (other.state, other.migrated) == ("complete", 120)
    with db_engine.connect() as conn:
        assert ledger.read(conn)["copy_unless_bad"]["state"] == "stuck"
    again = by_name(run(db_engine, Registry([stuck]), RunOptions(batch_size=50)))["copy_unless_bad"]
    assert (again.stuck, again.migrated, again.state) == (5, 0, "stuck")


def test_error_in_one_migration_does_not_stop_the_others(db_engine):
    create_schema(db_engine, rows=300)

    @data_migration("explodes", table=t, key="id", pending=PENDING)
    def explodes(connection, batch):
        connection.execute(sa.update(t).where(batch.where).values(dst="half-done"))
        raise RuntimeError("cannot parse row 17\nsecond line")

    report = run(db_engine, Registry([explodes, copy()]), RunOptions(batch_size=100))
    bad, good = by_name(report)["explodes"], by_name(report)["copy_items"]
    assert report.exit_code == 8
    # the project's function raised: its file and line, the exception, the first line of its text
    said = re.compile(r"^(?:.*/)?test_runner\.py:\d+: RuntimeError: cannot parse row 17$")
    assert (bad.state, bad.errors, bad.migrated) == ("error", 1, 0) and said.match(bad.error), bad.error
    assert (good.state, good.migrated) == ("complete", 300)
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.dst == "half-done")) == 0  # rolled back
    with db_engine.connect() as conn:
        assert ledger.read(conn)["explodes"]["last_error"] == bad.error
    assert f"explodes: error: {bad.error}" in report.text()


def test_rows_dirtied_again_by_old_code_are_picked_up(db_engine):
    create_schema(db_engine, rows=400)
    assert run(db_engine, Registry([copy()]), RunOptions(batch_size=100)).exit_code == 0
    with db_engine.begin() as conn:  # release-N code: writes src only, leaves dst NULL
        conn.execute(sa.update(items).where(items.c.id <= 7).values(src="changed", dst=None))
    insert_items(db_engine, 3, start=1001, src="new")
    with db_engine.connect() as conn:
        assert [(p.name, p.remaining) for p in pending_migrations(conn, Registry([copy()]), exact=True)] == \
            [("copy_items", 10)]
    m = by_name(run(db_engine, Registry([copy()]), RunOptions(batch_size=100)))["copy_items"]
    assert (m.remaining_before, m.migrated, m.remaining_after, m.state) == (10, 10, 0, "complete")
    assert m.strategy == "keyset"  # 10 pending keys spread over 1..1003
    assert scalar(db_engine, sa.select(items.c.dst).where(items.c.id == 3)) == "changed"


def test_rows_inserted_past_the_end_during_the_run_are_walked(db_engine):
    create_schema(db_engine, rows=200)

    @data_migration("copy_and_insert", table=t, key="id", pending=PENDING)
    def copy_and_insert(connection, batch):
        if batch.lower == 100:  # an old-release service inserts while we run
            connection.execute(sa.insert(t).values(id=250, src="late"))
        return connection.execute(sa.update(t).where(batch.where).values(dst=t.c.src)).rowcount

    m = by_name(run(db_engine, Registry([copy_and_insert]), RunOptions(batch_size=100)))["copy_and_insert"]
    assert (m.remaining_before, m.migrated, m.remaining_after, m.state) == (200, 201, 0, "complete")


def test_options_selection_and_usage_errors(db_engine):
    create_schema(db_engine, rows=50)

    @data_migration("tagged", table=t, key="id", pending=PENDING, options={"tag": "x", "repeat": 1})
    def tagged(connection, batch):
        value = batch.options["tag"] * batch.options["repeat"]
        return connection.execute(sa.update(t).where(batch.where).values(dst=value)).rowcount

    registry = Registry([tagged, copy()])
    report = run(db_engine, registry, RunOptions(names=["tagged"], options={"tagged": {"tag": "ab", "repeat": "2"}}))
    assert [m.name for m in report.migrations] == ["tagged"] and report.exit_code == 0
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.dst == "abab")) == 50
    for bad in (RunOptions(names=["nope"]), RunOptions(options={"tagged": {"colour": "red"}}),
                RunOptions(options={"tagged": {"repeat": "many"}}), RunOptions(batch_size=0),
                RunOptions(max_count=0)):
        with pytest.raises(UsageError) as info:
            run(db_engine, registry, bad)
        assert info.value.exit_code == 2


def test_run_last_waits_and_missing_columns_are_inapplicable(db_engine):
    create_schema(db_engine, rows=100)
    last = DataMigration("stamp_n", table=t, key="id", pending=t.c.n == 0, values={"n": 5}, run_last=True)
    gone = sa.table("items", sa.column("id", sa.Integer), sa.column("extra"))
    dropped = DataMigration("from_extra", table=gone, key="id", pending=gone.c.extra.is_not(None),
                            values={"extra": None})
    registry = Registry([copy(), last, dropped])
    report = run(db_engine, registry, RunOptions(batch_size=30, max_count=50))
    found = by_name(report)
    assert (found["stamp_n"].state, found["stamp_n"].migrated, report.exit_code) == ("waiting", 0, 1)
    assert found["from_extra"].state == "inapplicable" and "items.extra does not exist" in report.text()
    report = run(db_engine, registry, RunOptions(batch_size=30))
    found = by_name(report)
    assert report.exit_code == 0 and found["stamp_n"].state == "complete"
    assert found["stamp_n"].migrated == 0  # copy_items set n = 1 first, so nothing left with n = 0
    with db_engine.connect() as conn:
        states = {p.name: (p.remaining, p.state) for p in pending_migrations(conn, registry)}
    assert states == {"copy_items": (0, "complete"), "stamp_n": (0, "complete"), "from_extra": (None, "inapplicable")}


def test_workers_run_migrations_in_parallel(db_engine):
    create_schema(db_engine, rows=600)
    report = run(db_engine, Registry([copy(), flags(db_engine, "more", 500)]), RunOptions(batch_size=100, workers=2))
    assert report.exit_code == 0
    assert [m.migrated for m in report.migrations] == [600, 500]
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.dst.is_(None))) == 0


def test_record_forced_and_missing_ledger(db_engine):
    create_schema(db_engine, rows=10)
    with db_engine.connect() as conn:
        record_forced(conn, "copy_items", remaining=10, reason="incident 42", forced_by="ops@host")
        row = ledger.read(conn)["copy_items"]
    assert (row["forced_remaining"], row["forced_reason"], row["forced_by"]) == (10, "incident 42", "ops@host")
    assert row["forced_at"] is not None and row["state"] == "never run"
    ledger.ledger.drop(db_engine)
    from migrations_policy.core.errors import DatabaseError
    with pytest.raises(DatabaseError, match="create_ledger"):
        run(db_engine, Registry([copy()]))


def test_a_row_fixed_by_another_writer_during_the_batch_is_not_stuck(db_engine, backend):
    """MariaDB's REPEATABLE READ snapshot (taken by a read before the batch's writes) still shows a
    row another writer fixed meanwhile as pending; the stuck count must read what is committed now."""
    if backend == "sqlite":
        pytest.skip("SQLite's batch holds the database write lock: no other writer can commit meanwhile")
    create_schema(db_engine, rows=10)

    def fix_row_3_elsewhere():
        with db_engine.begin() as other:
            other.execute(sa.update(items).where(items.c.id == 3).values(dst="fixed by new code"))

    @data_migration("copy_with_a_concurrent_fix", table=t, key="id", pending=PENDING)
    def migrate(connection, batch):
        connection.execute(sa.select(sa.func.count()).select_from(t)).scalar()  # the snapshot starts here
        fix_row_3_elsewhere()
        return connection.execute(sa.update(t).where(batch.where).values(dst=t.c.src)).rowcount

    report = run(db_engine, Registry([migrate]), RunOptions(batch_size=100))
    m = by_name(report)["copy_with_a_concurrent_fix"]
    assert (m.stuck, m.remaining_after, report.exit_code) == (0, 0, 0)
    assert scalar(db_engine, sa.select(items.c.dst).where(items.c.id == 3)) == "fixed by new code"


def test_the_batch_lock_yields_the_ledger_key_the_previous_holder_committed(db_engine, backend):
    """A runner's batch reads the ledger's last_key together with taking the lock (one statement on
    PostgreSQL): it must see what the runner that held the lock before it committed, even though
    it started waiting before that runner wrote it."""
    if backend == "sqlite":
        pytest.skip("SQLite's batch lock is the database write lock, taken before any read")
    import threading
    import time

    from migrations_policy.data.walk import locks

    create_schema(db_engine, rows=1)
    with db_engine.connect() as conn:
        ledger.record_start(conn, "followed")
    holding, seen = threading.Event(), {}

    def first_runner():
        with db_engine.connect() as conn:
            with locks.batch_transaction(conn, "followed", ledger.last_key_query("followed")) as current:
                seen["first"] = current
                holding.set()
                time.sleep(0.3)  # the second runner is waiting for the lock by now
                ledger.record_batch(conn, "followed", 5, 0, 500)
                time.sleep(0.2)

    def second_runner():
        holding.wait(10)
        with db_engine.connect() as conn:
            with locks.batch_transaction(conn, "followed", ledger.last_key_query("followed")) as current:
                seen["second"] = current

    threads = [threading.Thread(target=first_runner), threading.Thread(target=second_runner)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert seen == {"first": None, "second": "500"}
    with db_engine.connect() as conn:
        assert ledger.read(conn)["followed"]["rows_migrated"] == 5


def test_next_batch_size_aims_at_the_target_within_bounds():
    assert next_batch_size(1000, 0.025, 0.05, 10_000) == 2000      # twice too fast: double
    assert next_batch_size(1000, 0.001, 0.05, 10_000) == 2000      # at most 2x per batch
    assert next_batch_size(1000, 0.0, 0.05, 10_000) == 2000        # an instant batch still only doubles
    assert next_batch_size(1000, 0.0625, 0.05, 10_000) == 800      # a little slow: shrink in proportion
    assert next_batch_size(1000, 5.0, 0.05, 10_000) == 500         # at most halved per batch
    assert next_batch_size(8000, 0.01, 0.05, 10_000) == 10_000     # never above the ceiling
    assert next_batch_size(1, 9.0, 0.05, 10_000) == 1              # never below one row


def test_batch_seconds_grows_fast_batches_up_to_the_ceiling(db_engine):
    create_schema(db_engine, rows=1000)
    # A 1,000-row batch of this table takes milliseconds: every batch is far under 100 s.
    report = run(db_engine, Registry([copy()]), RunOptions(batch_size=10, batch_seconds=100.0))
    m = by_name(report)["copy_items"]
    assert (m.state, m.migrated, report.exit_code) == ("complete", 1000, 0)
    assert m.batch_sizes == (10, 10 * MAX_GROWTH)  # 10, 20, 40, 80, then the ceiling 100
    fewest = 4 + -(-(1000 - 150) // 100)
    # claiming (PostgreSQL, MariaDB), the last batch of a claim may be cut short by the claim's end
    assert fewest <= m.batches <= fewest + 2, m.batches
    bump = DataMigration("bump_n", table=t, key="id", pending=t.c.n == 1, values={"n": 2})
    fixed = by_name(run(db_engine, Registry([bump]), RunOptions(batch_size=10)))["bump_n"]
    assert (fixed.migrated, fixed.batch_sizes, fixed.batches) == (1000, (10, 10), 100)


def test_batch_seconds_shrinks_slow_batches(db_engine):
    """Rows that cost more than the target allows shrink the batches (at most 2x per batch);
    the per-batch fixed part (statements, commit) is far below the rows' 20 ms each, so the size
    where the fixed part is a tenth of a batch (``sizing.FIXED_SHARE``) is not what stops them."""
    create_schema(db_engine, rows=130)

    @data_migration("slow_copy", table=t, key="id", pending=PENDING)
    def slow_copy(connection, batch):
        keys = list(connection.execute(sa.select(t.c.id).where(batch.where)).scalars())
        time.sleep(0.02 * len(keys))  # 20 ms a row: 64 rows take 1.3 s, over the 0.5 s target
        return connection.execute(sa.update(t).where(batch.where).values(dst=t.c.src)).rowcount

    m = by_name(run(db_engine, Registry([slow_copy]), RunOptions(batch_size=64, batch_seconds=0.5)))["slow_copy"]
    assert (m.state, m.migrated) == ("complete", 130)
    assert m.batch_sizes[1] == 64 and m.batch_sizes[0] <= 32, m.batch_sizes  # 64, then at most 32 (~25)


def test_waiting_for_another_runner_does_not_shrink_batches(db_engine, backend):
    """Another runner holds the migration's lock for 2 s while this one's first batch waits for it:
    the wait holds no row lock, so it is not the batch's time.  Counted, it shrank every runner's
    batches as runners were added (benchmarks/scaling.py: 4 runners, 80-row batches, 16x slower)."""
    if backend == "sqlite":
        pytest.skip("SQLite's batch lock is the database write lock, which the run's start waits for too")
    import threading

    from migrations_policy.data.walk import locks

    create_schema(db_engine, rows=300)
    holding, release = threading.Event(), threading.Event()

    def other_runner():
        with db_engine.connect() as conn:
            with locks.batch_transaction(conn, "copy_items"):
                holding.set()
                release.wait(2.0)

    holder = threading.Thread(target=other_runner)
    holder.start()
    assert holding.wait(10)
    try:
        # a 100-row batch of this table takes milliseconds, far under the 1 s target: batches grow
        m = by_name(run(db_engine, Registry([copy()]), RunOptions(batch_size=100, batch_seconds=1.0)))["copy_items"]
    finally:
        release.set()
        holder.join(10)
    assert (m.state, m.migrated) == ("complete", 300)
    assert m.batch_sizes == (100, 200) and m.batches == 2, (m.batch_sizes, m.batches)  # 100, then 200
    assert m.longest_batch_seconds < 1.0  # the 2 s wait is not in it


def test_batch_seconds_with_workers(db_engine):
    create_schema(db_engine, rows=600)
    report = run(db_engine, Registry([copy(), flags(db_engine, "more", 500)]),
                 RunOptions(batch_size=10, batch_seconds=100.0, workers=2))
    assert report.exit_code == 0 and [m.migrated for m in report.migrations] == [600, 500]
    assert [m.batch_sizes for m in report.migrations] == [(10, 100), (10, 100)]  # each grows on its own


def test_batch_seconds_keeps_max_count_fair(db_engine):
    create_schema(db_engine, rows=1000)
    registry = Registry([copy(), flags(db_engine, "big", 1000)])
    report = run(db_engine, registry, RunOptions(batch_size=20, batch_seconds=100.0, max_count=600))
    first, second = (m.migrated for m in report.migrations)
    assert report.exit_code == 1 and first + second == 600
    assert abs(first - second) <= 0.1 * (first + second), (first, second)
    with pytest.raises(UsageError):
        run(db_engine, registry, RunOptions(batch_seconds=0))


def test_rows_inserted_into_a_batch_after_it_read_its_rows_are_remaining_not_stuck(db_engine, backend):
    """Release-N code inserts pending rows into the key range of the running batch after the function
    read its rows: those rows were never given to the migration, so they are *remaining* (the walk is
    caught up, exit 3), not *stuck* (exit 2).  A row the function was given and left pending is stuck."""
    if backend == "sqlite":
        pytest.skip("SQLite's batch holds the database write lock: no other writer can commit meanwhile")
    create_schema(db_engine, rows=40)
    late = iter(range(41, 10_000))

    def old_release_inserts(count: int) -> None:
        with db_engine.begin() as other:
            other.execute(sa.insert(items), [{"id": next(late), "src": "late"} for _ in range(count)])

    @data_migration("copy_while_inserted", table=t, key="id", pending=PENDING)
    def migrate(connection, batch):
        rows = connection.execute(sa.select(t.c.id).where(batch.where)).all()
        old_release_inserts(3)  # committed after the batch read its rows, keys inside (lower, upper]
        for (key,) in rows:
            if key != 7:  # row 7 is given to the function and left pending: genuinely stuck
                connection.execute(sa.update(t).where(t.c.id == key).values(dst=t.c.src))
        return None

    report = run(db_engine, Registry([migrate]), RunOptions(batch_size=1000))
    m = by_name(report)["copy_while_inserted"]
    assert (m.stuck, m.state, report.exit_code) == (1, "stuck", 8)
    assert m.migrated == 39

    with db_engine.begin() as conn:  # fix row 7 so that only the late rows stay behind
        conn.execute(sa.update(items).where(items.c.id == 7).values(dst="fixed"))

    @data_migration("copy_while_inserted", table=t, key="id", pending=PENDING)
    def migrate_all(connection, batch):
        rows = connection.execute(sa.select(t.c.id).where(batch.where)).all()
        old_release_inserts(2)
        for (key,) in rows:
            connection.execute(sa.update(t).where(t.c.id == key).values(dst=t.c.src))
        return None

    report = run(db_engine, Registry([migrate_all]), RunOptions(batch_size=1000))
    m = by_name(report)["copy_while_inserted"]
    assert m.stuck == 0 and m.remaining_after > 0
    assert (m.state, report.exit_code, report.to_dict()["caught_up"]) == ("caught up", 3, True)
    with db_engine.connect() as conn:
        assert ledger.read(conn)["copy_while_inserted"]["state"] == "caught up"


@pytest.mark.parametrize("seed", range(3))
def test_a_batch_never_makes_the_applications_inserts_wait(db_engine, backend, seed):
    """While a batch holds its rows, release-N code inserting new rows must not wait for it: neither
    past the end of the table (the batch that reaches the end of the key range would otherwise
    lock the gap up to the supremum on MariaDB's REPEATABLE READ) nor into a free key inside the
    batch's range.  The migration runs the set-based UPDATE the runner issues, then, inside the
    batch's transaction, another connection inserts with a 1 s lock timeout: a wait can only end
    in that timeout, since the batch cannot commit meanwhile.  Keys, gaps and batch sizes are drawn
    from *seed*."""
    if backend == "sqlite":
        pytest.skip("SQLite's batch holds the database write lock: no other writer can commit meanwhile")
    import random

    rng = random.Random(seed)
    keys = sorted(rng.sample(range(1, 2_000), rng.randrange(20, 120)))
    with db_engine.begin() as conn:
        create_schema(db_engine)
        conn.execute(sa.insert(items), [{"id": k, "src": f"v{k}"} for k in keys])
    taken = set(keys)
    waited: list[str] = []

    def insert_elsewhere(key: int, where: str) -> None:
        taken.add(key)
        with db_engine.connect() as other:
            other.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1" if backend == "mysql"
                                  else "SET lock_timeout = '1s'")
            other.commit()
            try:
                with other.begin():
                    other.execute(sa.insert(items).values(id=key, src=None))  # not pending: the walk ignores it
            except sa.exc.OperationalError as exc:
                waited.append(f"insert of key {key} {where} waited for the batch: {exc.orig}")

    @data_migration("copy_while_inserting", table=t, key="id", pending=PENDING)
    def migrate(connection, batch):
        migrated = connection.execute(sa.update(t).where(batch.where).values(dst=t.c.src)).rowcount
        free = [k for k in range((batch.lower or 0) + 1, batch.upper) if k not in taken]
        if free:
            insert_elsewhere(rng.choice(free), f"inside the batch ({batch.lower}, {batch.upper}]")
        insert_elsewhere(max(taken) + rng.randrange(1, 50), "past the end of the table")
        return migrated

    report = run(db_engine, Registry([migrate]), RunOptions(batch_size=rng.randrange(3, 40), batch_seconds=None))
    assert waited == []
    assert by_name(report)["copy_while_inserting"].migrated == len(keys)
    assert scalar(db_engine, sa.select(sa.func.count()).select_from(items)) == len(taken)


@pytest.mark.parametrize("seed", range(6))
def test_rows_before_the_walk_are_counted_in_a_small_table_else_estimated(db_engine, monkeypatch, seed):
    """No full count before the walk: the first window of keys gives the strategy (its density);
    a table of at most one window of rows is counted, a bigger one gets the planner's estimate
    (PostgreSQL, MariaDB; SQLite has none and counts), marked, unless ``exact``.  What the walk
    migrated is exact whatever the estimate said, and 0 after it is verified."""
    import random

    from migrations_policy.data.remaining import pending as probes
    from migrations_policy.data.walk.runner import DENSE_THRESHOLD

    rng = random.Random(seed)
    window = rng.randint(2, 60)
    monkeypatch.setattr(probes, "PROBE_WINDOW", window)
    rows = rng.randint(20, 300)
    create_schema(db_engine, rows=rows)
    done = set(rng.sample(range(1, rows + 1), rng.randint(0, rows - 1)))  # rows already migrated
    with db_engine.begin() as conn:
        conn.execute(sa.update(items).where(items.c.id.in_(done)).values(dst=items.c.src))
    pending = sorted(set(range(1, rows + 1)) - done)
    low, high = pending[0], pending[-1]
    edge = min(high, low + window - 1)
    density = sum(1 for k in pending if k <= edge) / (edge - low + 1)  # of the first window
    exact = rng.random() < 0.3
    m = by_name(run(db_engine, Registry([copy()]), RunOptions(batch_size=rng.randint(5, 80), exact=exact)))["copy_items"]
    counted = exact or rows <= window or db_engine.dialect.name == "sqlite"
    context = (seed, window, rows, len(pending), exact, m.remaining_before, m.strategy)
    assert m.remaining_before_estimated is not counted, context
    if counted:
        assert m.remaining_before == len(pending), context
    else:
        assert m.remaining_before >= 1, context
    assert m.strategy == ("range" if density >= DENSE_THRESHOLD else "keyset"), context
    assert (m.migrated, m.remaining_after, m.remaining_after_estimated, m.state) == \
        (len(pending), 0, False, "complete"), context
    report = run(db_engine, Registry([copy()]), RunOptions())
    assert (report.migrations[0].remaining_before, report.migrations[0].remaining_before_estimated) == (0, False)


def test_an_estimate_is_marked_in_text_and_json(db_engine, monkeypatch):
    from migrations_policy.data.remaining import pending as probes

    monkeypatch.setattr(probes, "PROBE_WINDOW", 10)
    create_schema(db_engine, rows=200)
    report = run(db_engine, Registry([copy()]), RunOptions(batch_size=50))
    [m] = report.to_dict()["migrations"]
    estimated = db_engine.dialect.name != "sqlite"
    assert m["remaining_before_estimated"] is estimated
    row = next(line for line in report.text().splitlines() if line.startswith("copy_items"))
    assert (f"~{m['remaining_before']}" in row) is estimated, row
    assert ("planner's estimate" in report.text()) is estimated
    assert m["remaining_before"] >= 1 and m["migrated"] == 200 and m["remaining_after"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_max_count_loop_resumes_where_the_last_run_stopped(db_engine, monkeypatch, seed):
    """``--max-count`` in a loop: each run after one that stopped midway resumes past the
    ledger's cursor instead of reading again what earlier runs finished; rows old code dirtied
    behind the cursor are not lost: the walk that reaches the end goes back for them, so a run
    ends complete or stopped by --max-count, never caught up.  The loop ends complete, every row
    migrated once per time it was pending; remaining rows are 0 exactly when the state is complete."""
    import random

    from migrations_policy.data.remaining import pending as probes

    rng = random.Random(seed)
    window = rng.choice([5, 40, 10_000])
    monkeypatch.setattr(probes, "PROBE_WINDOW", window)
    rows = rng.randint(60, 400)
    create_schema(db_engine, rows=rows)
    registry = Registry([copy()])
    times_pending = {k: 1 for k in range(1, rows + 1)}
    cursor = None  # where the last run stopped midway (state incomplete)
    resumes = 0
    for attempt in range(rows + 10):
        past = cursor is not None and scalar(db_engine, sa.select(sa.func.count()).where(
            items.c.id > int(cursor), items.c.dst.is_(None))) > 0
        report = run(db_engine, registry, RunOptions(batch_size=rng.randint(3, 40), max_count=rng.randint(5, 120)))
        m = report.migrations[0]
        context = (seed, attempt, window, rows, m.state, m.strategy_note, cursor)
        assert (f"resumed after id {cursor}" in m.strategy_note) is past, context
        resumes += past
        assert m.errors == 0 and m.stuck == 0, context
        assert (m.remaining_after == 0) is (m.state == "complete"), context
        # nothing writes while a run runs: a walk that reaches its end, resumed or not, leaves
        # nothing behind (rows dirtied behind the last cursor are walked after the end)
        assert m.state in ("complete", "incomplete"), context
        assert m.remaining_after_estimated is (m.remaining_after > 0 and rows > window
                                               and db_engine.dialect.name != "sqlite"), context
        if report.exit_code == 0:
            break
        with db_engine.connect() as conn:
            row = ledger.read(conn)["copy_items"]
        cursor = row["last_key"] if row["state"] == "incomplete" else None
        if rng.random() < 0.4:  # release-N code writes src again and leaves dst NULL
            with db_engine.begin() as conn:
                dirty = rng.sample(range(1, rows + 1), rng.randint(1, 4))
                done = [k for k, in conn.execute(sa.select(items.c.id).where(
                    items.c.id.in_(dirty), items.c.dst.is_not(None)))]
                conn.execute(sa.update(items).where(items.c.id.in_(done)).values(src="again", dst=None))
            for k in done:
                times_pending[k] += 1
    else:
        raise AssertionError(f"the loop did not complete: {context}")
    assert resumes or attempt <= 1, "no run resumed"
    with db_engine.connect() as conn:
        assert dict(conn.execute(sa.select(items.c.id, items.c.n)).all()) == times_pending, seed


@pytest.mark.parametrize("seed", range(4))
def test_a_resumed_walk_counts_what_it_left_pending(db_engine, seed):
    """A run that resumes past the last run's cursor and reaches the end still proves what remains:
    rows it cannot migrate past the cursor are stuck (exit 2), not complete."""
    import random

    rng = random.Random(seed)
    rows = rng.randint(60, 200)
    create_schema(db_engine, rows=rows)
    bad = set(rng.sample(range(rows // 2 + 1, rows + 1), rng.randint(1, 5)))  # past where the first run stops
    with db_engine.begin() as conn:
        conn.execute(sa.update(items).where(items.c.id.in_(bad)).values(src="bad"))
    stuck = DataMigration("copy_unless_bad", table=t, key="id", pending=PENDING,
                          values={"dst": sa.func.nullif(t.c.src, "bad"), "n": t.c.n + 1})
    first = run(db_engine, Registry([stuck]), RunOptions(batch_size=10, max_count=rows // 2 - 5))
    assert first.migrations[0].state == "incomplete"
    m = run(db_engine, Registry([stuck]), RunOptions(batch_size=rng.randint(5, 30))).migrations[0]
    assert "resumed after id" in m.strategy_note
    assert (m.state, m.stuck, m.remaining_after) == ("stuck", len(bad), len(bad)), (seed, m.strategy_note)


@pytest.mark.parametrize("seed", range(3))
def test_keys_up_to_the_integer_columns_limit(db_engine, seed):
    """Range stepping, claims and probe windows step past the last key: bound as the column's
    INTEGER type, a step past 2,147,483,647 was refused by PostgreSQL ("integer out of range"),
    so such a table could never be migrated, nor its migration proved complete by the gate."""
    import random

    rng = random.Random(seed)
    rows, step = rng.randrange(50, 400), rng.choice((1, 1, 7))
    create_schema(db_engine, rows=rows, start=2**31 - 1 - (rows - 1) * step, step=step)
    with db_engine.connect() as conn:
        [before] = pending_migrations(conn, [copy()])
    assert before.remaining > 0
    m = by_name(run(db_engine, Registry([copy()]), RunOptions(batch_size=rng.choice((7, 64)))))["copy_items"]
    assert (m.state, m.migrated, m.errors) == ("complete", rows, 0), m
    with db_engine.connect() as conn:
        [after] = pending_migrations(conn, [copy()])
    assert after.remaining == 0
    assert scalar(db_engine, sa.select(sa.func.count()).where(items.c.n == 1)) == rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_with_a_null_key_are_never_taken_for_migrated(db_engine, seed):
    """A nullable unique key: release N inserts rows whose key is NULL.  No window, batch or claim
    reaches them (``key > x`` is never true of NULL; SQLite and MariaDB sort NULL first), so the
    gate counts them as pending and the runner migrates every other row, then fails the migration
    naming them, instead of "complete" (PostgreSQL) or "caught up" forever (SQLite, MariaDB)."""
    import random

    rng = random.Random(seed)
    keyed = sa.Table("keyed", sa.MetaData(), sa.Column("rid", sa.Integer, primary_key=True),
                     sa.Column("uid", rng.choice((sa.Integer(), sa.String(36))), unique=True, nullable=True),
                     sa.Column("src", sa.String(20)), sa.Column("dst", sa.String(20)))
    kt = sa.table("keyed", sa.column("uid"), sa.column("src", sa.String), sa.column("dst", sa.String))
    migration = DataMigration("keyed_copy", table=kt, key="uid", values={"dst": kt.c.src})
    keyed.metadata.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    keys = rng.sample(range(1, 10_000), rng.randrange(20, 200))
    nulls = rng.randrange(1, 6)
    texts = isinstance(keyed.c.uid.type, sa.String)
    rows = [{"uid": (f"{k:05d}" if texts else k), "src": f"s{k}"} for k in keys] + [{"uid": None, "src": f"n{i}"}
                                                                                     for i in range(nulls)]
    rng.shuffle(rows)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(keyed), rows)

    def pending_counts() -> tuple[int, int | None]:
        with db_engine.connect() as conn:
            exact = unfinished(conn, Registry([migration]), {"keyed_copy": ["r3"]}, exact=True)
            probed = unfinished(conn, Registry([migration]), {"keyed_copy": ["r3"]})
        return (exact[0].remaining if exact else 0), (probed[0].remaining if probed else 0)

    report = run(db_engine, Registry([migration]), RunOptions(batch_size=rng.choice((7, 50))))
    m = by_name(report)["keyed_copy"]
    assert report.exit_code == 8 and m.state == "error" and m.migrated == len(keys), m
    assert f"{nulls} pending row" in m.error and "NULL uid" in m.error, m.error
    exact, probed = pending_counts()
    assert exact == nulls and probed, (exact, probed)  # the gate refuses

    with db_engine.begin() as conn:  # the rows get keys: the migration can complete
        for i, rid in enumerate(conn.execute(sa.select(keyed.c.rid).where(keyed.c.uid.is_(None))).scalars()):
            conn.execute(sa.update(keyed).where(keyed.c.rid == rid).values(uid=f"z{i}" if texts else -1 - i))
    report = run(db_engine, Registry([migration]), RunOptions(batch_size=7))
    assert (report.exit_code, by_name(report)["keyed_copy"].migrated) == (0, nulls)
    assert pending_counts() == (0, 0)


@pytest.mark.parametrize("layout", ["top", "both ends and between"])
@pytest.mark.parametrize("seed", [1, 2])
def test_keys_at_both_ends_of_bigint(db_engine, seed, layout):
    """Keys near BIGINT's limits (random 64-bit ids): a probe window or step past 2**63 - 1 cannot
    be bound at all (SQLite's driver raised OverflowError in the gate's probe; the runner failed
    the migration).  Bounds are clamped to the limits, and such keys are walked by keyset."""
    import random

    rng = random.Random(seed)
    wide = sa.Table("wide", sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
                    sa.Column("src", sa.String(20)), sa.Column("dst", sa.String(20)))
    wt = sa.table("wide", sa.column("id", sa.BigInteger), sa.column("src", sa.String), sa.column("dst", sa.String))
    migration = DataMigration("wide_copy", table=wt, key="id", values={"dst": wt.c.src})
    wide.metadata.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    top, bottom = 2**63 - 1, -2**63
    keys = {top - rng.randrange(0, 5000) for _ in range(rng.randrange(20, 80))} | {top}
    if layout != "top":
        keys |= {bottom + rng.randrange(0, 5000) for _ in range(rng.randrange(0, 20))} | {bottom}
        keys |= {rng.randrange(-10**6, 10**6) for _ in range(rng.randrange(0, 30))}
    with db_engine.begin() as conn:
        conn.execute(sa.insert(wide), [{"id": k, "src": f"s{k % 97}"} for k in keys])
    with db_engine.connect() as conn:
        [before] = pending_migrations(conn, [migration])
        exact = unfinished(conn, Registry([migration]), {"wide_copy": ["r3"]}, exact=True)
    assert before.remaining and exact[0].remaining == len(keys)
    m = by_name(run(db_engine, Registry([migration]), RunOptions(batch_size=rng.choice((7, 64)))))["wide_copy"]
    assert (m.state, m.migrated, m.errors) == ("complete", len(keys), 0), m
    with db_engine.connect() as conn:
        [after] = pending_migrations(conn, [migration])
        assert after.remaining == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(wide).where(wide.c.dst.is_(None))).scalar() == 0
