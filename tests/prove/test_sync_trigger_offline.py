"""One revision, one behaviour: ``op.create_sync_trigger`` online and offline (``--sql``) agree.

Online the INSERT rule of a pair comes from the catalog (does the new column have a server
default? both columns: refused).  Offline there is no catalog.  Drawn: the server defaults of the
two columns, the rule the script records (``new_has_default``: not given, False, True), and an
``up`` expression or none.  The same call runs online, then offline, and the offline SQL is run on
the same database.  Either both install exactly the same triggers, or the offline one is refused
where it is generated, or its SQL fails where it runs, installing nothing: never a trigger the
online run would not have installed.

``MP_SYNC_OFFLINE_SEEDS`` (default 4) draws per backend; ``MP_SYNC_OFFLINE_SEED`` replays one.
"""

from __future__ import annotations

import os
import random

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from migrations_policy.window import sync_triggers  # registers op.create_sync_trigger
from migrations_policy.window.sync_triggers import SyncPairRefused


def _seeds() -> list[int]:
    fixed = os.environ.get("MP_SYNC_OFFLINE_SEED")
    if fixed:
        return [int(fixed)]
    return [random.randrange(10**9) for _ in range(int(os.environ.get("MP_SYNC_OFFLINE_SEEDS", "4")))]


class _Statements:
    """An offline run's output buffer: one ``write`` per statement."""

    def __init__(self):
        self.texts: list[str] = []

    def write(self, text: str) -> None:
        text = text.strip()
        if text:
            self.texts.append(text[:-1] if text.endswith(";") else text)

    def flush(self) -> None:
        pass


def _installed(engine) -> dict:
    with engine.connect() as conn:
        return sync_triggers.trigger_definitions(conn, sync_triggers.sync_triggers(conn))


def _call(operations: Operations, recorded, up) -> None:
    kw = {} if recorded is None else {"new_has_default": recorded}
    if up is not None:
        kw["up"] = up
    operations.create_sync_trigger("pairs", old="old", new="new", **kw)


@pytest.mark.parametrize("seed", _seeds())
def test_create_sync_trigger_does_offline_what_it_does_online_or_refuses(db_url, backend, seed):
    rng = random.Random(seed)
    old_default, new_default = rng.choice([None, "od"]), rng.choice([None, "nd"])
    recorded = rng.choice([None, False, True])
    up = rng.choice([None, sa.func.upper(sa.column("old", sa.String()))])
    drawn = (f"{backend} seed {seed} (MP_SYNC_OFFLINE_SEED={seed} replays it): old default {old_default!r}, "
             f"new default {new_default!r}, new_has_default={recorded}, up={'upper' if up is not None else None}")
    print(drawn)
    engine = sa.create_engine(db_url)
    metadata = sa.MetaData()
    sa.Table("pairs", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("old", sa.String(20), server_default=old_default),
             sa.Column("new", sa.String(20), server_default=new_default))
    metadata.create_all(engine)
    try:
        online = None
        try:
            with engine.begin() as conn:
                _call(Operations(MigrationContext.configure(conn)), recorded, up)
            online = _installed(engine)
            assert online, f"{drawn}: online installed nothing and refused nothing"
        except SyncPairRefused as exc:
            print("online refused:", exc)
            assert _installed(engine) == {}, f"{drawn}: a refused online call installed triggers"
        with engine.begin() as conn:
            Operations(MigrationContext.configure(conn)).drop_sync_trigger("pairs", old="old", new="new")

        out = _Statements()
        offline = MigrationContext.configure(dialect=engine.dialect, opts={"as_sql": True, "output_buffer": out})
        try:
            _call(Operations(offline), recorded, up)
        except SyncPairRefused as exc:  # refused where the SQL is generated: one line, no SQL
            print("offline refused:", exc)
            assert "\n" not in str(exc) and not out.texts, f"{drawn}: offline refusal wrote SQL or several lines"
            return
        failed = None
        try:
            with engine.begin() as conn:
                for text in out.texts:
                    conn.exec_driver_sql(text)
        except sa.exc.DBAPIError as exc:
            failed = str(exc.orig)
        if failed is not None:
            print("offline SQL failed where it ran:", failed)
            if backend == "mysql":  # DDL is not transactional there: the guard comes first
                assert "this database differs" in failed, f"{drawn}: the offline SQL failed otherwise: {failed}"
            assert _installed(engine) == {}, f"{drawn}: the failed offline SQL left triggers behind"
            assert online is None, f"{drawn}: the offline SQL failed where the online call installed triggers"
            return
        assert online is not None, f"{drawn}: offline installed triggers where online refused"
        assert _installed(engine) == online, f"{drawn}: offline installed other triggers than online"
    finally:
        with engine.begin() as conn:
            Operations(MigrationContext.configure(conn)).drop_sync_trigger("pairs", old="old", new="new")
        metadata.drop_all(engine)
        engine.dispose()
