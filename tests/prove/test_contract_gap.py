"""The gap between a contract's ``DROP TRIGGER`` and its ``DROP COLUMN``, with release-N code still writing.

The global rule (operator_guide, "contract") assumes no release-N code is left when the contract
runs; nothing in the database can tell a release-N session from a release-N+1 one.  This test
shows what happens when the rule is broken anyway: the inventory example is expanded, migrated
and contracted; while the contract runs, right after it drops the sync trigger of a drawn pair
(``extra``/``meta`` or ``name``/``display_name``) and before it drops the old column, a
release-N writer (another connection, the old code) updates the old column of a drawn row.

* PostgreSQL: the revision is one transaction; the writer waits for the table's lock and, once
  the contract commits, fails loudly (the column is gone): nothing is lost silently.
* MariaDB: every DDL commits on its own; the writer's UPDATE commits in the gap, no trigger
  carries it to the new column, and ``DROP COLUMN`` takes it: **lost, with exit 0**.  This is
  the documented limit (operator_guide, "The MariaDB gap"); the test asserts it so that a change
  of behaviour is seen (when the gate closes the gap, turn the assertion around).
* SQLite: the revision holds the database's write lock: the writer waits and then fails loudly
  (the column is gone), as on PostgreSQL.

``MP_CONTRACT_GAP_SEED`` replays a draw.
"""

from __future__ import annotations

import os
import random
import threading

import sqlalchemy as sa
from sqlalchemy import event

from ..gate.conftest import ROWS
from ..helpers import forget_example_modules
from .test_release_state import _app


def test_a_release_n_write_in_the_contract_gap(tmp_path, db_url, backend):
    seed = int(os.environ.get("MP_CONTRACT_GAP_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    old, new = rng.choice([("extra", "meta"), ("name", "display_name")])
    key = rng.randint(1, ROWS)
    value = f"release N in the gap {rng.randrange(10**6)}"
    about = f"seed {seed} ({backend}): pair {old}/{new}, row {key}"
    app = _app(tmp_path, db_url)
    writer_engine = sa.create_engine(db_url, connect_args={"timeout": 30} if backend == "sqlite" else {})
    outcome: dict = {}
    threads: list[threading.Thread] = []

    def release_n_write() -> None:
        try:
            with writer_engine.begin() as conn:
                conn.execute(sa.text(f"UPDATE nodes SET {old} = :v WHERE id = :k"), {"v": value, "k": key})
            outcome["committed"] = True
        except Exception as exc:  # noqa: BLE001 - the writer's failure is what the test reads
            outcome["error"] = str(exc).splitlines()[0][:200]

    dropped: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        """Right before the first statement after the pair's last trigger went (the gap)."""
        text = statement.lstrip().upper()
        if threads or conn.engine is writer_engine:
            return
        if text.startswith("DROP TRIGGER") and f"{old}_{new}".upper() in text:
            # the trigger that carries an UPDATE of the old column: MariaDB's _bu, SQLite's _au_up
            last = {"mysql": "_BU", "sqlite": "_AU_UP"}.get(backend, "")
            if last in text.split(" ON ")[0].replace('"', "").replace("`", "").rstrip():
                dropped.append(statement)
            return
        if not dropped or text.startswith(("DROP TRIGGER", "DROP FUNCTION")):
            return
        thread = threading.Thread(target=release_n_write)
        threads.append(thread)
        thread.start()
        thread.join(3)  # MariaDB: committed at once; PostgreSQL/SQLite: waits for the contract's lock

    try:
        forget_example_modules()
        event.listen(sa.engine.Engine, "before_cursor_execute", before)
        try:
            code = app.dbsync("upgrade", "--contract")
        finally:
            event.remove(sa.engine.Engine, "before_cursor_execute", before)
        for thread in threads:
            thread.join(60)
        assert threads, (about, "the contract dropped no sync trigger of the pair")
        assert code == 0, (about, code)
        with app.engine.connect() as conn:
            kept = conn.execute(sa.text(f"SELECT {new} FROM nodes WHERE id = :k"), {"k": key}).scalar_one()
        if backend == "mysql":  # the gap: committed between DROP TRIGGER and DROP COLUMN, then dropped
            assert outcome.get("committed") and kept != value, (about, outcome, kept)
        else:  # one transaction: the writer waited, then failed on the missing column
            assert "committed" not in outcome and "error" in outcome, (about, outcome, kept)
    finally:
        writer_engine.dispose()
        app.engine.dispose()
        forget_example_modules()
