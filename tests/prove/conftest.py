"""Fixtures of the fault and load tests: a project whose data migrations are checked against a
reference computed in Python from the seed, never from the database.

``accounts`` (dense integer keys: range stepping) gets a set-based migration,
``events`` (sparse keys: keyset pagination) a function-form one that reads, then
writes row by row.  Both bump ``n``: a row migrated twice ends with ``n == 2``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import sqlalchemy as sa

from ..helpers import write_data_project

from migrations_policy.data import ledger

metadata = sa.MetaData()
accounts = sa.Table(
    "accounts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(40), nullable=False),
    sa.Column("cents", sa.Integer, nullable=False),
    sa.Column("label", sa.String(40)),
    sa.Column("total", sa.Integer),
    sa.Column("n", sa.Integer, nullable=False, server_default="0"),
)
events = sa.Table(
    "events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("payload", sa.String(40), nullable=False),
    sa.Column("digest", sa.String(60)),
    sa.Column("n", sa.Integer, nullable=False, server_default="0"),
)

APP_MODULE = '''
import sqlalchemy as sa
from migrations_policy.data import DataMigration, data_migration

accounts = sa.table("accounts", sa.column("id", sa.Integer), sa.column("name", sa.String),
                    sa.column("cents", sa.Integer), sa.column("label", sa.String),
                    sa.column("total", sa.Integer), sa.column("n", sa.Integer))
events = sa.table("events", sa.column("id", sa.Integer), sa.column("payload", sa.String),
                  sa.column("digest", sa.String), sa.column("n", sa.Integer))

account_labels = DataMigration(
    "account_labels", table=accounts, key="id", pending=accounts.c.label.is_(None),
    values={"label": sa.func.upper(accounts.c.name), "total": accounts.c.cents * 3 + accounts.c.id,
            "n": accounts.c.n + 1})


@data_migration("event_digests", table=events, key="id", pending=events.c.digest.is_(None))
def event_digests(connection, batch):
    """Read the batch, then write row by row (only the migration lock keeps runners apart)."""
    rows = connection.execute(sa.select(events.c.id, events.c.payload, events.c.n).where(batch.where)).all()
    for key, payload, n in rows:
        connection.execute(sa.update(events).where(events.c.id == key)
                           .values(digest=payload[::-1] + ":" + str(len(payload)), n=n + 1))
    return len(rows)
'''


# -- the reference: what every row must hold, computed from the seed alone ----------
def seed_rows(seed: int, accounts_count: int, events_count: int, first_id: int = 1) -> tuple[list, list]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    account_rows = [{"id": first_id + i, "name": "".join(rng.choices(letters, k=rng.randint(1, 40))),
                     "cents": rng.randint(-10**6, 10**6)} for i in range(accounts_count)]
    event_id = first_id * 10
    event_rows = []
    for _ in range(events_count):
        event_id += rng.randint(3, 11)  # sparse: keyset pagination
        event_rows.append({"id": event_id, "payload": "".join(rng.choices(letters, k=rng.randint(1, 30)))})
    return account_rows, event_rows


def expected_account(row: dict) -> tuple:
    return row["id"], row["name"], row["cents"], row["name"].upper(), row["cents"] * 3 + row["id"], 1


def expected_event(row: dict) -> tuple:
    return row["id"], row["payload"], row["payload"][::-1] + ":" + str(len(row["payload"])), 1


def insert_seed(engine: sa.Engine, account_rows: list, event_rows: list) -> None:
    with engine.begin() as conn:
        for start in range(0, len(account_rows), 5000):
            conn.execute(sa.insert(accounts), account_rows[start:start + 5000])
        for start in range(0, len(event_rows), 5000):
            conn.execute(sa.insert(events), event_rows[start:start + 5000])


def create_schema(engine: sa.Engine) -> None:
    metadata.create_all(engine)
    ledger.metadata.create_all(engine)


def table_rows(engine: sa.Engine) -> tuple[list, list]:
    with engine.connect() as conn:
        got_accounts = [tuple(r) for r in conn.execute(sa.select(
            accounts.c.id, accounts.c.name, accounts.c.cents, accounts.c.label, accounts.c.total, accounts.c.n)
            .order_by(accounts.c.id))]
        got_events = [tuple(r) for r in conn.execute(sa.select(
            events.c.id, events.c.payload, events.c.digest, events.c.n).order_by(events.c.id))]
    return got_accounts, got_events


def check_partial(engine: sa.Engine, account_rows: list, event_rows: list) -> int:
    """Every row is either untouched or exactly the reference (a batch is all or nothing, once):
    returns how many rows are migrated."""
    got_accounts, got_events = table_rows(engine)
    assert [r[0] for r in got_accounts] == [r["id"] for r in account_rows], "account rows lost or added"
    assert [r[0] for r in got_events] == [r["id"] for r in event_rows], "event rows lost or added"
    migrated = 0
    for got, row in zip(got_accounts, account_rows):
        if got[5] == 0:
            assert got == (row["id"], row["name"], row["cents"], None, None, 0)
        else:
            assert got == expected_account(row)
            migrated += 1
    for got, row in zip(got_events, event_rows):
        if got[3] == 0:
            assert got == (row["id"], row["payload"], None, 0)
        else:
            assert got == expected_event(row)
            migrated += 1
    return migrated


def check_complete(engine: sa.Engine, account_rows: list, event_rows: list) -> None:
    got_accounts, got_events = table_rows(engine)
    assert got_accounts == [expected_account(r) for r in account_rows]
    assert got_events == [expected_event(r) for r in event_rows]


@pytest.fixture
def prove_project(tmp_path, db_url) -> Path:
    """An alembic.ini whose [migrations_policy] names the prove app module."""
    return write_data_project(tmp_path, "prove_app", APP_MODULE)
