"""``dbsync plan`` on real PostgreSQL, MariaDB and SQLite: tables seeded with a random (seeded) number of
rows; the plan reports their sizes (within the estimate's tolerance), the lock, rewrite and scan of each
statement as the policy knowledge base says for that dialect, an estimated duration for blocking work,
an exit code that flips with --max-lock-seconds (failing closed on what it cannot estimate), the
password masked, and bad input as one line."""

from __future__ import annotations

import json
import random
import re

import pytest
import sqlalchemy as sa

from migrations_policy import cli

from ..helpers import copy_example, forget_example_modules
from .expand_project import ExpandProject

# The expand revision the plan reads (PostgreSQL and MariaDB: plain op calls).
BODY = '''
op.add_column("books", sa.Column("note", sa.Text()))
op.create_index("ix_books_title", "books", ["title"])
op.alter_column("books", "title", type_=sa.String(40), existing_type=sa.String(80))
op.alter_column("loans", "who", nullable=False, existing_type=sa.String(40))
'''
# SQLite cannot ALTER a column: the batch recreates the table.
SQLITE_BODY = '''
op.add_column("books", sa.Column("note", sa.Text()))
op.create_index("ix_books_title", "books", ["title"])
with op.batch_alter_table("loans") as batch_op:
    batch_op.alter_column("who", nullable=False, existing_type=sa.String(40))
'''

# operation -> (lock, rewrite, scan, blocking, work) per backend: what each server does (docs/ddl notes).
EXPECTED = {
    "postgresql": {
        "add column books.note": ("brief", False, False, False, None),
        "create index ix_books_title on books": ("SHARE", False, True, True, "index build"),
        "alter type books.title": ("ACCESS EXCLUSIVE", True, False, True, "rewrite"),
        "set not null loans.who": ("ACCESS EXCLUSIVE", False, True, True, "scan"),
    },
    "mysql": {
        "add column books.note": ("brief", False, False, False, None),
        "create index ix_books_title on books": ("brief", False, False, False, None),  # INPLACE, LOCK=NONE
        "alter type books.title": ("ALGORITHM=COPY", True, False, True, "rewrite"),
        "set not null loans.who": ("ALGORITHM=INPLACE", True, False, True, "rebuild in place"),
    },
    "sqlite": {
        "add column books.note": ("brief", False, False, False, None),
        "create index ix_books_title on books": ("brief", False, False, False, None),
        "set not null loans.who": ("brief", False, False, False, None),  # inside the batch: the recreate does it
        "batch recreate loans": ("database write lock", True, False, True, "rewrite"),
    },
}
#: How far the reported row count may be from the seeded one (PostgreSQL's planner after ANALYZE,
#: InnoDB's sampled statistics; SQLite counts).
TOLERANCE = {"postgresql": 0.05, "mysql": 0.35, "sqlite": 0.0}


def _seed(engine: sa.Engine, backend: str, rng: random.Random) -> dict[str, int]:
    rows = {"books": rng.randrange(20_000, 60_000), "loans": rng.randrange(5_000, 15_000)}
    meta = sa.MetaData()
    books = sa.Table("books", meta, sa.Column("id", sa.Integer, primary_key=True), sa.Column("title", sa.String(80)))
    loans = sa.Table("loans", meta, sa.Column("id", sa.Integer, primary_key=True), sa.Column("book_id", sa.Integer),
                     sa.Column("who", sa.String(40)))
    with engine.begin() as conn:
        conn.execute(books.insert(), [{"title": f"title {i} {rng.random()}"} for i in range(rows["books"])])
        conn.execute(loans.insert(), [{"book_id": i, "who": f"reader {i}"} for i in range(rows["loans"])])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for name in rows:  # statistics as autovacuum / InnoDB's auto-recalc would leave them
            if backend == "postgresql":
                conn.execute(sa.text(f"ANALYZE {name}"))
            elif backend == "mysql":
                conn.execute(sa.text(f"ANALYZE TABLE {name}")).fetchall()
    return rows


@pytest.fixture
def seeded(tmp_path, db_url, backend):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    proj = ExpandProject(tmp_path, db_url, SQLITE_BODY if backend == "sqlite" else BODY)
    assert proj.alembic("upgrade", "r1_release1").returncode == 0
    rows = _seed(proj.engine, backend, random.Random(seed))
    yield proj, rows
    proj.engine.dispose()


def _plan(proj: ExpandProject, capsys, *extra: str) -> tuple[int, dict]:
    code = cli.dbsync_main(["-c", str(proj.ini), "--url", proj.url_text, "plan", "--format", "json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


def _statements(out: dict) -> dict[str, dict]:
    [r2] = [r for r in out["revisions"] if r["revision"] == "r2_expand"]
    return {s["operation"]: s for s in r2["statements"]}


def test_sizes_locks_and_rewrites_per_statement(seeded, backend, capsys):
    proj, rows = seeded
    code, out = _plan(proj, capsys)
    assert code == 0 and out["exit_code"] == 0 and out["max_lock_seconds"] is None
    assert [(r["revision"], r["phase"]) for r in out["revisions"]] == [("r2_expand", "expand"),
                                                                       ("contract_root", "contract")]
    statements = _statements(out)
    assert set(statements) == set(EXPECTED[backend])
    for operation, (lock, rewrite, scan, blocking, work) in EXPECTED[backend].items():
        s = statements[operation]
        assert (s["lock"], s["rewrite"], s["scan"], s["blocking"], s["work"]) == (lock, rewrite, scan, blocking, work), s
        table = s["table"]
        reported = s["size"]["rows"]
        assert abs(reported - rows[table]) <= TOLERANCE[backend] * rows[table], (table, reported, rows[table])
        assert s["size"]["rows_estimated"] == (backend != "sqlite")
        assert s["size"]["bytes"] > rows[table] * 10  # ids and text: more than 10 bytes a row
        if blocking and work:
            assert s["estimated_seconds"] > 0, s
        else:
            assert s["estimated_seconds"] == 0, s
        assert s["exceeds_max_lock_seconds"] is False
    sampled = {r["table"] for r in out["read_rates"]}
    assert sampled == {s["table"] for s in statements.values() if s["work"]}
    assert all(r["rows_per_second"] > 0 for r in out["read_rates"])
    assert "estimated rows / rows per second" in out["estimate_method"]
    # The plan ran nothing: the schema is where it was.
    assert proj.heads() == ["r1_release1"]
    assert "note" not in proj.columns("books") and "ix_books_title" not in proj.indexes("books")


def test_exit_code_flips_with_the_threshold(seeded, backend, capsys):
    proj, _ = seeded
    code, out = _plan(proj, capsys)
    longest = max(s["estimated_seconds"] for s in _statements(out).values() if s["blocking"])
    assert longest > 0
    code, out = _plan(proj, capsys, "--max-lock-seconds", "0")
    assert code == out["exit_code"] == 6
    over = {e["operation"] for e in out["exceeding"]}
    assert over == {op for op, expected in EXPECTED[backend].items() if expected[3] and expected[4]}
    code, out = _plan(proj, capsys, "--max-lock-seconds", f"{longest / 1000:.9f}")
    assert code == 6
    code, out = _plan(proj, capsys, "--max-lock-seconds", f"{longest * 1000 + 1:.3f}")
    assert code == 0 and out["exceeding"] == []
    # text: the same verdict in words
    assert cli.dbsync_main(["-c", str(proj.ini), "--url", proj.url_text, "plan", "--max-lock-seconds", "0"]) == 6
    text = capsys.readouterr().out
    assert "over --max-lock-seconds" in text and "would hold a blocking lock longer than 0 s" in text


def test_brief_locks_never_exceed(tmp_path, db_url, backend, capsys):
    """Only statements that block for their work count: instant changes pass even --max-lock-seconds 0."""
    proj = ExpandProject(tmp_path, db_url, 'op.add_column("books", sa.Column("note", sa.Text()))')
    assert proj.alembic("upgrade", "r1_release1").returncode == 0
    _seed(proj.engine, backend, random.Random(1))
    # --format before the command, as every dbsync command accepts it
    code = cli.dbsync_main(["--format", "json", "-c", str(proj.ini), "--url", proj.url_text, "plan",
                            "--max-lock-seconds", "0"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["read_rates"] == [] and out["exceeding"] == []
    assert _statements(out)["add column books.note"]["lock"] == "brief"
    proj.engine.dispose()


@pytest.mark.parametrize("body, why", [
    ('with op.batch_alter_table("ghost") as batch_op:\n    batch_op.alter_column("v", type_=sa.BigInteger())',
     "does not exist"),
    ('raise RuntimeError("needs the live database")', "cannot run offline"),
])
def test_what_cannot_be_estimated_fails_closed(tmp_path, db_url, backend, body, why, capsys):
    proj = ExpandProject(tmp_path, db_url, body)
    assert proj.alembic("upgrade", "r1_release1").returncode == 0
    code, out = _plan(proj, capsys)
    assert code == 0  # no threshold, no verdict
    code, out = _plan(proj, capsys, "--max-lock-seconds", "1000000")
    assert code == 6 and any(why in e["why"] for e in out["exceeding"]), out["exceeding"]
    proj.engine.dispose()


def test_password_is_masked(seeded, backend, capsys):
    proj, _ = seeded
    password = proj.url.password
    if not password:
        pytest.skip("this test server's account has no password")
    code, out = _plan(proj, capsys)
    assert password not in json.dumps(out) and "***" in out["database"]
    cli.dbsync_main(["-c", str(proj.ini), "--url", proj.url_text, "plan"])
    captured = capsys.readouterr()
    assert password not in captured.out + captured.err and "***" in captured.out


@pytest.mark.parametrize("args, says", [
    (["plan", "--max-lock-seconds", "soon"], "not a number"),
    (["plan", "--max-lock-seconds", "-1"], "must be >= 0"),
    (["plan", "--max-lock-seconds", "nan"], "not a finite number"),
    (["--url", "postgresql+psycopg://u:SECRET-PW@127.0.0.1:9/db", "plan"], "127.0.0.1"),
    (["-c", "/nonexistent/alembic.ini", "plan"], "/nonexistent/alembic.ini"),
])
def test_bad_input_is_one_line(tmp_path, args, says, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    code = cli.dbsync_main(args if "-c" in args else ["-c", str(ini), *args])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and captured.out == ""
    assert "\n" not in err and err.startswith("dbsync: error:") and says in err, err
    assert "SECRET-PW" not in err and "Traceback" not in err


def test_the_console_script(seeded, backend):
    """The installed entry point, as an operator runs it: text, and the documented exit code."""
    proj, _ = seeded
    done = proj.dbsync("plan", "--max-lock-seconds", "0", "--url", proj.url_text)
    assert done.returncode == 6, done.stderr
    assert "expand r2_expand" in done.stdout and "durations are estimates" in done.stdout


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_a_locked_table_is_one_line_after_lock_timeout(seeded, backend, capsys):
    """An ALTER holding the table right now: the plan's reads give up after lock_timeout (1 s here)."""
    proj, _ = seeded
    holder = proj.engine.connect()
    try:
        if backend == "postgresql":
            holder.execute(sa.text("LOCK TABLE books IN ACCESS EXCLUSIVE MODE"))
        else:
            holder.execute(sa.text("LOCK TABLES books WRITE"))
        code = cli.dbsync_main(["-c", str(proj.ini), "--url", proj.url_text, "plan"])
    finally:
        if backend == "mysql":
            holder.execute(sa.text("UNLOCK TABLES"))
        holder.rollback()
        holder.close()
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and "\n" not in err and "lock_timeout" in err and "Traceback" not in err, err


#: Statements written for every dialect: a portable batch (alembic's recreate="auto"), a sync
#: trigger, raw SQL; drawn in order and number below.
PORTABLE = [
    'with op.batch_alter_table("loans") as batch_op:\n    batch_op.alter_column("who", nullable=False, '
    'existing_type=sa.String(40))',
    'op.add_column("books", sa.Column("note", sa.Text()))\nop.create_sync_trigger("books", old="title", new="note")',
    'op.execute("UPDATE books SET title = title WHERE 1 = 0")',
    'op.create_index("ix_books_title", "books", ["title"])',
]


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(2)])
def test_the_plan_speaks_the_operators_words(tmp_path, db_url, backend, seed, capsys):
    """No class names of ours (``other CreateSyncTriggerOp on ?``), no ``?`` for a table, and
    no ``batch recreate`` where alembic re-creates nothing (recreate="auto" off SQLite)."""
    print(f"seed={seed}")
    rng = random.Random(seed)
    parts = rng.sample(PORTABLE, rng.randrange(1, len(PORTABLE) + 1))
    if PORTABLE[1] not in parts:
        parts.append(PORTABLE[1])
    proj = ExpandProject(tmp_path, db_url, "\n".join(parts))
    try:
        assert proj.alembic("upgrade", "r1_release1").returncode == 0
        code = cli.dbsync_main(["-c", str(proj.ini), "--url", proj.url_text, "plan"])
        text = capsys.readouterr().out
        assert code == 0, text
        assert not re.search(r"[a-z]Op\b", text) and " ?" not in text and "other " not in text, text
        assert "create sync trigger on books" in text, text
        assert ("batch recreate" in text) == (backend == "sqlite" and PORTABLE[0] in parts), text
    finally:
        proj.engine.dispose()


#: Statements on ``loans`` (one table: one measured read rate for all, so their estimates differ only by
#: the work each does), per dialect: operation -> (body, the work the plan must name; None: no blocking work).
ON_LOANS = {
    "postgresql": {
        "add column loans.note": ('op.add_column("loans", sa.Column("note", sa.Integer(), server_default="0"))', None),
        "set not null loans.who": ('op.alter_column("loans", "who", nullable=False, existing_type=sa.String(40))',
                                   "scan"),
        "add fk fk_loans_book on loans": (
            'op.create_foreign_key("fk_loans_book", "loans", "books", ["book_id"], ["id"])', "foreign key check"),
        "create index ix_loans_who on loans": ('op.create_index("ix_loans_who", "loans", ["who"])', "index build"),
        "alter type loans.who": ('op.alter_column("loans", "who", type_=sa.String(20), existing_type=sa.String(40))',
                                 "rewrite"),
        "add column loans.token": ('op.add_column("loans", sa.Column("token", sa.Uuid(), '
                                   'server_default=sa.text("gen_random_uuid()")))', "rewrite computing each row"),
    },
    "mysql": {
        "add column loans.note": ('op.add_column("loans", sa.Column("note", sa.Integer(), server_default="0"))', None),
        "create index ix_loans_who on loans": ('op.create_index("ix_loans_who", "loans", ["who"])', None),
        "set not null loans.who": ('op.alter_column("loans", "who", nullable=False, existing_type=sa.String(40))',
                                   "rebuild in place"),
        "alter type loans.who": ('op.alter_column("loans", "who", type_=sa.String(20), existing_type=sa.String(40))',
                                 "rewrite"),
        "add fk fk_loans_book on loans": (
            'op.create_foreign_key("fk_loans_book", "loans", "books", ["book_id"], ["id"])', "foreign key check"),
    },
}
#: The order of the work per row, cheapest first: what the benchmark (benchmarks/plan.py) measured on
#: every size and load; the plan's estimates on one table must keep it.
WORK_ORDER = {"postgresql": ["scan", "foreign key check", "index build", "rewrite", "rewrite computing each row"],
              "mysql": ["rebuild in place", "rewrite", "foreign key check"]}


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(2)])
def test_estimates_follow_the_work_each_statement_does(tmp_path, db_url, backend, seed, capsys):
    """A generated selection of statements on one table, in a generated order: an INSTANT / brief change is
    no rewrite and takes 0; every other names the work it does, and on one table (one measured rate) the
    estimates keep the measured order of those works: a MariaDB INPLACE rebuild is not a COPY, a foreign
    key's validation is not a plain scan."""
    with capsys.disabled():
        print(f"seed={seed}")
    rng = random.Random(seed)
    chosen = rng.sample(sorted(ON_LOANS[backend]), rng.randrange(3, len(ON_LOANS[backend]) + 1))
    if not any(ON_LOANS[backend][c][1] for c in chosen):
        chosen.append("set not null loans.who")
    proj = ExpandProject(tmp_path, db_url, "\n".join(ON_LOANS[backend][c][0] for c in chosen))
    try:
        assert proj.alembic("upgrade", "r1_release1").returncode == 0
        _seed(proj.engine, backend, rng)
        code, out = _plan(proj, capsys)
        assert code == 0, out
        statements = _statements(out)
        assert set(statements) == set(chosen), statements
        for name in chosen:
            s, work = statements[name], ON_LOANS[backend][name][1]
            assert s["work"] == work, s
            if work is None:
                assert s["estimated_seconds"] == 0 and not s["rewrite"], s
            else:
                assert s["estimated_seconds"] > 0, s
        order = WORK_ORDER[backend]
        timed = sorted((order.index(statements[n]["work"]), statements[n]["estimated_seconds"], n)
                       for n in chosen if statements[n]["work"])
        for (rank_a, seconds_a, a), (rank_b, seconds_b, b) in zip(timed, timed[1:]):
            assert rank_a == rank_b or seconds_a < seconds_b, (a, seconds_a, b, seconds_b)
    finally:
        proj.engine.dispose()


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(3)])
def test_an_estimate_grows_with_the_rows(seed):
    """For every dialect and work: more rows at the same measured rate, a longer estimate; none, none."""
    from migrations_policy.plan import rate as rates

    print(f"seed={seed}")
    rng = random.Random(seed)
    for dialect, factors in rates.WORK_FACTORS.items():
        sample = rates.ReadRate("t", rng.randrange(1_000, 2_000_000), rng.uniform(0.001, 2.0))
        sizes = sorted(rng.sample(range(1, 100_000_000), 6))
        for work in factors:
            assert rates.seconds_for(0, sample, work, dialect) == 0
            estimates = [rates.seconds_for(n, sample, work, dialect) for n in sizes]
            assert all(a < b for a, b in zip(estimates, estimates[1:])), (dialect, work, sizes, estimates)
