"""One downgrade statement that destroys two tables is judged under the locks of both.

Release 2 (the inventory example, expanded) has two tables of its own, empty when the rollback starts.
Release 2's ``downgrade()`` gains one statement naming both (``DROP TABLE a, b``; on PostgreSQL also
``TRUNCATE a, b``), in a drawn order.  A release-2 writer has inserted a row into the second table and
not committed yet; it commits the moment the rollback waits for a lock.  Counted under the lock of
the first table only, the second looked empty, the statement then waited for the writer and dropped
its committed row.  By a drawn route (``dbsync rollback``, plain ``alembic downgrade``) the row must
survive: the run refused (exit 4), the row in place.

``MP_TWO_TABLES_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random
import textwrap
import threading
import time

import pytest
import sqlalchemy as sa

from ..helpers import forget_example_modules
from .test_release_state import EXPAND_FILE, _alembic, _app


def _waiting(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            query = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                     "AND datname = current_database()")
        else:
            query = ("SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() "
                     "AND state LIKE 'Waiting for table metadata lock%'")
        return bool(conn.execute(sa.text(query)).scalar())


def _write_and_commit_when_waited(engine: sa.Engine, table: str, ready: threading.Event, stop: threading.Event,
                                  errors: list) -> None:
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {table} (id, note) VALUES (1, 'written by release 2')"))
            ready.set()
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline and not _waiting(engine):
                time.sleep(0.01)
    except Exception as exc:  # noqa: BLE001 - the writer's error is a finding
        errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        ready.set()


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_a_statement_destroying_two_tables_is_counted_under_both_locks(tmp_path, db_url, backend, capsys):
    seed = int(os.environ.get("MP_TWO_TABLES_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    app = _app(tmp_path, db_url)
    try:
        with app.engine.begin() as conn:
            for table in ("rt2_a", "rt2_b"):
                conn.execute(sa.text(f"CREATE TABLE {table} (id integer PRIMARY KEY, note varchar(40))"))
        first, second = rng.sample(["rt2_a", "rt2_b"], 2)
        verb = rng.choice(["DROP TABLE", "TRUNCATE"] if backend == "postgresql" else ["DROP TABLE"])
        route = rng.choice(["dbsync rollback", "alembic downgrade"])
        path = app.ini.parent.joinpath(*EXPAND_FILE)
        head, _, body = path.read_text().partition("def downgrade() -> None:\n")
        path.write_text(head + "def downgrade() -> None:\n" + textwrap.indent(
            f'op.execute("{verb} {first}, {second}")\n', "    ") + body)
        print(f"seed {seed}: {verb} {first}, {second}; writer on {second}; route {route}")
        forget_example_modules()
        ready, stop, errors = threading.Event(), threading.Event(), []
        writer = threading.Thread(target=_write_and_commit_when_waited,
                                  args=(app.engine, second, ready, stop, errors))
        writer.start()
        ready.wait(30)
        capsys.readouterr()
        try:
            if route == "dbsync rollback":
                code = app.dbsync("rollback")
                output = capsys.readouterr().err
            else:
                output = _alembic(app, "downgrade", "r1_inventory")
                code = 4 if "downgrade refused" in output else None
        finally:
            stop.set()
            writer.join()
        assert errors == [], errors
        assert second in sa.inspect(app.engine).get_table_names(), (seed, code, output)
        with app.engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT note FROM {second}")).scalars().all()
        assert rows == ["written by release 2"], (seed, code, output)
        assert code == 4 and "Traceback" not in output, (seed, code, output)
    finally:
        app.engine.dispose()
        forget_example_modules()
