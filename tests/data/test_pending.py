"""What remains, at the cost of what is pending (``migrations_policy.data.remaining.pending``): the first pending
row decides, the count is the planner's estimate unless exact, 0 is always verified, and nothing is
remembered — rows that old code makes pending again are seen by the very next gate or ``check``."""

from __future__ import annotations

import random
import threading

import pytest
import sqlalchemy as sa

from migrations_policy.gate import verdict as gate
from migrations_policy.data import DataMigration, Registry, RunOptions, ledger, pending_migrations, run
from migrations_policy.data.remaining.pending import has_pending

from .support import create_schema, items, scalar

t = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
PENDING = sa.and_(t.c.dst.is_(None), t.c.src.is_not(None))
COPY = DataMigration("copy_items", table=t, key="id", pending=PENDING, values={"dst": t.c.src, "n": t.c.n + 1})


def remaining(engine, exact=False):
    with engine.connect() as conn:
        [found] = pending_migrations(conn, Registry([COPY]), exact=exact)
    return found


def refused(engine) -> bool:
    with engine.connect() as conn:
        return bool(gate.unfinished(conn, Registry([COPY]), {"copy_items": ["r3_contract"]}))


def test_pending_is_found_counted_exactly_on_request_and_zero_is_verified(db_engine, backend):
    rng = random.Random()
    rows = rng.randint(200, 900)
    create_schema(db_engine, rows=rows)
    found = remaining(db_engine)
    assert found.remaining >= 1 and found.estimated == (backend != "sqlite")
    assert remaining(db_engine, exact=True) == ("copy_items", rows, "never run", False)
    budget = rng.randint(1, rows - 1)
    run(db_engine, Registry([COPY]), RunOptions(batch_size=rng.randint(7, 100), max_count=budget))
    with db_engine.connect() as conn:
        assert ledger.last_key(conn, "copy_items") is not None  # the probe starts past the cursor
    assert remaining(db_engine).remaining >= 1 and refused(db_engine)
    assert remaining(db_engine, exact=True).remaining == rows - budget
    run(db_engine, Registry([COPY]), RunOptions(batch_size=100))
    assert remaining(db_engine) == ("copy_items", 0, "complete", False)
    assert not refused(db_engine)


def test_one_row_made_pending_anywhere_behind_or_past_the_cursor_refuses_the_gate(db_engine):
    rng = random.Random()
    rows = rng.randint(300, 1500)
    create_schema(db_engine, rows=rows)
    run(db_engine, Registry([COPY]), RunOptions(batch_size=500))
    existing = list(range(1, rows + 1))
    for _ in range(6):
        with db_engine.begin() as conn:  # release-N code: writes src, leaves dst NULL (or inserts a new row)
            if rng.random() < 0.7:
                key = rng.choice(existing)
                conn.execute(sa.update(items).where(items.c.id == key).values(src="again", dst=None))
            else:
                key = existing[-1] + rng.randint(1, 50)
                conn.execute(sa.insert(items).values(id=key, src="new"))
                existing.append(key)
        assert refused(db_engine), key
        assert remaining(db_engine, exact=True).remaining == 1
        assert run(db_engine, Registry([COPY]), RunOptions(batch_size=500)).exit_code == 0
        assert not refused(db_engine)


def test_text_keys_probe_past_the_cursor_too(db_engine):
    words = sa.Table("words", sa.MetaData(), sa.Column("word", sa.String(20), primary_key=True),
                     sa.Column("upper", sa.String(20)))
    words.create(db_engine)
    ledger.metadata.create_all(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(words), [{"word": f"w{i:04d}"} for i in range(300)])
    w = sa.table("words", sa.column("word"), sa.column("upper"))
    upper = DataMigration("upper_words", table=w, key="word", pending=w.c.upper.is_(None),
                          values={"upper": sa.func.upper(w.c.word)})
    run(db_engine, Registry([upper]), RunOptions(batch_size=40, max_count=120))
    with db_engine.connect() as conn:
        last = ledger.last_key(conn, "upper_words")
        assert last is not None and has_pending(conn, upper, last)
        assert pending_migrations(conn, Registry([upper]), exact=True)[0].remaining == 180
    run(db_engine, Registry([upper]), RunOptions(batch_size=40))
    with db_engine.connect() as conn:
        assert not has_pending(conn, upper, ledger.last_key(conn, "upper_words"))


def test_the_gate_never_passes_while_a_writer_keeps_dirtying_rows(db_engine, backend):
    """No completion is remembered: whenever the writer has committed a dirtying (it never fixes one),
    the gate refuses; once the runner has caught up and the writer is stopped, it passes."""
    rng = random.Random()
    rows = 600
    create_schema(db_engine, rows=rows)
    for _ in range(3):
        assert run(db_engine, Registry([COPY]), RunOptions(batch_size=200)).exit_code == 0
        assert not refused(db_engine)
        committed, stop = [0], threading.Event()
        seed = rng.randrange(10**6)

        def old_release() -> None:
            local = random.Random(seed)
            while not stop.is_set() and committed[0] < 40:
                with db_engine.begin() as conn:
                    key = local.randint(1, rows)
                    conn.execute(sa.update(items).where(items.c.id == key).values(src=f"s{key}", dst=None))
                committed[0] += 1
                stop.wait(0.005)

        writer = threading.Thread(target=old_release)
        writer.start()
        try:
            for _ in range(30):
                seen = committed[0]
                verdict = refused(db_engine)
                if seen:
                    assert verdict, f"the gate passed after {seen} committed dirtyings"
        finally:
            stop.set()
            writer.join()
        assert refused(db_engine)
        assert remaining(db_engine, exact=True).remaining == scalar(
            db_engine, sa.select(sa.func.count()).where(items.c.dst.is_(None)))
    assert run(db_engine, Registry([COPY]), RunOptions(batch_size=200)).exit_code == 0
    assert not refused(db_engine)


def test_stop_at_pending_probes_unfinished_migrations_first_and_stops_there(db_engine):
    """``check`` needs one unfinished migration: it never reads a complete table through (the one
    probe that grows with it) once another migration has rows remaining; the gate reads every one."""
    rng = random.Random()
    create_schema(db_engine, rows=rng.randint(50, 300))
    done = DataMigration("already_done", table=t, key="id", pending=t.c.n < 0, values={"n": 0})
    assert run(db_engine, Registry([done]), RunOptions()).exit_code == 0  # the ledger says complete
    registry = Registry([done, COPY] if rng.random() < 0.5 else [COPY, done])
    with db_engine.connect() as conn:
        probed = pending_migrations(conn, registry, stop_at_pending=True)
        assert [(p.name, p.remaining > 0) for p in probed] == [("copy_items", True)]
        # check hands the gate what it read: the refusal is settled, the complete table is not read.
        verdict = gate.unfinished(conn, registry, {"already_done": ["r3"], "copy_items": ["r3"]}, known=probed)
        assert {(p.name, p.state) for p in verdict} == {("copy_items", "never run"), ("already_done", "not checked")}
        assert "not checked" in " ".join(p.describe() for p in verdict)
        # The gate itself reads every required migration: only the unfinished one is listed.
        verdict = gate.unfinished(conn, registry, {"already_done": ["r3"], "copy_items": ["r3"]})
        assert [(p.name, p.state) for p in verdict] == [("copy_items", "never run")]
        # A --force record counts every required migration exactly: nothing is skipped.
        forced = gate.unfinished(conn, registry, {"already_done": ["r3"], "copy_items": ["r3"]}, exact=True)
        assert [(p.name, p.estimated) for p in forced] == [("copy_items", False)]
    run(db_engine, registry, RunOptions())
    with db_engine.connect() as conn:
        assert {p.name: p.remaining for p in pending_migrations(conn, registry, stop_at_pending=True)} == \
            {"already_done": 0, "copy_items": 0}  # nothing pending: every migration was proven complete
        assert gate.unfinished(conn, registry, {"already_done": ["r3"], "copy_items": ["r3"]}) == []


def test_the_probe_finds_any_pending_row_window_by_window(db_engine, monkeypatch):
    """The probe looks in first windows of the key's index (a few keys here), then the rest: sparse
    integer keys or text keys, an anti-join predicate (NOT EXISTS over another table, as the example's
    orphan check), cursors anywhere (on a key, between keys, past the end): a pending row is found
    wherever it is, at a window's edge too, and nothing is reported when none is."""
    from migrations_policy.data.remaining import pending as pending_module

    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng = random.Random(seed)
    monkeypatch.setattr(pending_module, "PROBE_WINDOW", rng.randint(1, 9))
    text_keys = rng.random() < 0.4
    key_type = sa.String(20) if text_keys else sa.Integer()
    meta = sa.MetaData()
    targets = sa.Table("targets", meta, sa.Column("id", key_type, primary_key=True, autoincrement=False))
    refs = sa.Table("refs", meta, sa.Column("id", key_type, primary_key=True, autoincrement=False),
                    sa.Column("target_id", key_type))
    meta.create_all(db_engine)
    count = rng.randint(20, 80)  # sparse, or dense with a few gaps (integer windows end inside the keys)
    numbers = rng.sample(range(1, rng.choice([100_000, count + 1 + rng.randint(0, 5)])), count)
    # text keys sort as text, not as the numbers they spell (the windows must not assume either)
    keys = sorted(f"k{n}" for n in numbers) if text_keys else sorted(numbers)
    missing = (lambda k: f"gone-{k}") if text_keys else (lambda k: 100_000 + k)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(targets), [{"id": k} for k in keys])
        conn.execute(sa.insert(refs), [{"id": k, "target_id": k if rng.random() < 0.8 else None} for k in keys])
    r, tg = sa.table("refs", sa.column("id", key_type), sa.column("target_id", key_type)), sa.table(
        "targets", sa.column("id", key_type))
    orphans = DataMigration("orphans", table=r, key="id", values={"target_id": None},
                            pending=sa.and_(r.c.target_id.is_not(None),
                                            ~sa.exists().where(tg.c.id == r.c.target_id)))
    window = pending_module.PROBE_WINDOW
    for trial in range(20):
        chosen = rng.sample(keys, rng.choice([0, 0, 1, 1, 2, 3]))
        at = rng.randrange(-1, len(keys) - window - 1)  # every other trial: the one orphan is a window's
        if trial % 2:                                       # last key, or the first key after it
            chosen = [keys[at + window + rng.randint(0, 1)]]
        with db_engine.begin() as conn:
            conn.execute(sa.update(refs).where(~sa.exists().where(targets.c.id == refs.c.target_id))
                         .values(target_id=None))
            for key in chosen:  # point at a target that does not exist
                conn.execute(sa.update(refs).where(refs.c.id == key).values(target_id=missing(key)))
        if text_keys:
            cursors = [None, rng.choice(keys), f"k{rng.randint(0, 100_001)}", "", keys[-1], keys[-1] + "~",
                       None if at < 0 else keys[at]]
        else:
            cursors = [None, rng.choice(keys), rng.randint(0, 100_001), keys[0] - 1, keys[-1], keys[-1] + 5,
                       None if at < 0 else keys[at]]
        with db_engine.connect() as conn:
            for cursor in cursors:
                found = has_pending(conn, orphans, None if cursor is None else str(cursor))
                assert found == bool(chosen), (seed, text_keys, trial, chosen, cursor, pending_module.PROBE_WINDOW)


def _temporary_tables(conn) -> int:
    return int(conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Created_tmp_tables'").one()[1])


def test_probes_and_counts_never_copy_the_other_table_on_mariadb(db_engine, backend):
    """An anti-join pending predicate (NOT EXISTS a target) is evaluated by index lookups on MariaDB: no
    temporary table is created for it (MariaDB materialized the whole other table for every probe and
    count: 17.7 s instead of 3.2 s at 1M rows), the answers are right, and the session's optimizer
    settings are as they were afterwards, also after a nested use and an error."""
    if backend != "mysql":
        pytest.skip("materialized subqueries are MariaDB/MySQL's plan; the answers are tested on every backend above")
    from migrations_policy.data.remaining.pending import count_pending, index_lookups

    seed = random.Random().randrange(1 << 30)
    rng = random.Random(seed)
    meta = sa.MetaData()
    targets = sa.Table("targets", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))
    refs = sa.Table("refs", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("target_id", sa.Integer))
    meta.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    size = rng.randint(200, 3000)
    orphans = set(rng.sample(range(1, size + 1), rng.choice([0, 1, rng.randint(2, 20)])))
    with db_engine.begin() as conn:
        conn.execute(sa.insert(targets), [{"id": k} for k in range(1, size + 1)])
        conn.execute(sa.insert(refs), [{"id": k, "target_id": k + size * (k in orphans)} for k in range(1, size + 1)])
    r, tg = sa.table("refs", sa.column("id", sa.Integer), sa.column("target_id", sa.Integer)), sa.table(
        "targets", sa.column("id", sa.Integer))
    migration = DataMigration("orphans", table=r, key="id", values={"target_id": None},
                              pending=sa.and_(r.c.target_id.is_not(None), ~sa.exists().where(tg.c.id == r.c.target_id)))
    with db_engine.connect() as conn:
        # MariaDB's subquery result cache is a temporary table of its own: off, the counter counts
        # only materializations (index_lookups changes no other flag of the session)
        conn.exec_driver_sql("SET SESSION optimizer_switch = 'subquery_cache=off'")
        settings = conn.exec_driver_sql("SELECT @@session.optimizer_switch").scalar()
        made = []  # temporary tables created by each statement that evaluates the predicate

        def counter(cursor) -> int:
            reader = cursor.connection.cursor()  # the same session, between two statements
            reader.execute("SHOW SESSION STATUS LIKE 'Created_tmp_tables'")
            return int(reader.fetchone()[1])

        def before(_conn, cursor, statement, *_):
            if "EXISTS" in statement:
                made.append(-counter(cursor))

        def after(_conn, cursor, statement, *_):
            if "EXISTS" in statement:
                made[-1] += counter(cursor)

        sa.event.listen(conn, "before_cursor_execute", before)
        sa.event.listen(conn, "after_cursor_execute", after)
        for label, call, expected in (
                ("probe", lambda: has_pending(conn, migration), bool(orphans)),
                ("count", lambda: count_pending(conn, migration), len(orphans)),
                ("status", lambda: pending_migrations(conn, Registry([migration]), exact=True)[0].remaining, len(orphans)),
                ("gate", lambda: pending_migrations(conn, Registry([migration]))[0].remaining > 0, bool(orphans))):
            made.clear()
            assert call() == expected, (seed, label)
            assert made and not any(made), (seed, label, f"temporary tables per statement: {made}")
            assert conn.exec_driver_sql("SELECT @@session.optimizer_switch").scalar() == settings, (seed, label)
        with pytest.raises(sa.exc.DBAPIError):
            with index_lookups(conn):
                with index_lookups(conn):
                    conn.exec_driver_sql("SELECT no_such_column FROM refs")
        conn.rollback()
        assert conn.exec_driver_sql("SELECT @@session.optimizer_switch").scalar() == settings, seed


def test_probes_run_in_one_process_and_counts_in_parallel_on_postgresql(db_engine, backend, monkeypatch):
    """PostgreSQL: the probes of the first windows run without parallel workers (starting them cost
    more than finding the row), the full counts and the probe of a table's rest keep the session's
    setting, and the setting is what it was after every call, after nested uses, and after an error
    once the transaction is rolled back."""
    if backend != "postgresql":
        pytest.skip("parallel plans are PostgreSQL's")
    from migrations_policy.data.remaining import pending as pending_module
    from migrations_policy.data.remaining.pending import count_pending, one_row_plans

    seed = random.Random().randrange(1 << 30)
    rng = random.Random(seed)
    monkeypatch.setattr(pending_module, "PROBE_WINDOW", rng.randint(1, 40))  # windows, and a rest behind them
    meta = sa.MetaData()
    items = sa.Table("items", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                     sa.Column("src", sa.String(20)), sa.Column("dst", sa.String(20)))
    meta.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    size = rng.randint(50, 2000)
    pending_keys = set(rng.sample(range(1, size + 1), rng.choice([0, 1, rng.randint(2, 30)])))
    with db_engine.begin() as conn:
        conn.execute(sa.insert(items), [{"id": k, "src": f"v{k}", "dst": None if k in pending_keys else f"v{k}"}
                                        for k in range(1, size + 1)])
    t = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"))
    migration = DataMigration("copy", table=t, key="id", values={"dst": t.c.src}, pending=t.c.dst.is_(None))
    session_value = str(rng.randint(1, 4))
    with db_engine.connect() as conn:
        conn.exec_driver_sql(f"SET max_parallel_workers_per_gather = {session_value}")  # a constant of the test
        conn.commit()
        seen = []  # (statement, the setting it ran with)

        def before(_conn, cursor, statement, *_):
            if "items" in statement and "set_config" not in statement:
                reader = cursor.connection.cursor()  # the same session and transaction
                reader.execute("SELECT current_setting('max_parallel_workers_per_gather')")
                seen.append((statement, reader.fetchone()[0]))

        sa.event.listen(conn, "before_cursor_execute", before)
        for label, call, expected in (
                ("probe", lambda: has_pending(conn, migration), bool(pending_keys)),
                ("count", lambda: count_pending(conn, migration), len(pending_keys)),
                ("exact", lambda: pending_migrations(conn, Registry([migration]), exact=True)[0].remaining,
                 len(pending_keys)),
                ("gate", lambda: pending_migrations(conn, Registry([migration]))[0].remaining > 0,
                 bool(pending_keys))):
            seen.clear()
            assert call() == expected, (seed, label)
            counts = [value for statement, value in seen if "count(" in statement]
            probes = [(statement, value) for statement, value in seen if "LIMIT" in statement and "OFFSET" not in statement]
            windows = [value for statement, value in probes if "<=" in statement]
            rests = [value for statement, value in probes if "<=" not in statement]  # no cursor: the rest is "id >"
            # the full counts keep the session's setting; the gate's estimate is a bounded sample
            # (data/remaining/estimate.py: at most 8,192 rows), read like a probe
            full_counts = counts if label in ("count", "exact") else []
            assert all(value == session_value for value in full_counts + rests), (seed, label, seen)
            assert all(value == "0" for value in windows), (seed, label, seen)
            if label in ("probe", "gate") and not pending_keys:
                assert rests, (seed, label, seen)  # nothing pending: the rest of the table was read
            if label in ("probe", "gate"):
                assert windows, (seed, label, seen)  # the first window was probed
            assert conn.exec_driver_sql("SHOW max_parallel_workers_per_gather").scalar() == session_value, \
                (seed, label)
        with pytest.raises(sa.exc.DBAPIError):
            with one_row_plans(conn):
                with one_row_plans(conn):
                    conn.exec_driver_sql("SELECT no_such_column FROM items")
        conn.rollback()
        assert conn.exec_driver_sql("SHOW max_parallel_workers_per_gather").scalar() == session_value, seed
