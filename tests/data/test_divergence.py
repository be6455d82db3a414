"""Set-based migrations see divergence by construction, on every backend.

A copy ``values={"new": old}`` is pending while ``new`` IS DISTINCT FROM ``old``:
release N updating ``old`` after the row was copied (to another value, to NULL,
from NULL, only its case, only a trailing space) makes the row pending again;
the gate sees it and a rerun copies it.  The rows and the updates are generated
(seeded), and the expected counts are computed in Python from the rows read back.
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa

from migrations_policy.data import DataMigration, Registry, RunOptions, ledger, pending_migrations, run
from migrations_policy.gate.verdict import unfinished

metadata = sa.MetaData()
copies = sa.Table(
    "copies", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("old", sa.String(20)),
    sa.Column("new", sa.String(20)),
    sa.Column("num", sa.Integer),
    sa.Column("num_new", sa.BigInteger),
)
t = sa.table("copies", sa.column("id", sa.Integer), sa.column("old", sa.String), sa.column("new", sa.String),
             sa.column("num", sa.Integer), sa.column("num_new", sa.BigInteger))

# Values that a collation or a careless comparison would confuse with one another.
TEXTS = [None, "", "a", "A", "a ", "ab", "aB", "Ab ", "b", "é", "E"]


def migrations() -> Registry:
    return Registry([
        DataMigration("copies_old_to_new", table=t, key="id", values={"new": t.c.old}),
        DataMigration("copies_num_to_num_new", table=t, key="id", values={"num_new": t.c.num}),
    ])


def _number(rng: random.Random) -> int | None:
    return rng.choice([None, 0, 1, -1, 2**31 - 1, rng.randint(-1000, 1000)])


def _diverged(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(copies)).all()
    return {"copies_old_to_new": sum(r.old != r.new for r in rows),
            "copies_num_to_num_new": sum(r.num != r.num_new for r in rows)}


def _remaining(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {p.name: p.remaining for p in pending_migrations(conn, migrations(), exact=True)}


@pytest.mark.parametrize("seed", [1, 2])
def test_old_release_updates_after_the_copy_are_pending_again(db_engine, seed):
    rng = random.Random(seed)
    metadata.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    rows = 200
    with db_engine.begin() as conn:
        conn.execute(sa.insert(copies), [
            {"id": i, "old": rng.choice(TEXTS), "new": rng.choice(TEXTS), "num": _number(rng),
             "num_new": _number(rng)} for i in range(1, rows + 1)])
    assert _remaining(db_engine) == _diverged(db_engine)
    assert run(db_engine, migrations(), RunOptions(batch_size=37)).exit_code == 0
    assert _diverged(db_engine) == _remaining(db_engine) == {"copies_old_to_new": 0, "copies_num_to_num_new": 0}

    # Release N, still running, updates the old columns of some copied rows.
    changed = rng.sample(range(1, rows + 1), 60)
    with db_engine.begin() as conn:
        for key in changed:
            conn.execute(sa.update(copies).where(copies.c.id == key).values(
                old=rng.choice(TEXTS), num=_number(rng)))
    expected = _diverged(db_engine)
    assert expected["copies_old_to_new"] > 0 and expected["copies_num_to_num_new"] > 0
    assert _remaining(db_engine) == expected
    with db_engine.connect() as conn:  # the contract gate refuses while any is pending
        refused = {p.name: p.remaining for p in unfinished(conn, migrations(), {
            "copies_old_to_new": ["r3"], "copies_num_to_num_new": ["r3"]}, exact=True)}
    assert refused == expected  # (without exact=True the gate's counts are the planner's estimates)

    report = run(db_engine, migrations(), RunOptions(batch_size=37))
    assert report.exit_code == 0
    assert {m.name: m.migrated for m in report.migrations} == expected
    assert _diverged(db_engine) == _remaining(db_engine) == {"copies_old_to_new": 0, "copies_num_to_num_new": 0}
    with db_engine.connect() as conn:
        assert unfinished(conn, migrations(), {"copies_old_to_new": ["r3"]}) == []


def test_extra_condition_narrows_and_a_stuck_row_is_reported(db_engine):
    """``pending=`` is ANDed to the divergence; a value that never converges is stuck, not looped on."""
    metadata.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(copies), [{"id": i, "old": f"v{i}", "num": i} for i in range(1, 21)])
    only_even = DataMigration("copies_even", table=t, key="id", values={"new": t.c.old}, pending=t.c.num % 2 == 0)
    report = run(db_engine, Registry([only_even]), RunOptions(batch_size=7))
    assert (report.exit_code, report.migrations[0].migrated) == (0, 10)
    with db_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).where(copies.c.new.is_not(None))).scalar() == 10
    # new = upper(old) + random-looking suffix from the row itself can converge; new = new || 'x' never can.
    never = DataMigration("copies_never", table=t, key="id", values={"new": sa.func.coalesce(t.c.new, "") + "x"})
    report = run(db_engine, Registry([never]), RunOptions(batch_size=7))
    assert report.exit_code != 0
    assert report.migrations[0].stuck == 20


#: A case-insensitive collation per backend: PostgreSQL's ICU collations may be nondeterministic
#: (equal for 'ABC' and 'abc'), and a cast to text keeps the column's collation.
_CASE_BLIND = {"postgresql": "mp_case_blind", "mysql": "utf8mb4_general_ci", "sqlite": "NOCASE"}


@pytest.mark.parametrize("seed", [3, 4])
def test_a_case_blind_column_collation_hides_no_change(db_engine, backend, seed):
    """Columns whose own collation calls 'ABC' and 'abc' equal: a change of case or trailing
    space by release N is still pending (set-based predicate, exact and estimated gate) and still
    copied by the sync triggers, exactly as Python compares the values read back."""
    from migrations_policy.window.sync_triggers import SyncPair, create_statements

    rng = random.Random(seed)
    if backend == "postgresql":
        with db_engine.begin() as conn:
            conn.exec_driver_sql("CREATE COLLATION mp_case_blind "
                                 "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
    collation = _CASE_BLIND[backend]
    blind = sa.Table("blind", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                     sa.Column("old", sa.String(20, collation=collation)),
                     sa.Column("new", sa.String(20, collation=collation)))
    bt = sa.table("blind", sa.column("id", sa.Integer), sa.column("old", sa.String), sa.column("new", sa.String))
    copy = Registry([DataMigration("blind_old_to_new", table=bt, key="id", values={"new": bt.c.old})])
    blind.metadata.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    rows = 120
    with db_engine.begin() as conn:
        conn.execute(sa.insert(blind), [{"id": i, "old": rng.choice(TEXTS)} for i in range(1, rows + 1)])
    assert run(db_engine, copy, RunOptions(batch_size=17)).exit_code == 0

    def diverged() -> int:
        with db_engine.connect() as conn:
            return sum(r.old != r.new for r in conn.execute(sa.select(blind)))

    def remaining(exact: bool) -> int:
        with db_engine.connect() as conn:
            found = unfinished(conn, copy, {"blind_old_to_new": ["r3"]}, exact=exact)
        return found[0].remaining if found else 0

    # Release N changes only the case (or a trailing space) of copied values.
    def variant(text: str | None) -> str | None:
        return None if text is None else rng.choice([text.upper(), text.lower(), text.swapcase(), text + " "])

    changed = rng.sample(range(1, rows + 1), 40)
    with db_engine.begin() as conn:
        for key in changed:
            old = conn.execute(sa.select(blind.c.old).where(blind.c.id == key)).scalar()
            conn.execute(sa.update(blind).where(blind.c.id == key).values(old=variant(old) or "X"))
    expected = diverged()
    assert expected > 0
    assert remaining(exact=True) == expected
    assert remaining(exact=False) > 0  # the gate refuses (its count is the planner's estimate)
    assert run(db_engine, copy, RunOptions(batch_size=17)).exit_code == 0
    assert diverged() == remaining(exact=True) == 0

    # With the pair's sync triggers, release N's change of case reaches the new column at once.
    with db_engine.begin() as conn:
        for ddl in create_statements(SyncPair("blind", "old", "new"), conn.dialect):
            conn.execute(ddl)
    with db_engine.begin() as conn:
        for key in rng.sample(range(1, rows + 1), 40):
            old = conn.execute(sa.select(blind.c.old).where(blind.c.id == key)).scalar()
            conn.execute(sa.update(blind).where(blind.c.id == key).values(old=variant(old) or "Y"))
    assert diverged() == remaining(exact=True) == 0
