"""A remembered completion (``data/remaining/completion.py``) never outlives a write that makes a row pending
again, whatever SQL release N writes it with.

``status``/``check`` trust a proof while no mark trigger fired since; the gate recounts.  A write
that fires no row trigger left the proof standing: MariaDB's ``TRUNCATE`` (it re-creates the table
and runs no ``DELETE`` trigger) of the table a ``NOT EXISTS`` reads made every port an orphan while
``status`` still said 0 remaining and ``check`` "contract allowed".

Generated: two migrations complete and proven (``orphans``: ports whose node is gone, a
``NOT EXISTS`` over ``nodes``; ``copy``: items whose ``dst`` differs from ``src``), then rounds of
one drawn release-N write per backend's SQL (an ``INSERT``, ``UPDATE``, ``DELETE``, ``TRUNCATE``,
``REPLACE``, an upsert, MariaDB's multi-table ``DELETE``/``UPDATE``, a delete cascading from a
grandparent table) that makes rows pending again.  After each: what ``status``/``check`` read
(``remember=True``) counts the rows the gate counts (never 0 while some are pending), and the gate
refuses; the migration then runs to the end and both say complete again.
Seeded: ``MP_COMPLETION_WRITES_SEED``; ``MP_COMPLETION_WRITES_ROUNDS`` (default 6).
"""

from __future__ import annotations

import os
import random

import sqlalchemy as sa

from migrations_policy.data import DataMigration, Registry, RunOptions, ledger, pending_migrations, run
from migrations_policy.gate import verdict as gate

ROUNDS = int(os.environ.get("MP_COMPLETION_WRITES_ROUNDS", "6"))

meta = sa.MetaData()
racks = sa.Table("racks", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False))
nodes = sa.Table("nodes", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("rack_id", sa.Integer, sa.ForeignKey("racks.id", ondelete="CASCADE")))
ports = sa.Table("ports", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("node_id", sa.Integer))
items = sa.Table("items", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("src", sa.String(40)), sa.Column("dst", sa.String(40)))

pn, pp = sa.table("nodes", sa.column("id")), sa.table("ports", sa.column("id"), sa.column("node_id"))
it = sa.table("items", sa.column("id", sa.Integer), sa.column("src", sa.String(40)), sa.column("dst", sa.String(40)))
ORPHANS = DataMigration("orphans", table=pp, key="id", values={"node_id": None},
                        pending=sa.and_(pp.c.node_id.is_not(None), ~sa.exists().where(pn.c.id == pp.c.node_id)))
COPY = DataMigration("copy", table=it, key="id", values={"dst": it.c.src})
REGISTRY = Registry([ORPHANS, COPY])


def _forms(dialect: str, rng: random.Random, size: int) -> dict[str, tuple[str, list[str]]]:
    """{label: (the migration it re-dirties, statements)}."""
    node, item = rng.randint(1, size), rng.randint(1, size)
    new = size + rng.randint(1, 10**6)
    forms = {
        "delete_node": ("orphans", [f"DELETE FROM nodes WHERE id = {node}"]),
        "move_node": ("orphans", [f"UPDATE nodes SET id = {new} WHERE id = {node}"]),
        "insert_port": ("orphans", [f"INSERT INTO ports (id, node_id) VALUES ({new}, {new})"]),
        "update_port": ("orphans", [f"UPDATE ports SET node_id = {new} WHERE id = {node}"]),
        "delete_rack": ("orphans", [f"DELETE FROM racks WHERE id = {node % 5 + 1}"]),  # cascades to nodes
        "update_item": ("copy", [f"UPDATE items SET src = 'again{new}' WHERE id = {item}"]),
        "insert_item": ("copy", [f"INSERT INTO items (id, src) VALUES ({new}, 'n{new}')"]),
    }
    if dialect != "sqlite":
        forms["truncate_nodes"] = ("orphans", ["TRUNCATE TABLE nodes" if dialect == "mysql" else "TRUNCATE nodes CASCADE"])
    if dialect in ("mysql", "sqlite"):
        forms["replace_item"] = ("copy", [f"REPLACE INTO items (id, src, dst) VALUES ({item}, 'r{new}', NULL)"])
    if dialect == "mysql":
        forms["upsert_item"] = ("copy", [f"INSERT INTO items (id, src) VALUES ({item}, 'u') "
                                         f"ON DUPLICATE KEY UPDATE src = 'u{new}'"])
        forms["delete_multi"] = ("orphans", [f"DELETE nodes FROM nodes JOIN ports ON ports.node_id = nodes.id "
                                             f"WHERE ports.id = {node}"])
        forms["update_multi"] = ("copy", [f"UPDATE items JOIN ports ON ports.id = items.id SET items.src = "
                                          f"'m{new}' WHERE ports.id = {item}"])
    else:
        forms["upsert_item"] = ("copy", [f"INSERT INTO items (id, src) VALUES ({item}, 'u') "
                                         f"ON CONFLICT (id) DO UPDATE SET src = 'u{new}'"])
    return forms


def _remembered() -> dict[str, int | None]:
    """What status/check read: a remembered completion is trusted."""
    with ENGINE[0].connect() as conn:
        found = {p.name: p.remaining for p in pending_migrations(conn, REGISTRY, remember=True)}
        conn.commit()
    return found


def _gate() -> dict[str, int | None]:
    with ENGINE[0].connect() as conn:
        return {p.name: p.remaining for p in gate.unfinished(conn, REGISTRY, {"orphans": ["c"], "copy": ["c"]})}


ENGINE: list[sa.Engine] = []


def test_no_write_path_leaves_a_remembered_completion_standing(db_engine, backend):
    seed = int(os.environ.get("MP_COMPLETION_WRITES_SEED") or random.randrange(1 << 30))
    print(f"MP_COMPLETION_WRITES_SEED={seed}")
    rng = random.Random(seed)
    ENGINE[:] = [db_engine]
    size = rng.randint(20, 200)
    meta.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(racks), [{"id": i} for i in range(1, 6)])
        conn.execute(sa.insert(nodes), [{"id": i, "rack_id": i % 5 + 1} for i in range(1, size + 1)])
        conn.execute(sa.insert(ports), [{"id": i, "node_id": i} for i in range(1, size + 1)])
        conn.execute(sa.insert(items), [{"id": i, "src": f"v{i}"} for i in range(1, size + 1)])
    seen = []
    for round_ in range(ROUNDS):
        assert run(db_engine, REGISTRY, RunOptions(batch_size=rng.randint(10, 300))).exit_code == 0, seed
        _remembered()
        assert _remembered() == {"orphans": 0, "copy": 0}, seed  # proven (and remembered)
        assert _gate() == {}, seed
        forms = _forms(db_engine.dialect.name, rng, size)
        label = rng.choice(sorted(forms))
        target, statements = forms[label]
        with db_engine.begin() as conn:
            changed = 0
            for statement in statements:
                changed += conn.execute(sa.text(statement)).rowcount
        seen.append(label)
        live = _gate()
        if target not in live:  # the write happened to leave nothing pending (a node no port used)
            continue
        remembered = _remembered()
        assert remembered.get(target), (f"seed {seed} round {round_}: after {label} ({statements}) status/check "
                                        f"read {remembered}, the gate counts {live}")
    print("forms:", seen)
