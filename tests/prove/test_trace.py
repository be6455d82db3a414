"""``migrations-policy trace`` on a live PostgreSQL and MariaDB: locks, rewrites, scans, refused ALGORITHM
clauses, CONCURRENTLY not run, everything rolled back (or run on a dropped copy), policy cross-check."""

from __future__ import annotations

import json
import textwrap

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy import cli
from migrations_policy.core.project import Project
from migrations_policy.trace import StatementTrace, cross_check, named_lock

from ..helpers import copy_example, forget_example_modules

# An "expand" revision after release 2 doing what the trace must see: a rewrite, a validating scan.
HEAVY = '''
"""heavy: shrink a column (rewrite), SET NOT NULL (scan)

Revision ID: r2c_heavy
Revises: r2_meta_display_name_version
"""
from alembic import op
import sqlalchemy as sa

import migrations_policy.sync_triggers

revision = "r2c_heavy"
down_revision = "r2_meta_display_name_version"
branch_labels = None
depends_on = None


def upgrade():
    # r2 keeps name and display_name in step; PostgreSQL refuses to retype a column a trigger uses
    op.drop_sync_trigger("nodes", old="name", new="display_name")
    op.alter_column("nodes", "name", type_=sa.String(40), existing_type=sa.String(64))
    op.alter_column("nodes", "extra", nullable=False, existing_type=sa.Text())
    op.alter_column("ports", "address", nullable=True, existing_type=sa.String(18))
'''


@pytest.fixture
def live(tmp_path, server_for, request):
    backend = request.param
    server = server_for(backend)
    url = server.create_database()
    ini = copy_example(tmp_path)
    (ini.parent / "migrations" / "versions" / "expand" / "0002c_heavy.py").write_text(textwrap.dedent(HEAVY))
    forget_example_modules()
    text = url.render_as_string(hide_password=False)
    project = Project(ini, url=text)
    alembic_command.upgrade(project.alembic_config, "r1_inventory")
    project.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO nodes (uuid, name, extra) VALUES (:u, :n, '{}')"),
                     [{"u": f"u{i}", "n": f"n{i}"} for i in range(200)])
    yield ini, text, engine
    engine.dispose()
    server.drop_database(url)
    forget_example_modules()


def trace_json(ini, url, capsys, *extra) -> tuple[int, dict]:
    code = cli.main(["trace", "-c", str(ini), "--url", url, "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def schema(engine) -> dict:
    inspector = sa.inspect(engine)
    return {t: sorted((c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(t))
            for t in inspector.get_table_names()}


def by_sql(out: dict, fragment: str) -> dict:
    [found] = [s for s in out["statements"] if fragment in s["sql"]]
    return found


@pytest.mark.parametrize("live", ["postgresql"], indirect=True)
def test_postgresql_locks_rewrites_scans_and_rollback(live, capsys):
    ini, url, engine = live
    before = schema(engine)
    code, out = trace_json(ini, url, capsys)
    assert out["revisions"] == ["r2_meta_display_name_version", "r2c_heavy"]
    add = by_sql(out, "ADD COLUMN meta")
    assert add["locks"] == [["nodes", "AccessExclusiveLock"]] and add["rewritten"] == [] and add["findings"] == []
    fk = by_sql(out, "FOREIGN KEY")
    assert ["ports", "ShareRowExclusiveLock"] in fk["locks"] and ["nodes", "ShareRowExclusiveLock"] in fk["locks"]
    assert fk["scanned"] == {}  # NOT VALID: existing rows are not read
    concurrently = by_sql(out, "CREATE INDEX CONCURRENTLY ix_ports_node_id")
    assert "autocommit block" in concurrently["not_run"]
    shrink = by_sql(out, "TYPE VARCHAR(40)")
    assert "nodes" in shrink["rewritten"] and "rewrite" in shrink["policy"]
    not_null = by_sql(out, "extra SET NOT NULL")
    assert not_null["scanned"].get("nodes") == 200 and not_null["rewritten"] == []
    assert code == (1 if out["findings"] else 0)
    # Everything was rolled back: same schema, same revision.
    assert schema(engine) == before
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == "r1_inventory"


@pytest.mark.parametrize("live", ["mysql"], indirect=True)
def test_mariadb_algorithms_on_a_dropped_copy(live, capsys):
    ini, url, engine = live
    before = schema(engine)
    code, out = trace_json(ini, url, capsys)
    add = by_sql(out, "ADD COLUMN meta")
    assert add["algorithms"] == [["ALGORITHM=INSTANT", "accepted"]]
    index = by_sql(out, "CREATE INDEX ix_ports_node_id")
    assert index["algorithms"] == [["ALGORITHM=INPLACE, LOCK=NONE", "accepted"]]
    shrink = by_sql(out, "MODIFY name VARCHAR(40)")
    clauses = [clause for clause, _ in shrink["algorithms"]]
    assert clauses == ["ALGORITHM=INSTANT", "ALGORITHM=INPLACE, LOCK=NONE", "as written"], shrink
    assert all(outcome.startswith("refused") for _, outcome in shrink["algorithms"][:2])
    assert code == (1 if out["findings"] else 0)
    assert schema(engine) == before
    with engine.connect() as conn:
        names = conn.execute(sa.text("SHOW DATABASES")).scalars().all()
    assert not [n for n in names if n.startswith("mp_trace_")]


def test_sqlite_is_refused_in_one_line(tmp_path, capsys):
    ini = copy_example(tmp_path)
    assert cli.main(["trace", "-c", str(ini), "--url", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "trace needs PostgreSQL or MariaDB" in err and "\n" not in err


def test_cross_check_flags_what_the_policy_did_not_expect():
    """The policy calls a nullable ADD COLUMN safe: had it rewritten or scanned the table, that is a finding."""
    rewrote = StatementTrace("r", "ALTER TABLE nodes ADD COLUMN x TEXT", rewritten=["nodes"],
                             locks=[("nodes", "AccessExclusiveLock")])
    cross_check(rewrote, "postgresql")
    assert rewrote.findings == ["rewrote nodes; the policy says no rewrite"]
    quiet = StatementTrace("r", "ALTER TABLE nodes ADD COLUMN x TEXT", locks=[("nodes", "AccessExclusiveLock")])
    cross_check(quiet, "postgresql")
    assert quiet.findings == []  # a brief ACCESS EXCLUSIVE is what the policy models
    concurrently = StatementTrace("r", "CREATE INDEX CONCURRENTLY ix ON ports (node_id)",
                                  locks=[("ports", "ShareLock")])
    cross_check(concurrently, "postgresql")
    assert concurrently.findings == ["took ShareLock on ports; the policy says SHARE UPDATE EXCLUSIVE"]
    refused = StatementTrace("r", "ALTER TABLE nodes ADD COLUMN x TEXT",
                             algorithms=[("ALGORITHM=INSTANT", "refused (x)"),
                                         ("ALGORITHM=INPLACE, LOCK=NONE", "refused (y)"), ("as written", "accepted")])
    cross_check(refused, "mysql")
    assert len(refused.findings) == 1 and "refused ALGORITHM=INSTANT" in refused.findings[0]


def test_named_lock_reads_the_strongest_mode():
    assert named_lock("ACCESS EXCLUSIVE") == "AccessExclusiveLock"
    assert named_lock("SHARE UPDATE EXCLUSIVE") == "ShareUpdateExclusiveLock"
    assert named_lock("SHARE ROW EXCLUSIVE on both tables") == "ShareRowExclusiveLock"
    assert named_lock("ALGORITHM=COPY") is None
