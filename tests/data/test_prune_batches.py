"""A prune batch's cost does not grow with the statements it sends (issue 24).

* On PostgreSQL a batch deletes its rows in one statement (two when another table references the
  pruned one: the lock, then the judging DELETE), whatever its size: no keys sent back and forth in
  chunks of a thousand.  Everywhere, exactly the prunable rows of the batch's range that nothing
  references go, and with a shadow table exactly those are copied.
* A prune installs no completion triggers of its own (nothing reads a prune's completion; on
  MariaDB they were one row trigger per deleted row); a data migration's triggers on the same
  table still mark its deletes.

Generated cases; the seed is printed (``MP_TEST_SEED`` replays one)."""

from __future__ import annotations

import os
import random

import sqlalchemy as sa
from sqlalchemy import event

from migrations_policy.data import DataMigration, ledger

from migrations_policy.data.remaining import completion
from migrations_policy.data.declare import Batch
from migrations_policy.data.prune.deletion import Prune, as_migration, run_prunes
from migrations_policy.data.walk.runner import RunOptions

CASES = 4


def _seed() -> int:
    seed = int(os.environ.get("MP_TEST_SEED") or random.randrange(2**32))
    print(f"MP_TEST_SEED={seed}")
    return seed


def _tables(self_referencing: bool = False) -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    metadata = sa.MetaData()
    columns = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
               sa.Column("deleted", sa.Integer), sa.Column("label", sa.String(20))]
    if self_referencing:
        columns.append(sa.Column("parent_id", sa.Integer, sa.ForeignKey("pb_parents.id")))
    parents = sa.Table("pb_parents", metadata, *columns)
    shadow = sa.Table("pb_shadow", metadata, *(sa.Column(c.name, c.type) for c in parents.columns))
    children = sa.Table("pb_children", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                        sa.Column("parent_id", sa.Integer, sa.ForeignKey("pb_parents.id", ondelete="CASCADE")))
    return metadata, parents, shadow, children


def test_a_prune_batch_sends_a_bounded_number_of_statements(db_engine, backend):
    seed = _seed()
    rng = random.Random(seed)
    for case in range(CASES):
        metadata, parents, shadow_table, children = _tables()
        referenced, with_shadow = rng.random() < 0.5, rng.random() < 0.5
        count = rng.randint(1500, 5000)
        rows = [{"id": i, "deleted": 1 if rng.random() < 0.7 else None, "label": f"r{i}"} for i in range(1, count + 1)]
        kids = [{"id": n, "parent_id": rng.randint(1, count)} for n in range(1, rng.randint(1, count // 4) + 1)] \
            if referenced else []
        metadata.drop_all(db_engine)
        tables = [parents, shadow_table] + ([children] if referenced else [])
        metadata.create_all(db_engine, tables=tables)
        with db_engine.begin() as conn:
            conn.execute(sa.insert(parents), rows)
            if kids:
                conn.execute(sa.insert(children), kids)
        lower = rng.choice([None, rng.randint(0, count // 4)])
        upper = rng.randint(count // 2, count)
        what = (f"seed {seed} case {case}: {count} rows, keys ({lower}, {upper}], "
                f"{'referenced' if referenced else 'no reference'}, {'shadow' if with_shadow else 'no shadow'}")
        prune = Prune("pb", table=parents, key="id", where=parents.c.deleted.is_not(None),
                      shadow="pb_shadow" if with_shadow else None)
        sent: list[str] = []

        def count_statement(conn, cursor, statement, *args):
            sent.append(statement)

        with db_engine.connect() as conn:
            migration, _ = as_migration(prune, conn)
            conn.rollback()
            with conn.begin():
                event.listen(conn, "before_cursor_execute", count_statement)
                try:
                    deleted = migration.migrate(conn, Batch(migration, lower, upper))
                finally:
                    event.remove(conn, "before_cursor_execute", count_statement)
        held = {k["parent_id"] for k in kids}
        expected = {r["id"] for r in rows if r["deleted"] is not None and r["id"] not in held
                    and (lower is None or r["id"] > lower) and r["id"] <= upper}
        with db_engine.connect() as conn:
            left = set(conn.execute(sa.select(parents.c.id)).scalars())
            copied = set(conn.execute(sa.select(shadow_table.c.id)).scalars())
            kids_left = conn.execute(sa.select(sa.func.count()).select_from(children)).scalar() if referenced else 0
        assert deleted == len(expected), what
        assert left == {r["id"] for r in rows} - expected, what
        assert copied == (expected if with_shadow else set()), what
        assert kids_left == len(kids), what  # nothing cascaded
        if backend == "postgresql":
            assert len(sent) <= 1 + referenced, f"{what}: {len(sent)} statements for {len(expected)} rows"
        elif not with_shadow:
            assert len(sent) == 1, f"{what}: {len(sent)} statements"
        metadata.drop_all(db_engine)


def test_a_prune_leaves_no_completion_triggers_and_others_still_mark(db_engine, backend):
    """Nothing reads a prune's completion (status, check and the gate judge data migrations; its own
    run probes what remains), so a prune installs no mark triggers and records no proof: on
    MariaDB those were one row trigger per deleted row, and per application write ever after.
    The triggers of a data migration reading the same table still mark the prune's deletes."""
    seed = _seed()
    rng = random.Random(seed)
    for case in range(CASES):
        metadata, parents, _, _ = _tables()
        for table in (metadata, ledger.metadata, completion.metadata):
            table.drop_all(db_engine)
        metadata.create_all(db_engine, tables=[parents])
        ledger.metadata.create_all(db_engine)
        completion.metadata.create_all(db_engine)  # as where a data migration ran
        count = rng.randint(50, 800)
        rows = [{"id": i, "deleted": 1 if rng.random() < 0.6 else None, "label": None if rng.random() < 0.5 else "x"}
                for i in range(1, count + 1)]
        with db_engine.begin() as conn:
            conn.execute(sa.insert(parents), rows)
        other = DataMigration("pb_label", table=parents, key="id", values={"label": sa.literal("x")}) \
            if case % 2 == 0 else None  # a data migration whose predicate reads the pruned table
        if other is not None:
            assert completion.install(db_engine, other)
        prune = Prune("pb", table=parents, key="id", where=parents.c.deleted.is_not(None))
        older = rng.random() < 0.5  # an older release installed the prune's own triggers: they go
        if older:
            with db_engine.connect() as conn:
                as_prune = as_migration(prune, conn)[0]
            assert completion.install(db_engine, as_prune)
            assert _mine(db_engine, prune), "setup: the older release's triggers"
        report, _ = run_prunes(db_engine, [prune], RunOptions(batch_size=rng.randint(5, 100)))
        what = (f"seed {seed} case {case}: {count} rows{', beside a data migration' if other else ''}"
                f"{', after an older release installed its triggers' if older else ''}")
        assert report.exit_code == 0, what + report.text()
        with db_engine.connect() as conn:
            left = set(conn.execute(sa.select(parents.c.id)).scalars())
            triggers = completion.snapshot(conn).triggers
            proofs = set(conn.execute(sa.select(completion.proofs.c.migration)).scalars())
            marks = dict(conn.execute(sa.select(completion.dirty.c.migration, sa.func.count()).where(
                completion.dirty.c.session_id != 0).group_by(completion.dirty.c.migration)).all())
        assert left == {r["id"] for r in rows if r["deleted"] is None}, what
        assert not _mine(db_engine, prune), f"{what}: the prune's triggers are there"
        if other is not None:
            theirs = completion.trigger_name(other.name, "pb_parents")
            assert [name for name in triggers if name.startswith(theirs)], f"{what}: {other.name}'s triggers went"
        assert prune.ledger_name not in proofs and prune.ledger_name not in marks, what
        if other is not None and len(left) < count:
            assert marks.get(other.name), f"{what}: the prune's deletes left no mark for {other.name}"
        metadata.drop_all(db_engine)


def _mine(engine: sa.Engine, prune: Prune) -> list[str]:
    """The mark triggers named for *prune* on its table."""
    with engine.connect() as conn:
        triggers = completion.snapshot(conn).triggers
    mine = completion.trigger_name(prune.ledger_name, prune.table.name)
    return [name for name in triggers if name.startswith(mine)]
