"""Sync triggers on every backend: release N writes only the old column, release N+1
only the new one, and each sees the other's writes, one statement after another
and under concurrent writers; contract removes them; a stale one is found.

Two pairs on one table: ``name -> label`` (a rename, both directions identity) and
``code -> short`` with a lossy ``up`` (the first 5 characters), which would bounce
back through the reverse trigger on SQLite without the out-of-step guard.
Statements and values are generated (seeded); values include NULL and case-only
changes (invisible to MariaDB's default collation without the exact comparison).
"""

from __future__ import annotations

import random
import threading

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from migrations_policy.window import sync_triggers
from migrations_policy.data import DataMigration
from migrations_policy.window.sync_triggers import sync_trigger_name, stale_sync_triggers

metadata = sa.MetaData()
things = sa.Table(
    "things", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(40)), sa.Column("label", sa.String(40)),
    sa.Column("code", sa.String(40)), sa.Column("short", sa.String(5)),
)
WORDS = [None, "a", "A", "ab", "aB", "alpha", "Alpha", "bravo-charlie", "x" * 30]


def short(value):
    return None if value is None else value[:5]


def _install(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_sync_trigger("things", old="name", new="label")
        op.create_sync_trigger("things", old="code", new="short",
                               up=sa.func.substr(sa.column("code", sa.String), 1, 5))


def _uninstall(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.drop_sync_trigger("things", old="name", new="label")
        op.drop_sync_trigger("things", old="code", new="short")


def _row(conn, key):
    """The row as committed now (its own short transaction)."""
    row = conn.execute(sa.select(things).where(things.c.id == key)).one()
    conn.rollback()
    return row


def _engine(url: sa.URL) -> sa.Engine:
    args = {"timeout": 60} if url.get_backend_name() == "sqlite" else {}
    return sa.create_engine(url, connect_args=args, pool_size=8)


def _write_old(conn, key, name, code, insert):
    """Release N: knows only name and code."""
    if insert:
        conn.execute(sa.insert(things).values(id=key, name=name, code=code))
    else:
        conn.execute(sa.update(things).where(things.c.id == key).values(name=name, code=code))


def _write_new(conn, key, label, short_, insert):
    """Release N+1 (this one writes only the new columns)."""
    if insert:
        conn.execute(sa.insert(things).values(id=key, label=label, short=short_))
    else:
        conn.execute(sa.update(things).where(things.c.id == key).values(label=label, short=short_))


def test_each_release_sees_the_others_writes(db_url):
    engine = _engine(db_url)
    metadata.create_all(engine)
    _install(engine)
    rng = random.Random(7)
    keys: list[int] = []
    with engine.connect() as conn:
        for step in range(300):
            insert = not keys or rng.random() < 0.2
            key = len(keys) + 1 if insert else rng.choice(keys)
            if rng.random() < 0.5:
                name, code = rng.choice(WORDS), rng.choice(WORDS)
                if insert and name is None and code is None:
                    name = "n"
                with conn.begin():
                    _write_old(conn, key, name, code, insert)
                row = _row(conn, key)
                assert (row.name, row.label, row.code, row.short) == (name, name, code, short(code)), step
            else:
                label, short_ = rng.choice(WORDS), short(rng.choice(WORDS))
                if insert and label is None and short_ is None:
                    label = "l"
                before = None if insert else _row(conn, key)
                with conn.begin():
                    _write_new(conn, key, label, short_, insert)
                row = _row(conn, key)
                # a column written with the value it had is not a change: the old one stays
                code = before.code if before is not None and before.short == short_ else short_
                assert (row.name, row.label, row.code, row.short) == (label, label, code, short_), step
            if insert:
                keys.append(key)
        with conn.begin():  # release N+1 writing both columns: left as written
            conn.execute(sa.update(things).where(things.c.id == 1).values(name="both", label="both", code="c1",
                                                                          short="c1"))
        assert tuple(_row(conn, 1))[1:] == ("both", "both", "c1", "c1")
        names = {found.trigger for found in sync_triggers.sync_triggers(conn)}
        conn.rollback()
    assert len(names) == {"postgresql": 2, "mysql": 4, "sqlite": 8}[engine.dialect.name]
    _uninstall(engine)
    with engine.connect() as conn:
        assert sync_triggers.sync_triggers(conn) == []
        conn.rollback()
        with conn.begin():
            _write_old(conn, 1, "after", "after", insert=False)
        assert tuple(_row(conn, 1))[1:] == ("after", "both", "after", "c1")  # no trigger any more
    engine.dispose()


def test_concurrent_writers_see_each_other(db_url):
    """Two release-N writers and two release-N+1 writers on their own rows plus inserts, at once;
    after each commit the writer reads the other release's column back from a new transaction."""
    engine = _engine(db_url)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(things), [{"id": k, "name": f"v{k}", "code": f"code{k}"} for k in range(1, 41)])
    _install(engine)
    errors: list[str] = []

    def writer(index: int, old_release: bool) -> None:
        rng = random.Random(index)
        mine = [k for k in range(1, 41) if k % 4 == index]
        try:
            with engine.connect() as conn:
                for step in range(60):
                    insert = step % 5 == 0
                    key = 1000 + index * 100 + step if insert else rng.choice(mine)
                    value = f"{'old' if old_release else 'new'}-{index}-{step}-{rng.choice('aA')}"
                    for attempt in range(5):  # MariaDB/PostgreSQL may pick one of us as a deadlock victim
                        try:
                            with conn.begin():
                                if old_release:
                                    _write_old(conn, key, value, value, insert)
                                else:
                                    _write_new(conn, key, value, short(value), insert)
                            break
                        except sa.exc.OperationalError:
                            if attempt == 4:
                                raise
                    row = _row(conn, key)
                    expected = (value, value, value, short(value)) if old_release else \
                        (value, value, short(value), short(value))
                    if (row.name, row.label, row.code, row.short) != expected:
                        errors.append(f"writer {index} step {step}: {tuple(row)} != {expected}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(f"writer {index}: {exc!r}")

    threads = [threading.Thread(target=writer, args=(i, i % 2 == 0)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with engine.connect() as conn:
        rows = conn.execute(sa.select(things)).all()
    assert len(rows) == 40 + 4 * 12
    assert all(r.name == r.label and short(r.code) == r.short for r in rows)
    engine.dispose()


def test_stale_trigger_after_the_column_is_dropped(db_url):
    engine = _engine(db_url)
    metadata.create_all(engine)
    _install(engine)
    with engine.connect() as conn:
        assert stale_sync_triggers(conn) == []
    if engine.dialect.name != "mysql":  # PostgreSQL (UPDATE OF makes the trigger depend on the
        # columns) and SQLite refuse to drop a column a sync trigger uses: a forgotten
        # drop_sync_trigger fails the contract, in its transaction, before any harm
        with pytest.raises(sa.exc.DBAPIError, match="depend|trigger"), engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE things DROP COLUMN label"))
        return
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE things DROP COLUMN label"))
    with engine.connect() as conn:
        stale = stale_sync_triggers(conn)
    assert {(s.table, s.old, s.new) for s in stale} == {("things", "name", "label")}
    with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:  # what it would do to every write
        conn.execute(sa.insert(things).values(id=1, name="x"))
    engine.dispose()


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_names_are_deterministic_quoted_and_fit(dialect):
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    d = {"postgresql": postgresql.dialect(), "mysql": mysql.dialect(), "sqlite": sqlite.dialect()}[dialect]
    rng = random.Random(3)
    seen = set()
    for _ in range(200):
        parts = ["".join(rng.choice('abcXYZ_ "é%`') for _ in range(rng.randint(1, 80))) for _ in range(3)]
        name = sync_trigger_name(*parts)
        assert name == sync_trigger_name(*parts) and len(name.encode()) + 8 <= 63
        assert name not in seen
        seen.add(name)
        pair = sync_triggers.SyncPair(*parts)
        text = "\n".join(str(s.compile(dialect=d)) for s in sync_triggers.create_statements(pair, d))
        assert all(d.identifier_preparer.quote(part) in text for part in parts)


def test_awkward_identifiers_are_quoted(db_url):
    """Quotes, backticks, spaces, %, upper case in the table and column names: the triggers work."""
    table, old, new = 'od"d `t%ble', "Old %s col", "new`'col"
    engine = _engine(db_url)
    awkward = sa.Table(table, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                       sa.Column(old, sa.String(20)), sa.Column(new, sa.String(20)))
    awkward.create(engine)
    with engine.begin() as conn:
        Operations(MigrationContext.configure(conn)).create_sync_trigger(table, old=old, new=new)
        conn.execute(sa.insert(awkward).values({"id": 1, old: "x%y"}))
        conn.execute(sa.insert(awkward).values({"id": 2, new: "it's"}))
        assert conn.execute(sa.select(awkward).order_by(awkward.c.id)).all() == [(1, "x%y", "x%y"),
                                                                               (2, "it's", "it's")]
        assert [(f.table, f.old, f.new) for f in sync_triggers.sync_triggers(conn)][:1] == [(table, old, new)]
    engine.dispose()


def test_json_columns(db_url):
    """PostgreSQL's json type has no equality operator: the triggers compare it as text."""
    engine = _engine(db_url)
    docs = sa.Table("docs", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("a", sa.JSON), sa.Column("b", sa.JSON))
    docs.create(engine)
    with engine.begin() as conn:
        Operations(MigrationContext.configure(conn)).create_sync_trigger("docs", old="a", new="b")
        conn.execute(sa.insert(docs).values(id=1, a={"k": [1, 2]}))
        conn.execute(sa.update(docs).where(docs.c.id == 1).values(a={"k": "A"}))
        conn.execute(sa.insert(docs).values(id=2, b={"n": None}))
        conn.execute(sa.update(docs).where(docs.c.id == 2).values(b={"n": 1}))
        assert conn.execute(sa.select(docs).order_by(docs.c.id)).all() == [
            (1, {"k": "A"}, {"k": "A"}), (2, {"n": 1}, {"n": 1})]
    copy = DataMigration("docs_a_to_b", table=sa.table("docs", sa.column("id"), sa.column("a", sa.JSON),
                                                       sa.column("b", sa.JSON)), key="id", values={"b": sa.column("a")})
    with engine.connect() as conn:  # the divergence predicate on JSON columns works too
        assert conn.execute(sa.select(sa.func.count()).select_from(copy.table).where(copy.pending)).scalar() == 0
    engine.dispose()
