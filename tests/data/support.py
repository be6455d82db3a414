"""Fixtures for the data-migration tests: a small ``items`` schema and a project directory.

``items(id, src, dst, n)``: the usual migration copies ``src`` to ``dst`` where
``dst`` is NULL; ``n`` counts how often a row was migrated (must end at 1).
``item_log`` gets one row per row a function-form migration handled, so a row
migrated twice shows up as a duplicate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from ..helpers import write_data_project

from migrations_policy.data import ledger

metadata = sa.MetaData()
items = sa.Table(
    "items", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("src", sa.String(40)),
    sa.Column("dst", sa.String(40)),
    sa.Column("n", sa.Integer, nullable=False, server_default="0"),
)
item_log = sa.Table(
    "item_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("item_id", sa.Integer, nullable=False),
)

# The project module the CLI tests load (written next to their alembic.ini).
APP_MODULE = '''
import os
import time

import sqlalchemy as sa
from migrations_policy.data import DataMigration, data_migration

items = sa.table("items", sa.column("id", sa.Integer), sa.column("src"), sa.column("dst"), sa.column("n"))
item_log = sa.table("item_log", sa.column("item_id", sa.Integer))
pending = sa.and_(items.c.dst.is_(None), items.c.src.is_not(None))

copy_items = DataMigration("copy_items", table=items, key="id", pending=pending,
                           values={"dst": items.c.src, "n": items.c.n + 1})


@data_migration("copy_items_logged", table=items, key="id", pending=pending, options={"pause": 0.0})
def copy_items_logged(connection, batch):
    """Read, then write, row by row: only the migration lock keeps two runners apart."""
    rows = connection.execute(sa.select(items.c.id, items.c.src, items.c.n).where(batch.where)).all()
    time.sleep(batch.options["pause"])
    for key, src, n in rows:
        connection.execute(sa.insert(item_log).values(item_id=key))
        connection.execute(sa.update(items).where(items.c.id == key).values(dst=src, n=n + 1))
    return len(rows)
'''


def create_schema(engine: sa.Engine, rows: int = 0, start: int = 1, step: int = 1) -> None:
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)
    insert_items(engine, rows, start, step)


def insert_items(engine: sa.Engine, rows: int, start: int = 1, step: int = 1, src: str = "v") -> None:
    if rows:
        with engine.begin() as conn:
            conn.execute(sa.insert(items), [{"id": start + i * step, "src": f"{src}{i}"} for i in range(rows)])


def scalar(engine: sa.Engine, query) -> int:
    with engine.connect() as conn:
        return conn.execute(query).scalar()


@pytest.fixture
def project_dir(tmp_path, db_url) -> Path:
    """An alembic.ini whose [migrations_policy] names the test app module, with --url for the test db."""
    return write_data_project(tmp_path, "odm_app", APP_MODULE)


def dbsync_argv(project: Path, url: sa.URL, *args: str) -> list[str]:
    code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"
    return [sys.executable, "-c", code, "-c", str(project / "alembic.ini"),
            "--url", url.render_as_string(hide_password=False), *args]


def run_dbsync(project: Path, url: sa.URL, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(dbsync_argv(project, url, *args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(project)})


def run_json(project: Path, url: sa.URL, *args: str) -> tuple[int, dict]:
    proc = run_dbsync(project, url, "--format", "json", "online_data_migrations", *args)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)
