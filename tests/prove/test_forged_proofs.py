"""Forged completion proofs switch no guard off.

``data.completion`` remembers that a data migration is complete (a proof row and trigger-kept
dirty marks in ``migrations_policy_data_*``), so that ``status`` and ``check`` need not read the
whole table again.  Those tables are written by whoever may write the database: an application
user with DML rights (PostgreSQL and MariaDB: a role granted SELECT, INSERT, UPDATE, DELETE on
every table of the schema/database, the common grant; SQLite: any writer) can

* ``forge_proof``: delete the dirty marks and write proof rows whose fingerprints it computes with
  this library (nothing secret goes in them), for migrations that never ran;
* ``delete_marks``: after a real proof, write as release 1 does (a node without a version: the
  object-version migration is pending again) and delete the mark its write left;
* ``quiet`` (MariaDB/MySQL): after a real proof, set the session variable the runner uses to keep
  its own batches from marking, and write as release 1 does: no mark at all.

Then the release-3 contract is applied by a random route.  Whatever the forgery, the contract must be
refused (the unfinished migration named, nothing dropped, the version table unmoved): what a guard
lets destroy data on is recounted live, never read from a table anyone may write.

``MP_FORGED_PROOF_SEED`` replays a draw; ``MP_FORGED_PROOF_ATTACKS`` sets how many (default 2 per backend).
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass

import sqlalchemy as sa

from ..gate.conftest import ROWS, App
from ..helpers import database_user
from .attacks import draw, run_attacks, run_route

MIGRATIONS = ("nodes_extra_to_meta", "nodes_name_to_display_name", "port_node_orphans",
              "object_version_nodes", "object_version_ports")
FORMS = ("forge_proof", "delete_marks", "quiet")
ROUTES = ("dbsync upgrade --contract", "dbsync upgrade", "alembic upgrade heads")
CONTRACT = "r3_drop_extra_name"


@dataclass(frozen=True)
class Attack:
    form: str
    route: str
    seed: int

    def __str__(self) -> str:
        return f"{self.form}/{self.route!r}/{self.seed}"


def _all(backend: str) -> list[Attack]:
    rng = random.Random(backend)
    return [Attack(form, route, rng.randrange(1 << 20)) for form in FORMS for route in ROUTES
            if form != "quiet" or backend == "mysql"]


def application_user(app: App):
    """An engine of a DML-only user (SELECT, INSERT, UPDATE, DELETE on every table there is now;
    SQLite has no users: the same file)."""
    return database_user(app.engine, {None: "SELECT, INSERT, UPDATE, DELETE"})


def _registry(app: App) -> list:
    from migrations_policy.commands.data import project_registry

    project = app.project()
    try:
        return list(project_registry(project))
    finally:
        project.dispose()


def _proofs(app: App) -> set[str]:
    with app.engine.connect() as conn:
        if not sa.inspect(conn).has_table("migrations_policy_data_proofs"):
            return set()
        return set(conn.execute(sa.text("SELECT migration FROM migrations_policy_data_proofs")).scalars())


def _prove(app: App, rng: random.Random) -> None:
    """``check`` until every applicable migration's completion is remembered (the first call
    installs the mark triggers, a later one records the proofs)."""
    for _ in range(6):
        app.dbsync(rng.choice(["check", "status"]))
        if set(MIGRATIONS) <= _proofs(app):
            return
    raise AssertionError(f"no proof recorded for {set(MIGRATIONS) - _proofs(app)}")


def _release1_insert(conn: sa.Connection, rng: random.Random) -> int:
    """What release 1 writes: a node (with no version column in its model) and a port."""
    key = ROWS + 10_000 + rng.randint(0, 10_000)
    conn.execute(sa.text("INSERT INTO nodes (id, uuid, name, extra) VALUES (:i, :u, :n, :e)"),
                 {"i": key, "u": str(uuid.uuid4()), "n": f"late {key}", "e": f'{{"late": {key}}}'})
    return key


def _snapshot(app: App) -> dict:
    with app.engine.connect() as conn:
        return {table: sorted(tuple(r) for r in conn.execute(sa.select(sa.table(table, *(
            sa.column(c) for c in sorted(app.columns(table)))))))
            for table in ("nodes", "ports")}


def forge(app: App, attack: Attack, rng: random.Random) -> list[str]:
    """Carry out *attack*'s forgery; returns the migrations it left unfinished."""
    from migrations_policy.data.remaining import completion

    if attack.form == "forge_proof":
        # the orphans detached (the contract's FK validation would refuse on them anyway): only
        # the copies are left, and the forged proofs say they are done
        assert app.dbsync("online_data_migrations", "--migration", "port_node_orphans") == 0
        app.dbsync("check")  # installs no mark trigger while these migrations are pending
        completion.metadata.create_all(app.engine)  # the framework's tables, as any earlier install left them
        registry = _registry(app)
        with application_user(app) as user, user.begin() as conn:
            conn.execute(sa.text("DELETE FROM migrations_policy_data_dirty"))
            for migration in registry:
                fingerprint = completion.read(conn, migration).fingerprint
                if fingerprint is None:
                    continue
                conn.execute(sa.text("DELETE FROM migrations_policy_data_proofs WHERE migration = :m"),
                             {"m": migration.name})
                conn.execute(sa.text("INSERT INTO migrations_policy_data_proofs (migration, fingerprint) "
                                     "VALUES (:m, :f)"), {"m": migration.name, "f": fingerprint})
        return ["nodes_extra_to_meta", "nodes_name_to_display_name"]
    for name in MIGRATIONS:  # everything complete and proven: then one row becomes pending
        assert app.dbsync("online_data_migrations", "--migration", name) == 0, name
    _prove(app, rng)
    with application_user(app) as user, user.connect() as conn:
        if attack.form == "quiet":
            conn.execute(sa.text("SET @migrations_policy_quiet = 'object_version_nodes'"))
            conn.commit()
        with conn.begin():
            _release1_insert(conn, rng)
        if attack.form == "delete_marks":
            with conn.begin():
                conn.execute(sa.text("DELETE FROM migrations_policy_data_dirty "
                                     "WHERE migration = 'object_version_nodes'"))
    return ["object_version_nodes"]


def test_forged_completion_proofs_let_no_contract_run(tmp_path, backend, capsys):
    seed, attacks = draw(_all(backend), backend, "MP_FORGED_PROOF_ATTACKS", "MP_FORGED_PROOF_SEED",
                         int(os.environ.get("MP_FORGED_PROOF_DEFAULT", "2")))
    print(f"forged proofs: seed {seed}: {', '.join(map(str, attacks))}")

    def attempt(app: App, attack: Attack) -> list[str]:
        rng = random.Random(attack.seed)
        unfinished = forge(app, attack, rng)
        before = _snapshot(app)
        code, output = run_route(app, attack.route, capsys)
        problems = []
        if _snapshot(app) != before:
            problems.append("DATA CHANGED")
        if CONTRACT in app.heads():
            problems.append("contract applied")
        if code not in (None, 4):
            problems.append(f"exit {code}")
        if "Traceback" in output:
            problems.append("traceback")
        if not any(name in output for name in unfinished):
            problems.append(f"the refusal names none of {unfinished}")
        return problems and [*problems, f"({output.strip()[:500]})"]

    run_attacks(tmp_path, backend, seed, "MP_FORGED_PROOF_SEED", attacks, attempt)
