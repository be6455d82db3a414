"""Data preconditions: a contract adding UNIQUE, FOREIGN KEY, NOT NULL and CHECK constraints is
refused, before any DDL, while existing rows violate them, with exact counts and real sample keys.

Seeded random data on every backend: the offenders are chosen at random, their expected
counts computed here (MariaDB's default collation ignores case, so 'AB' and 'ab' collide
there and only there), and ``dbsync check`` / ``status`` / ``upgrade --contract`` must agree.
"""

from __future__ import annotations

import json
import random
import textwrap

import pytest
import sqlalchemy as sa

from migrations_policy import cli

from .expand_project import ExpandProject

EXPAND = '''
op.create_table("parents", sa.Column("id", sa.Integer, primary_key=True))
op.create_table("items", sa.Column("id", sa.Integer, primary_key=True), sa.Column("code", sa.String(20)),
                sa.Column("qty", sa.Integer), sa.Column("parent_id", sa.Integer))
'''

CONTRACT = '''
from alembic import op
import sqlalchemy as sa

revision = "c1_constraints"
down_revision = "contract_root"
branch_labels = None
depends_on = "r2_expand"


def upgrade():
    with op.batch_alter_table("items") as batch:
        batch.create_unique_constraint("uq_items_code", ["code"])
        batch.alter_column("qty", existing_type=sa.Integer(), nullable=False)
        batch.create_check_constraint("ck_items_qty_min", "qty >= 0")
        batch.create_check_constraint("ck_items_qty_max", sa.column("qty") < 1000)
        batch.create_foreign_key("fk_items_parent", "parents", ["parent_id"], ["id"])


def downgrade():
    pass
'''

PARENTS = 20


def _dbsync(project: ExpandProject, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.dbsync_main(["-c", str(project.ini), "--url", project.url_text, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, db_url, capsys):
    p = ExpandProject(tmp_path, db_url, EXPAND)
    (p.directory / "migrations" / "versions" / "contract" / "0001_c1.py").write_text(textwrap.dedent(CONTRACT))
    code, out, err = _dbsync(p, capsys, "upgrade", "--expand")
    assert code == 0, out + err
    yield p
    p.engine.dispose()


def _seed(project: ExpandProject, rng: random.Random) -> dict[str, set[int]]:
    """Random rows with random offenders; the ids that offend each constraint (as the database compares)."""
    ci = project.engine.dialect.name in ("mysql", "mariadb")
    rows = []
    for i in range(1, rng.randint(80, 160)):
        code = rng.choice([None, f"c{i}", f"c{i}", f"c{i}", rng.choice(["ab", "AB", "Ab", "x1", "x2", "x3"])])
        qty = rng.choice([None, rng.randint(-5, -1), rng.randint(1000, 2000)] + [rng.randint(0, 999)] * 6)
        parent = rng.choice([None, rng.randint(1, PARENTS), rng.randint(1, PARENTS), rng.randint(PARENTS + 1, 99)])
        rows.append({"id": i, "code": code, "qty": qty, "parent_id": parent})
    by_code: dict[str, list[int]] = {}
    for r in rows:
        if r["code"] is not None:
            by_code.setdefault(r["code"].lower() if ci else r["code"], []).append(r["id"])
    offenders = {
        "uq_items_code": {i for ids in by_code.values() if len(ids) > 1 for i in ids},
        "qty": {r["id"] for r in rows if r["qty"] is None},
        "ck_items_qty_min": {r["id"] for r in rows if r["qty"] is not None and r["qty"] < 0},
        "ck_items_qty_max": {r["id"] for r in rows if r["qty"] is not None and r["qty"] >= 1000},
        "fk_items_parent": {r["id"] for r in rows if r["parent_id"] is not None and r["parent_id"] > PARENTS},
    }
    meta = sa.MetaData()
    parents = sa.Table("parents", meta, autoload_with=project.engine)
    items = sa.Table("items", meta, autoload_with=project.engine)
    with project.engine.begin() as conn:
        conn.execute(parents.insert(), [{"id": i} for i in range(1, PARENTS + 1)])
        conn.execute(items.insert(), rows)
    return offenders


def _violations(project, capsys) -> dict[str, dict]:
    code, out, err = _dbsync(project, capsys, "check", "--format", "json")
    assert code == 4, out + err  # documented: the data is not ready for contract
    report = json.loads(out)
    assert report["meaning"].startswith("contract refused: existing rows violate")
    return {v["constraint"] or v["columns"][0]: v for v in report["gate"]["violations"]}


def _contract_absent(project: ExpandProject, heads: list[str]) -> None:
    inspector = sa.inspect(project.engine)
    assert project.heads() == heads and "c1_constraints" not in heads
    assert not inspector.get_unique_constraints("items")
    assert not inspector.get_foreign_keys("items")
    assert [c["nullable"] for c in inspector.get_columns("items") if c["name"] == "qty"] == [True]


@pytest.mark.parametrize("seed", [7, 8])
def test_contract_is_refused_with_exact_counts_and_real_keys_until_the_rows_are_fixed(project, capsys, seed):
    rng = random.Random(f"{seed}-{project.engine.dialect.name}")
    offenders = _seed(project, rng)
    assert all(offenders.values()), offenders  # every kind has offenders with this seed

    found = _violations(project, capsys)
    assert set(found) == set(offenders)
    for name, ids in offenders.items():
        v = found[name]
        assert v["count"] == len(ids), (name, v, sorted(ids))
        assert v["key_columns"] == ["id"]
        samples = [s[0] for s in v["samples"]]
        assert len(samples) == min(5, len(ids)) and set(samples) <= ids, (name, samples, sorted(ids))
        assert v["path"].endswith("0001_c1.py") and v["revision"] == "c1_constraints"

    code, out, err = _dbsync(project, capsys, "status")
    assert code == 0 and "refused by the gate" in out
    assert f"UNIQUE uq_items_code on items(code): {len(offenders['uq_items_code']):,} offending row" in out

    heads = project.heads()
    for extra in ((), ("--force", "--reason", "try anyway")):  # --force does not override a violation
        code, out, err = _dbsync(project, capsys, "upgrade", "--contract", *extra)
        assert code == 4, out + err
        lines = [line for line in err.splitlines() if "revision c1_constraints adds" in line]
        assert len(lines) == len(offenders), err
        assert "--force does not override this" in err
        _contract_absent(project, heads)

    # fix the rows, one kind at a time: each check shows one violation fewer
    items = sa.Table("items", sa.MetaData(), autoload_with=project.engine)
    fixes = [("uq_items_code", lambda ids: items.update().where(items.c.id.in_(ids)).values(code=None)),
             ("qty", lambda ids: items.update().where(items.c.id.in_(ids)).values(qty=0)),
             ("ck_items_qty_min", lambda ids: items.update().where(items.c.id.in_(ids)).values(qty=0)),
             ("ck_items_qty_max", lambda ids: items.update().where(items.c.id.in_(ids)).values(qty=999)),
             ("fk_items_parent", lambda ids: items.delete().where(items.c.id.in_(ids)))]
    for done, (name, fix) in enumerate(fixes, 1):
        with project.engine.begin() as conn:
            conn.execute(fix(sorted(offenders[name])))
        if done < len(fixes):
            assert set(_violations(project, capsys)) == {n for n, _ in fixes[done:]}

    code, out, err = _dbsync(project, capsys, "check")
    assert code == 5, out + err
    code, out, err = _dbsync(project, capsys, "upgrade", "--contract")
    assert code == 0, out + err
    inspector = sa.inspect(project.engine)
    assert [u["name"] for u in inspector.get_unique_constraints("items")] == ["uq_items_code"]
    assert [f["name"] for f in inspector.get_foreign_keys("items")] == ["fk_items_parent"]
    assert [c["nullable"] for c in inspector.get_columns("items") if c["name"] == "qty"] == [False]


VALIDATING = '''
from alembic import op
import sqlalchemy as sa

revision = "c1_validate"
down_revision = "contract_root"
branch_labels = None
depends_on = "r2_expand"


def upgrade():
    op.execute("ALTER TABLE loans VALIDATE CONSTRAINT fk_loans_book")
    op.execute(sa.text('ALTER TABLE ONLY "public".loans VALIDATE CONSTRAINT "ck_loans_who";'))


def downgrade():
    pass
'''

NOT_VALID = '''
op.create_foreign_key("fk_loans_book", "loans", "books", ["book_id"], ["id"], postgresql_not_valid=True)
op.create_check_constraint("ck_loans_who", "loans", "length(who) > 2", postgresql_not_valid=True)
'''


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_raw_validate_constraint_is_checked_from_the_catalog(tmp_path, db_url, capsys, seed):
    """PostgreSQL: the expand added NOT VALID constraints; the contract's raw ``VALIDATE CONSTRAINT``
    is read from the catalog (the database's own text of the CHECK)."""
    project = ExpandProject(tmp_path, db_url, NOT_VALID)
    (project.directory / "migrations" / "versions" / "contract" / "0001_c1.py").write_text(VALIDATING)
    try:
        assert project.alembic("upgrade", "r1_release1").returncode == 0
        rng = random.Random(seed)
        books = list(range(1, 11))
        loans = [{"id": i, "book_id": rng.choice([None, rng.randint(1, 10), rng.randint(11, 30)]),
                  "who": rng.choice([None, "ab", "abc", "abcd", "x"])} for i in range(1, rng.randint(30, 80))]
        with project.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO books (id) VALUES (:id)"), [{"id": b} for b in books])
            conn.execute(sa.text("INSERT INTO loans (id, book_id, who) VALUES (:id, :book_id, :who)"), loans)
        code, out, err = _dbsync(project, capsys, "upgrade", "--expand")
        assert code == 0, out + err
        orphans = {r["id"] for r in loans if r["book_id"] is not None and r["book_id"] > 10}
        short = {r["id"] for r in loans if r["who"] is not None and len(r["who"]) <= 2}
        found = _violations(project, capsys)
        assert {k: v["count"] for k, v in found.items()} == {"fk_loans_book": len(orphans), "ck_loans_who": len(short)}
        assert {s[0] for s in found["fk_loans_book"]["samples"]} <= orphans
        assert {s[0] for s in found["ck_loans_who"]["samples"]} <= short
        with project.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM loans WHERE book_id > 10 OR length(who) <= 2"))
        code, out, err = _dbsync(project, capsys, "upgrade", "--contract")
        assert code == 0, out + err
    finally:
        project.engine.dispose()


# -- sync triggers left behind ----------------------------------------------------------
SYNCED = '''
import migrations_policy.sync_triggers  # noqa: F401
op.create_table("things", sa.Column("id", sa.Integer, primary_key=True), sa.Column("name", sa.String(40)),
                sa.Column("label", sa.String(40)))
op.create_sync_trigger("things", old="name", new="label")
'''

CONTRACT_STEP = '''
from alembic import op
import sqlalchemy as sa
import migrations_policy.sync_triggers  # noqa: F401

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = "r2_expand"


def upgrade():
    {body}


def downgrade():
    pass
'''


def _write_contract(project: ExpandProject, number: int, revision: str, down: str, body: str) -> None:
    path = project.directory / "migrations" / "versions" / "contract" / f"000{number}_{revision}.py"
    path.write_text(CONTRACT_STEP.format(revision=revision, down=down, body=body))


def test_a_sync_trigger_left_behind_after_its_contract_is_reported_by_check_and_status(tmp_path, db_url, capsys):
    project = ExpandProject(tmp_path, db_url, SYNCED)
    name = "mp_sync_things_name_label_"
    try:
        _write_contract(project, 1, "c1_forgets", "contract_root", "pass")
        assert _dbsync(project, capsys, "upgrade", "--expand")[0] == 0
        code, out, err = _dbsync(project, capsys, "upgrade", "--contract")
        assert code == 0, out + err
        code, out, err = _dbsync(project, capsys, "check")
        assert code == 2, out + err
        assert out.startswith("sync triggers left behind") and "is left behind" in out and name in out
        code, out, err = _dbsync(project, capsys, "status", "--format", "json")
        left = json.loads(out)["sync_triggers_left"]
        assert code == 0 and len(left) == 1 and "op.drop_sync_trigger('things', old='name', new='label')" in left[0]

        if project.engine.dialect.name != "sqlite":  # SQLite refuses to drop, and renames inside triggers
            rename = ("ALTER TABLE things DROP COLUMN label" if project.engine.dialect.name == "mysql"
                      else "ALTER TABLE things RENAME COLUMN label TO tag")
            with project.engine.begin() as conn:
                conn.execute(sa.text(rename))
            code, out, err = _dbsync(project, capsys, "check")
            assert code == 2 and "every write to things fails" in out, out + err

        # a pending revision that removes it: expected, contract allowed; after it, nothing left
        _write_contract(project, 2, "c2_drops", "c1_forgets",
                        'op.drop_sync_trigger("things", old="name", new="label")')
        code, out, err = _dbsync(project, capsys, "check")
        assert code == 5, out + err
        assert _dbsync(project, capsys, "upgrade", "--contract")[0] == 0
        code, out, err = _dbsync(project, capsys, "check")
        assert code == 0 and name not in out, out + err
    finally:
        project.engine.dispose()


@pytest.mark.parametrize("condition, why", [
    ("qty >= 0) OR (1 = 1", "closes a parenthesis it did not open"),
    ("qty >= 0; DELETE FROM items", "holds ';' or a comment"),
    ("qty >= (SELECT 0)", "holds SELECT"),
    ("no_such_function(qty) > 0", "the database rejected the check"),
])
def test_a_check_that_cannot_be_evaluated_safely_refuses_the_contract(tmp_path, db_url, capsys, condition, why):
    """Fail closed: a CHECK text that is not one expression is never run, one the database rejects
    is reported; either way the contract is refused (exit 4), nothing is applied, no traceback."""
    p = ExpandProject(tmp_path, db_url, EXPAND)
    source = CONTRACT.replace('''    with op.batch_alter_table("items") as batch:
        batch.create_unique_constraint("uq_items_code", ["code"])
        batch.alter_column("qty", existing_type=sa.Integer(), nullable=False)
        batch.create_check_constraint("ck_items_qty_min", "qty >= 0")
        batch.create_check_constraint("ck_items_qty_max", sa.column("qty") < 1000)
        batch.create_foreign_key("fk_items_parent", "parents", ["parent_id"], ["id"])''', f'''    with op.batch_alter_table("items") as batch:
        batch.create_check_constraint("ck_odd", {condition!r})
        batch.alter_column("qty", existing_type=sa.Integer(), nullable=False)''')
    (p.directory / "migrations" / "versions" / "contract" / "0001_c1.py").write_text(textwrap.dedent(source))
    try:
        assert _dbsync(p, capsys, "upgrade", "--expand")[0] == 0
        with p.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO items (id, qty) VALUES (1, 5), (2, NULL)"))
        heads = p.heads()
        code, out, err = _dbsync(p, capsys, "check")
        assert code == 4 and "Traceback" not in out + err, out + err
        line = next(line for line in out.splitlines() if "ck_odd" in line)
        assert "adds CHECK ck_odd on items: its rows cannot be checked (" in line and why in line, out
        assert "adds NOT NULL on items(qty): 1 offending row (NULLs), e.g. id=2" in out, out  # the next one too
        code, out, err = _dbsync(p, capsys, "status")
        assert code == 0 and why in out
        code, out, err = _dbsync(p, capsys, "upgrade", "--contract", "--force", "--reason", "x")
        assert code == 4 and why in err and "Traceback" not in err, err
        assert p.heads() == heads
    finally:
        p.engine.dispose()


DATA_MODULE = '''
import sqlalchemy as sa
from migrations_policy.data import DataMigration

items = sa.table("items", sa.column("id", sa.Integer), sa.column("qty", sa.Integer))
items_qty = DataMigration("items_qty", table=items, key="id", pending=items.c.qty.is_(None), values={"qty": 0})
'''


def test_status_and_check_do_not_count_offenders_while_data_migrations_are_pending(tmp_path, db_url, capsys):
    """Counting a constraint's offenders is a full scan; while a data migration the contract requires
    is pending the contract is refused anyway, so ``check`` and ``status`` list the constraints as
    not yet checked instead of scanning (issue 15: their cost follows what is pending).  ``status
    --exact`` counts them, and a run never defers them: ``--force`` still stops at the offenders."""
    project = ExpandProject(tmp_path, db_url, EXPAND, data_migrations="items_qty_data")
    project.ini.write_text(project.ini.read_text().replace("[alembic]\n", "[alembic]\nprepend_sys_path = %(here)s\n"))
    (tmp_path / "items_qty_data.py").write_text(DATA_MODULE)
    contract = textwrap.dedent(CONTRACT).replace('depends_on = "r2_expand"\n',
                                                 'depends_on = "r2_expand"\nrequires_data_migrations = ("items_qty",)\n')
    (project.directory / "migrations" / "versions" / "contract" / "0001_c1.py").write_text(contract)
    try:
        code, out, err = _dbsync(project, capsys, "upgrade", "--expand")
        assert code == 0, out + err
        offenders = _seed(project, random.Random(f"deferred-{project.engine.dialect.name}"))
        assert offenders["qty"], "the seed must leave rows for the data migration"

        code, out, err = _dbsync(project, capsys, "check", "--format", "json")
        report = json.loads(out)
        assert code == 4 and report["meaning"].startswith("data migrations pending"), out + err
        assert report["gate"]["violations"] == []
        assert len(report["gate"]["preconditions_not_checked"]) == 5, report["gate"]
        code, out, err = _dbsync(project, capsys, "status")
        assert code == 0 and "existing rows not yet checked against 5 constraint(s)" in out, out

        code, out, err = _dbsync(project, capsys, "status", "--exact", "--format", "json")
        counted = {v["constraint"] or v["columns"][0]: v["count"]
                   for v in json.loads(out)["gate"]["violations"]}
        assert counted == {name: len(ids) for name, ids in offenders.items()}, out

        heads = project.heads()
        code, out, err = _dbsync(project, capsys, "upgrade", "--contract", "--force", "--reason", "try anyway")
        assert code == 4 and "--force does not override this" in err, out + err
        _contract_absent(project, heads)

        items = sa.table("items", sa.column("qty", sa.Integer))
        with project.engine.begin() as conn:  # what the data migration does (this project has no ledger)
            conn.execute(sa.update(items).where(items.c.qty.is_(None)).values(qty=0))
        found = _violations(project, capsys)  # nothing pending: check counts them now
        assert set(found) == set(offenders) - {"qty"}
    finally:
        project.engine.dispose()
