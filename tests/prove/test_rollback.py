"""``dbsync rollback`` rehearsed on SQLite, PostgreSQL and MariaDB.

The inventory example at release 1 is expanded to release 2; the data migrations
run half way; release-2 code writes display names longer than the release-1 ``name``
column keeps (their only whole copy is in ``display_name``).  Then: the dry run
changes nothing and names the rows at risk; the rollback without ``--force`` is
refused in one line; with ``--force``, while release-1 writers keep inserting and
updating, it reverts release 2's expand, the writers see no error, every value
release 1 can see is intact, the ledger forgets the reverted migrations, the force
is kept in the overrides history, and a second expand and its data migrations work.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

import sqlalchemy as sa

from ..gate.conftest import ROWS, App
from ..helpers import copy_example, forget_example_modules, set_ini_option

LONG_NAMES = 7


def _release1_writer(engine: sa.Engine, number: int, stop: threading.Event, errors: list, written: dict):
    """Release-1 code: inserts nodes and updates ``extra`` (of its own third of the rows, so that
    the last value it wrote is the row's value), one short transaction each."""
    rng = random.Random(number)
    first_id = next_id = 100_000 * (number + 1)
    mine = [i for i in range(1, ROWS + 1) if i % 3 == number]
    while not stop.is_set():
        try:
            with engine.begin() as conn:
                if rng.random() < 0.5:
                    conn.execute(sa.text("INSERT INTO nodes (id, uuid, name, extra) VALUES (:i, :u, :n, :e)"),
                                 {"i": next_id, "u": str(uuid.uuid4()), "n": f"w{next_id}", "e": f"e{next_id}"})
                    written[next_id] = (f"w{next_id}", f"e{next_id}")
                    next_id += 1
                else:
                    target = rng.choice(mine)
                    conn.execute(sa.text("UPDATE nodes SET extra = :e WHERE id = :i"),
                                 {"e": f"u{first_id}-{target}", "i": target})
                    written[target] = (f"n{target}", f"u{first_id}-{target}")
        except Exception as exc:  # noqa: BLE001 - any error of release-1 code is a finding
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        time.sleep(0.002)


def _columns(app: App, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(app.engine).get_columns(table)}


def test_rollback_rehearsal(tmp_path, db_url, backend, capsys):
    forget_example_modules()
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, db_url)
    if backend == "sqlite":
        app.engine.dispose()
        app.engine = sa.create_engine(db_url, connect_args={"timeout": 60})
    try:
        app.alembic_upgrade("r1_inventory")
        app.seed_release1()
        assert app.dbsync("upgrade", "--expand") == 0
        assert app.dbsync("online_data_migrations", "--max-count", str(ROWS // 2)) == 1  # half done
        with app.engine.begin() as conn:  # release 2 writes display names release 1 cannot hold whole
            for i in range(1, LONG_NAMES + 1):
                display = f"node {i} " + "x" * 80
                conn.execute(sa.text("UPDATE nodes SET display_name = :d, name = :n WHERE id = :i"),
                             {"d": display, "n": display[:64], "i": i})
        schema_before = {t: _columns(app, t) for t in ("nodes", "ports")}

        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 0
        out = capsys.readouterr().out
        assert "would revert r2_meta_display_name_version" in out
        assert f"nodes.display_name: {LONG_NAMES} row(s)" in out
        assert {t: _columns(app, t) for t in ("nodes", "ports")} == schema_before

        assert app.dbsync("rollback") == 4
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{LONG_NAMES} row(s) would be lost" in err and "--force" in err
        assert {t: _columns(app, t) for t in ("nodes", "ports")} == schema_before

        stop, errors, written = threading.Event(), [], {}
        writers = [threading.Thread(target=_release1_writer, args=(app.engine, n, stop, errors, written))
                   for n in range(3)]
        for writer in writers:
            writer.start()
        time.sleep(0.3)
        try:
            code = app.dbsync("rollback", "--force", "--reason", "release 2 broke login")
        finally:
            time.sleep(0.3)
            stop.set()
            for writer in writers:
                writer.join()
        assert code == 0, capsys.readouterr().err
        assert errors == [], errors[:5]
        assert app.heads() == ["r1_inventory"]
        assert _columns(app, "nodes") == schema_before["nodes"] - {"meta", "display_name", "version"}
        assert _columns(app, "ports") == schema_before["ports"] - {"version"}

        with app.engine.connect() as conn:  # every value release 1 can see
            rows = {r.id: (r.name, r.extra) for r in conn.execute(sa.text("SELECT id, name, extra FROM nodes"))}
            ledger = {r.name for r in conn.execute(sa.text("SELECT name FROM migrations_policy_data_migrations"))}
            forced = conn.execute(sa.text("SELECT command, reason, remaining FROM migrations_policy_gate_overrides"
                                          )).all()
        expected = {i: (f"n{i}", f'{{"i": {i}}}') for i in range(1, ROWS + 1)}
        for i in range(1, LONG_NAMES + 1):  # release 2 wrote these names (cut to what release 1 holds)
            expected[i] = ((f"node {i} " + "x" * 80)[:64], expected[i][1])
        for key, (name, extra) in written.items():
            expected[key] = (expected[key][0] if key in expected else name, extra)
        assert rows == expected
        assert not ledger & {"nodes_extra_to_meta", "nodes_name_to_display_name"}
        # counted while release 1 kept writing: its updates of extra after the copy make meta differ too
        assert [tuple(f)[:2] for f in forced] == [("rollback", "release 2 broke login")]
        assert forced[0].remaining >= LONG_NAMES

        with app.engine.begin() as conn:  # release 1 keeps working
            conn.execute(sa.text("INSERT INTO nodes (id, uuid, name, extra) VALUES (9999999, 'after', 'a', 'b')"))
            conn.execute(sa.text("UPDATE nodes SET extra = 'c' WHERE id = 9999999"))
            assert conn.execute(sa.text("SELECT extra FROM nodes WHERE id = 9999999")).scalar_one() == "c"

        assert app.dbsync("upgrade", "--expand") == 0  # a second expand works
        assert app.dbsync("online_data_migrations") == 0
        assert {"meta", "display_name", "version"} <= _columns(app, "nodes")
        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 0  # and could be rolled back again
        assert "would revert r2_meta_display_name_version" in capsys.readouterr().out
    finally:
        app.engine.dispose()
        forget_example_modules()


def test_rollback_is_refused_once_the_contract_ran(tmp_path, db_url, backend, capsys):
    forget_example_modules()
    app = App(copy_example(tmp_path), db_url)
    try:
        app.alembic_upgrade("r1_inventory")
        app.seed_release1()
        assert app.dbsync("upgrade", "--expand") == 0
        assert app.dbsync("online_data_migrations") == 0
        assert app.dbsync("upgrade", "--contract") == 0
        capsys.readouterr()
        assert app.dbsync("rollback", "--dry-run") == 4
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "nothing to roll back" in err and "r3_drop_extra_name" in err
        assert app.dbsync("rollback", "--force", "--reason", "x") == 4
        assert "r3_drop_extra_name" in app.heads()
    finally:
        app.engine.dispose()
        forget_example_modules()
