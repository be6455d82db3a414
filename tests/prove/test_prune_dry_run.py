"""``dbsync prune --dry-run`` counts, per prune, exactly what the run would then delete, deletes nothing,
and the real run keeps every row another table still references, on drawn schemas.

Generated (a printed seed): three to five tables in a random DAG of foreign keys (each table's key
``id``; a reference is one column or two -- ``(a, b)`` to the parent's composite UNIQUE ``(a, b)`` --
nullable, some values NULL, with a drawn ``ON DELETE`` action), a ``Prune`` on a random subset of the
tables (soft-deleted rows), and a table or two no prune touches that reference pruned ones.  With no
writer: the dry run's JSON counts (``would_delete`` and ``kept_referenced`` per prune), then every row
of every table unchanged, then the real run (``dbsync prune``, small batches) deletes per table exactly
the dry run's count and keeps its ``kept_referenced``, and every row still there that another row
references was kept: no referencing row lost or changed (no ``ON DELETE`` action fired).  The expected
outcome is also computed in Python from the drawn rows, children first, and must agree.
Seeded: ``MP_PRUNE_DRY_RUN_SEED``; ``MP_PRUNE_DRY_RUN_CASES`` schemas per backend (default 2).
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import sqlalchemy as sa

from migrations_policy.data import ledger

from ..data.support import dbsync_argv
from ..helpers import write_data_project

CASES = int(os.environ.get("MP_PRUNE_DRY_RUN_CASES", "2"))
ACTIONS = {"postgresql": ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION", "SET DEFAULT"],
           "mysql": ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION"],
           "sqlite": ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION", "SET DEFAULT"]}


def _draw(rng: random.Random, dialect: str) -> dict:
    count = rng.randint(3, 5)
    names = [f"t{i}" for i in range(count)]  # a reference goes from a later table to an earlier one
    edges = []  # (child, parent, composite, action)
    for i in range(1, count):
        for parent in rng.sample(names[:i], rng.randint(1 if i < count else 0, min(2, i))):
            edges.append((names[i], parent, rng.random() < 0.35, rng.choice(ACTIONS[dialect])))
    pruned = [n for n in names if rng.random() < 0.7] or [names[0]]
    rows = {}
    for name in names:
        size = rng.randint(5, 40)
        rows[name] = []
        for key in range(1, size + 1):
            row = {"id": key, "a": key % 7, "b": key, "deleted": 1 if rng.random() < 0.6 else None}
            rows[name].append(row)
    for child, parent, composite, _ in edges:
        targets = rows[parent]
        for row in rows[child]:
            target = rng.choice(targets) if rng.random() < 0.6 else None
            if composite:
                row[f"{parent}_a"] = None if target is None or rng.random() < 0.1 else target["a"]
                row[f"{parent}_b"] = None if target is None else target["b"]
            else:
                row[f"{parent}_id"] = None if target is None else target["id"]
    return {"names": names, "edges": edges, "pruned": pruned, "rows": rows}


def _tables(case: dict) -> tuple[sa.MetaData, dict[str, sa.Table]]:
    meta = sa.MetaData()
    tables = {}
    for name in case["names"]:
        columns = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                   sa.Column("a", sa.Integer, nullable=False), sa.Column("b", sa.Integer, nullable=False),
                   sa.Column("deleted", sa.Integer), sa.UniqueConstraint("a", "b", name=f"uq_{name}_ab")]
        for child, parent, composite, action in case["edges"]:
            if child != name:
                continue
            if composite:
                columns += [sa.Column(f"{parent}_a", sa.Integer), sa.Column(f"{parent}_b", sa.Integer),
                            sa.ForeignKeyConstraint([f"{parent}_a", f"{parent}_b"], [f"{parent}.a", f"{parent}.b"],
                                                    ondelete=action, name=f"fk_{name}_{parent}")]
            else:
                columns += [sa.Column(f"{parent}_id", sa.Integer),
                            sa.ForeignKeyConstraint([f"{parent}_id"], [f"{parent}.id"], ondelete=action,
                                                    name=f"fk_{name}_{parent}")]
        tables[name] = sa.Table(name, meta, *columns)
    return meta, tables


def _module(case: dict) -> str:
    lines = ["import sqlalchemy as sa", "from migrations_policy.data import Prune", ""]
    for name in case["pruned"]:
        lines.append(f'{name} = sa.table("{name}", sa.column("id", sa.Integer), sa.column("a", sa.Integer), '
                     f'sa.column("b", sa.Integer), sa.column("deleted", sa.Integer))')
        lines.append(f'prune_{name} = Prune("old_{name}", table={name}, key="id", '
                     f'where={name}.c.deleted.is_not(None))')
    return "\n".join(lines) + "\n"


def _expected(case: dict) -> dict[str, tuple[int, int]]:
    """{table: (deleted, kept referenced)} of a run, children first (the edges form a DAG)."""
    rows = {name: {r["id"]: dict(r) for r in case["rows"][name]} for name in case["names"]}
    outcome = {}
    for name in reversed(case["names"]):  # every child comes after its parents in names
        if name not in case["pruned"]:
            continue
        referenced = set()
        for child, parent, composite, _ in case["edges"]:
            if parent != name:
                continue
            for row in rows[child].values():
                if composite and row[f"{name}_a"] is not None and row[f"{name}_b"] is not None:
                    referenced |= {k for k, p in rows[name].items()
                                   if (p["a"], p["b"]) == (row[f"{name}_a"], row[f"{name}_b"])}
                elif not composite and row[f"{name}_id"] is not None:
                    referenced.add(row[f"{name}_id"])
        prunable = {k for k, p in rows[name].items() if p["deleted"] is not None}
        gone = prunable - referenced
        outcome[name] = (len(gone), len(prunable & referenced))
        for key in gone:
            del rows[name][key]
    return outcome


def _snapshot(engine: sa.Engine, tables: dict[str, sa.Table]) -> dict[str, dict]:
    with engine.connect() as conn:
        return {name: {tuple(r)[0]: tuple(r) for r in conn.execute(sa.select(t))} for name, t in tables.items()}


def test_the_dry_run_counts_what_the_run_deletes_and_deletes_nothing(tmp_path, db_url, db_engine, backend):
    seed = int(os.environ.get("MP_PRUNE_DRY_RUN_SEED") or random.randrange(1 << 30))
    print(f"MP_PRUNE_DRY_RUN_SEED={seed}")
    rng = random.Random(seed)
    url = db_url.render_as_string(hide_password=False)
    for number in range(CASES):
        case = _draw(rng, backend)
        meta, tables = _tables(case)
        where = f"seed {seed} case {number}: edges {case['edges']}, pruned {case['pruned']}"
        if number:
            with db_engine.begin() as conn:  # the previous case's tables and ledger rows
                for name in reversed(sorted(sa.inspect(conn).get_table_names())):
                    if not name.startswith("migrations_policy_"):
                        conn.execute(sa.text(f'DROP TABLE {db_engine.dialect.identifier_preparer.quote(name)}'))
                conn.execute(sa.delete(ledger.ledger))
        meta.create_all(db_engine)
        ledger.metadata.create_all(db_engine)
        with db_engine.begin() as conn:
            for name in case["names"]:
                columns = [c.name for c in tables[name].columns]
                conn.execute(sa.insert(tables[name]), [{c: r.get(c) for c in columns} for r in case["rows"][name]])
        expected = _expected(case)
        project = write_data_project(tmp_path / f"case{number}", "prune_app", _module(case)) \
            if (tmp_path / f"case{number}").mkdir() is None else None
        env = {**os.environ, "PYTHONPATH": str(project)}
        before = _snapshot(db_engine, tables)

        dry = subprocess.run(dbsync_argv(project, sa.make_url(url), "--format", "json", "prune", "--dry-run"),
                             capture_output=True, text=True, env=env, timeout=300)
        assert dry.returncode == 0, f"{where}: {dry.stderr}"
        counted = json.loads(dry.stdout)["prunes"]
        assert _snapshot(db_engine, tables) == before, f"{where}: the dry run changed rows"
        assert {p["table"]: (p["would_delete"], p["kept_referenced"]) for p in counted} == expected, \
            f"{where}: dry run {counted}, expected {expected}"

        done = subprocess.run(dbsync_argv(project, sa.make_url(url), "--format", "json", "prune",
                                          "--batch-size", str(rng.choice([3, 7, 50]))),
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, f"{where}: {done.stderr}"
        report = json.loads(done.stdout)
        deleted = {m["name"].removeprefix("prune_old_"): m["deleted"] for m in report["migrations"]}
        assert deleted == {t: n for t, (n, _) in expected.items()}, f"{where}: deleted {deleted}, expected {expected}"
        assert {k.removeprefix("old_"): v for k, v in report["kept_referenced"].items()} == \
            {t: k for t, (_, k) in expected.items()}, where
        after = _snapshot(db_engine, tables)
        for name in case["names"]:  # what stays is unchanged (no ON DELETE action fired), what went was prunable
            assert all(before[name][k] == row for k, row in after[name].items()), f"{where}: {name} rows changed"
            gone = set(before[name]) - set(after[name])
            assert len(gone) == expected.get(name, (0, 0))[0], f"{where}: {name} lost {sorted(gone)}"


def test_a_self_reference_makes_the_count_a_lower_bound(tmp_path, db_url, db_engine, backend):
    """A table whose rows reference rows of the same table: the dry run says ``lower_bound`` and
    never counts more than the run deletes (the run may take a row whose referencing row's batch
    went first), and it deletes nothing."""
    seed = int(os.environ.get("MP_PRUNE_DRY_RUN_SEED") or random.randrange(1 << 30))
    print(f"MP_PRUNE_DRY_RUN_SEED={seed}")
    rng = random.Random(seed)
    meta = sa.MetaData()
    tree = sa.Table("tree", meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("parent_id", sa.Integer, sa.ForeignKey("tree.id", ondelete=rng.choice(["CASCADE",
                                                                                                     "SET NULL"]))),
                    sa.Column("deleted", sa.Integer))
    meta.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    size = rng.randint(10, 60)
    with db_engine.begin() as conn:
        for key in range(1, size + 1):
            parent = rng.randint(1, key - 1) if key > 1 and rng.random() < 0.7 else None
            conn.execute(sa.insert(tree).values(id=key, parent_id=parent, deleted=1 if rng.random() < 0.6 else None))
    (tmp_path / "p").mkdir()
    project = write_data_project(tmp_path / "p", "prune_app", (
        'import sqlalchemy as sa\nfrom migrations_policy.data import Prune\n'
        'tree = sa.table("tree", sa.column("id", sa.Integer), sa.column("parent_id", sa.Integer), '
        'sa.column("deleted", sa.Integer))\n'
        'prune_tree = Prune("old_tree", table=tree, key="id", where=tree.c.deleted.is_not(None))\n'))
    env = {**os.environ, "PYTHONPATH": str(project)}
    url = sa.make_url(db_url.render_as_string(hide_password=False))
    before = _snapshot(db_engine, {"tree": tree})
    dry = subprocess.run(dbsync_argv(project, url, "--format", "json", "prune", "--dry-run"),
                         capture_output=True, text=True, env=env, timeout=300)
    assert dry.returncode == 0, (seed, dry.stderr)
    (counted,) = json.loads(dry.stdout)["prunes"]
    assert _snapshot(db_engine, {"tree": tree}) == before, seed
    assert counted["lower_bound"] is True, (seed, counted)
    done = subprocess.run(dbsync_argv(project, url, "--format", "json", "prune", "--batch-size",
                                      str(rng.choice([2, 5, 100]))), capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode in (0, 3), (seed, done.stderr)
    (ran,) = json.loads(done.stdout)["migrations"]
    assert counted["would_delete"] <= ran["deleted"], (seed, counted, ran)
    after = _snapshot(db_engine, {"tree": tree})
    assert all(before["tree"][k] == row for k, row in after["tree"].items()), seed  # no ON DELETE action fired


def test_the_dry_run_with_max_count_counts_what_that_run_deletes(tmp_path, db_url, db_engine, backend):
    """``--dry-run --max-count N`` says what ``dbsync prune --max-count N`` then deletes: in all exactly
    (children first, each level what the levels before it left of N), per prune exactly unless N
    runs out in a level of several prunes (``max_count_shared``: each an upper bound, the sum exact)."""
    seed = int(os.environ.get("MP_PRUNE_DRY_RUN_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    url = sa.make_url(db_url.render_as_string(hide_password=False))
    case = _draw(rng, backend)
    meta, tables = _tables(case)
    meta.create_all(db_engine)
    ledger.metadata.create_all(db_engine)
    with db_engine.begin() as conn:
        for name in case["names"]:
            columns = [c.name for c in tables[name].columns]
            conn.execute(sa.insert(tables[name]), [{c: r.get(c) for c in columns} for r in case["rows"][name]])
    expected = _expected(case)
    total = sum(n for n, _ in expected.values())
    budget = rng.randint(1, total + 3) if total else rng.randint(1, 5)
    batch = rng.choice([2, 3, 7, 50])
    where = f"seed {seed}: edges {case['edges']}, pruned {case['pruned']}, --max-count {budget}, batch {batch}"
    project = write_data_project(tmp_path, "prune_app", _module(case))
    env = {**os.environ, "PYTHONPATH": str(project)}
    before = _snapshot(db_engine, tables)
    dry = subprocess.run(dbsync_argv(project, url, "--format", "json", "prune", "--dry-run", "--max-count",
                                     str(budget)), capture_output=True, text=True, env=env, timeout=300)
    assert dry.returncode == 0, f"{where}: {dry.stderr}"
    said = json.loads(dry.stdout)
    assert _snapshot(db_engine, tables) == before, f"{where}: the dry run changed rows"
    assert said["max_count"] == budget and said["within_max_count"] == min(budget, total), f"{where}: {said}"
    text = subprocess.run(dbsync_argv(project, url, "prune", "--dry-run", "--max-count", str(budget)),
                          capture_output=True, text=True, env=env, timeout=300)
    assert text.returncode == 0 and f"--max-count {budget:,} deletes {min(budget, total):,} row(s)" in text.stdout, \
        f"{where}: {text.stdout} {text.stderr}"

    done = subprocess.run(dbsync_argv(project, url, "--format", "json", "prune", "--max-count", str(budget),
                                      "--batch-size", str(batch)), capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode in (0, 1), f"{where}: {done.returncode} {done.stderr}"
    report = json.loads(done.stdout)
    deleted = {m["name"].removeprefix("prune_old_"): m["deleted"] for m in report["migrations"]}
    assert sum(deleted.values()) == said["within_max_count"], f"{where}: the run deleted {deleted}, dry run {said}"
    for prune in said["prunes"]:
        ran = deleted.get(prune["table"], 0)
        if prune["max_count_shared"]:
            assert ran <= prune["within_max_count"], f"{where}: {prune} but the run deleted {ran}"
        else:
            assert ran == prune["within_max_count"], f"{where}: {prune} but the run deleted {ran}"
    assert (done.returncode == 1) == (budget < total), f"{where}: exit {done.returncode}, total {total}"
    after = _snapshot(db_engine, tables)
    for name in case["names"]:  # what stays is unchanged, and no more went than the dry run said
        assert all(before[name][k] == row for k, row in after[name].items()), f"{where}: {name} rows changed"
