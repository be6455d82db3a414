"""No revision run while the rolling window is open silently removes a sync trigger.

The inventory example is expanded to release 2: sync triggers keep ``nodes.name``
/ ``display_name`` and ``nodes.extra`` / ``meta`` in step while release 1 still
writes only the old columns.  Its release-3 contract is removed.  A generated
*attack* revision on the expand branch (release 3's unrelated change to
``nodes``) then does one to three things drawn at random:

* batch operations of several kinds, each at most once (on SQLite they re-create the table,
  ``DROP TABLE nodes`` included, which drops every trigger on it): alter a
  column's type or nullability, add then drop an unrelated column, create and
  drop a unique or check constraint, an index, ``recreate="always"``, the same
  on ``ports`` too;
* a raw drop of one of the sync triggers (``op.execute`` / ``exec_driver_sql``;
  PostgreSQL also ``DROP FUNCTION ... CASCADE``);
* a deliberate ``op.drop_sync_trigger`` while both columns remain (no contract).

After the backfill (``dbsync online_data_migrations``) it is applied by
``dbsync upgrade --expand`` or plain ``alembic upgrade heads``.
Then release 1 writes the old columns (UPDATE and INSERT) and the new columns
must have followed — or the revision was refused: exit 4 (alembic: the error),
one line naming the revision, the table and the trigger, the revision not
recorded, every sync trigger still installed with its definition, the schema
as it was.

``MP_SYNC_ATTACKS`` attacks per backend (default 10 on SQLite, 5 on the servers)
are drawn from a printed seed (``MP_SYNC_ATTACK_SEED`` replays one).
"""

from __future__ import annotations

import os
import random
import textwrap
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from migrations_policy.window.sync_triggers import sync_trigger_name, sync_triggers

from ..gate.conftest import App
from .attacks import EXPAND_HEAD, _fresh_url
from .attacks import expanded_app as _expanded_app
from .attacks import run_route as _run_route

ATTACK_REV = "r3_sync_attack"
PAIRS = (("name", "display_name"), ("extra", "meta"))

#: Batch forms (each may re-create nodes on SQLite): source inside upgrade().
BATCH = {
    "alter_type": 'with op.batch_alter_table("nodes") as b:\n'
                  '    b.alter_column("provision_state", type_=sa.String(32), existing_type=sa.String(15),'
                  ' existing_nullable=False, existing_server_default="enroll")',
    "alter_nullable": 'with op.batch_alter_table("nodes") as b:\n'
                      '    b.alter_column("uuid", nullable=True, existing_type=sa.String(36))',
    "add_drop_column": 'with op.batch_alter_table("nodes") as b:\n    b.add_column(sa.Column("note", sa.Text()))\n'
                       'with op.batch_alter_table("nodes") as b:\n    b.drop_column("note")',
    "add_column": 'with op.batch_alter_table("nodes") as b:\n    b.add_column(sa.Column("note2", sa.Text()))',
    "unique": 'with op.batch_alter_table("nodes") as b:\n'
              '    b.create_unique_constraint("uq_nodes_uuid_state", ["uuid", "provision_state"])',
    "drop_unique": 'with op.batch_alter_table("nodes") as b:\n    b.drop_constraint("uq_nodes_uuid", type_="unique")',
    "check": 'with op.batch_alter_table("nodes") as b:\n'
             '    b.create_check_constraint("ck_nodes_state", sa.text("length(provision_state) > 0"))',
    "index": 'with op.batch_alter_table("nodes") as b:\n    b.create_index("ix_nodes_name_x", ["provision_state"])\n'
             'with op.batch_alter_table("nodes") as b:\n    b.drop_index("ix_nodes_name_x")',
    "recreate_always": 'with op.batch_alter_table("nodes", recreate="always") as b:\n    pass',
    "other_table_too": 'with op.batch_alter_table("ports", recreate="always") as b:\n'
                       '    b.add_column(sa.Column("label", sa.Text()))\n'
                       'with op.batch_alter_table("nodes", recreate="always") as b:\n'
                       '    b.add_column(sa.Column("note3", sa.Text()))',
}


def _trigger_names(dialect: str, old: str, new: str) -> list[str]:
    base = sync_trigger_name("nodes", old, new)
    suffixes = {"sqlite": ("_ai_up", "_au_up"), "mysql": ("_bi", "_bu"), "postgresql": ("",)}[dialect]
    return [base + s for s in suffixes]


def _raw_drops(dialect: str, rng: random.Random) -> tuple[str, str]:
    """(kind, source) of a raw drop of one sync trigger."""
    old, new = rng.choice(PAIRS)
    name = rng.choice(_trigger_names(dialect, old, new))
    q = (lambda n: f"`{n}`") if dialect == "mysql" else (lambda n: f'"{n}"')
    statements = [f"DROP TRIGGER {name}" + (" ON nodes" if dialect == "postgresql" else ""),
                  f"DROP TRIGGER IF EXISTS {q(name)}" + (" ON nodes" if dialect == "postgresql" else "")]
    if dialect == "postgresql":
        statements.append(f"DROP FUNCTION {name}() CASCADE")
    sql = rng.choice(statements)
    if rng.random() < 0.5:
        return "raw_op_execute", f"op.execute({sql!r})"
    return "raw_driver_sql", f"op.get_bind().exec_driver_sql({sql!r})"


#: Forms that re-create nodes on every dialect (``recreate="always"``: the hand-written rebuild's route).
REBUILDS = {"recreate_always", "other_table_too"}
#: On the servers ports' foreign key to nodes is dropped around a rebuild (PostgreSQL refuses to
#: drop nodes' primary key under it), and put back without checking the rows.
_FK_AROUND = {
    "postgresql": ('op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")',
                   'op.create_foreign_key("fk_ports_node_id_nodes", "ports", "nodes", ["node_id"], ["id"],'
                   ' postgresql_not_valid=True)'),
    "mysql": ('op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")',
              'op.execute("SET foreign_key_checks = 0")\n'
              'op.create_foreign_key("fk_ports_node_id_nodes", "ports", "nodes", ["node_id"], ["id"])\n'
              'op.execute("SET foreign_key_checks = 1")'),
}


@dataclass(frozen=True)
class Attack:
    parts: tuple[tuple[str, str], ...]  # (kind, source)
    route: str

    @property
    def explicit_drop(self) -> bool:
        return any(kind.startswith("raw_") or kind == "drop_sync_trigger" for kind, _ in self.parts)

    @property
    def rebuilds(self) -> bool:
        return any(kind in REBUILDS for kind, _ in self.parts)

    def refused_offline(self, backend: str) -> bool:
        """An explicit drop the gate's offline pass sees, so it refuses before any DDL (on MariaDB
        also a rebuild, whose DDL would commit at once): the offline run stops at ``op.get_bind()``
        (no connection there), so not one after a ``raw_driver_sql``."""
        kinds = [kind for kind, _ in self.parts]
        seen = kinds[:kinds.index("raw_driver_sql")] if "raw_driver_sql" in kinds else kinds
        return any(kind in ("raw_op_execute", "drop_sync_trigger")
                   or backend == "mysql" and kind in REBUILDS for kind in seen)

    def refused(self, backend: str) -> bool:
        """Explicit drops always; on MariaDB also a rebuild (its DDL commits at once: the table
        would be dropped, triggers and all, outside a transaction)."""
        return self.explicit_drop or backend == "mysql" and self.rebuilds

    def __str__(self) -> str:
        return f"{'+'.join(kind for kind, _ in self.parts)}/{self.route!r}"


def _draw(backend: str) -> tuple[int, list[Attack]]:
    seed = int(os.environ.get("MP_SYNC_ATTACK_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(f"{seed}-{backend}")
    dialect = "mysql" if backend == "mysql" else backend
    count = int(os.environ.get("MP_SYNC_ATTACKS") or (10 if backend == "sqlite" else 5))
    attacks = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            # each batch form once per revision: twice, several would add the same column or
            # constraint twice, an invalid revision that fails on its own (no attack at all)
            unused = sorted(set(BATCH) - {kind for kind, _ in parts})
            if roll < 0.7 or dialect == "mysql" and roll < 0.8:
                kind = rng.choice(unused)
                parts.append((kind, BATCH[kind]))
            elif roll < 0.9:
                parts.append(_raw_drops(dialect, rng))
            else:
                old, new = rng.choice(PAIRS)
                parts.append(("drop_sync_trigger", f'op.drop_sync_trigger("nodes", old={old!r}, new={new!r})'))
        attacks.append(Attack(tuple(parts), rng.choice(("dbsync upgrade --expand", "alembic upgrade heads"))))
    return seed, attacks


def _install(app: App, attack: Attack, backend: str) -> None:
    root = app.ini.parent / "migrations" / "versions"
    (root / "contract" / "0003_r3_drop_extra_name.py").unlink()
    body = "\n".join(source for _, source in attack.parts)
    if attack.rebuilds and backend in _FK_AROUND:
        body = "\n".join([_FK_AROUND[backend][0], body, _FK_AROUND[backend][1]])
    (root / "expand" / "0003_r3_sync_attack.py").write_text(
        f'"""attack: {attack}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
        "import migrations_policy.window.sync_triggers\n\n"
        f"revision = {ATTACK_REV!r}\ndown_revision = {EXPAND_HEAD!r}\nbranch_labels = None\ndepends_on = None\n\n\n"
        f"def upgrade() -> None:\n{textwrap.indent(body, '    ')}\n\n\ndef downgrade() -> None:\n    pass\n")


def _catalog(app: App) -> list:
    with app.engine.connect() as conn:
        return sorted(sync_triggers(conn))


def _columns(app: App) -> dict[str, list[str]]:
    inspector = sa.inspect(app.engine)
    return {t: sorted(c["name"] for c in inspector.get_columns(t)) for t in ("nodes", "ports")}


def release_n_writes(app: App, rng: random.Random) -> list[str]:
    """Release 1 writes only the old columns; what did not reach the new ones."""
    nodes = sa.table("nodes", sa.column("id"), sa.column("uuid"), sa.column("name"), sa.column("extra"),
                     sa.column("display_name"), sa.column("meta"))
    written = {}
    with app.engine.begin() as conn:
        for key in rng.sample(range(1, 200), 5):
            values = {"name": f"late-{rng.randrange(10**6)}", "extra": f'{{"late": {rng.randrange(10**6)}}}'}
            conn.execute(sa.update(nodes).where(nodes.c.id == key).values(**values))
            written[key] = values
        for key in range(10_001, 10_004):
            values = {"name": f"new-{rng.randrange(10**6)}", "extra": f'{{"new": {rng.randrange(10**6)}}}'}
            conn.execute(sa.insert(nodes).values(id=key, uuid=f"u-{key}", **values))
            written[key] = values
    lost = []
    with app.engine.connect() as conn:
        for key, values in written.items():
            row = conn.execute(sa.select(nodes.c.display_name, nodes.c.meta).where(nodes.c.id == key)).one()
            if row.display_name != values["name"]:
                lost.append(f"nodes {key}: name -> display_name lost")
            if row.meta != values["extra"]:
                lost.append(f"nodes {key}: extra -> meta lost")
    return lost


def run_attacks(tmp_path, backend, capsys, attacks: list[Attack] | None = None) -> tuple[int, int, list[str]]:
    """(seed, attacks losing updates, failures) of the drawn attacks, or of *attacks*."""
    from ..conftest import get_server

    seed, drawn = _draw(backend)
    attacks = drawn if attacks is None else attacks
    failures, losing = [], 0
    for number, attack in enumerate(attacks):
        directory = tmp_path / f"attack{number}"
        directory.mkdir()
        url = _fresh_url(backend, directory)
        app = _expanded_app(directory, url)
        try:
            _install(app, attack, backend)
            assert app.dbsync("online_data_migrations") == 0  # the backfill is done; release 1 still runs
            catalog, columns = _catalog(app), _columns(app)
            code, output = _run_route(app, attack.route, capsys)
            problems = []
            recorded = ATTACK_REV in app.heads()
            if recorded:
                if attack.refused(backend):
                    problems.append("applied, not refused")
            else:
                lines = [line for line in output.strip().splitlines() if ATTACK_REV in line]
                if not attack.refused(backend):
                    problems.append("refused")
                elif code not in (None, 4):
                    problems.append(f"exit {code}")
                elif not any("nodes" in line and "mp_sync_nodes_" in line for line in lines):
                    problems.append("the refusal does not name the revision, table and trigger on one line")
                if "Traceback" in output:
                    problems.append("traceback")
                if _catalog(app) != catalog:
                    problems.append("sync triggers not as before")
                # MariaDB commits each DDL statement: a refusal at run time (a DROP TRIGGER or a
                # rebuild after op.get_bind(), which stops the offline pass) leaves the statements before it applied
                # (the journal resumes them; the triggers are intact)
                if _columns(app) != columns and not (backend == "mysql" and not attack.refused_offline(backend)):
                    problems.append("half-applied schema")
            lost = release_n_writes(app, random.Random(f"{seed}-{number}"))
            if lost:
                losing += 1
                problems.append(f"LATE UPDATES LOST ({len(lost)}: {lost[0]})")
            if problems:
                failures.append(f"{attack}: {', '.join(problems)} ({output.strip()[:300]})")
        finally:
            app.engine.dispose()
            if backend != "sqlite":
                get_server(backend).drop_database(url)
    return seed, losing, failures


def test_no_revision_silently_removes_a_sync_trigger(tmp_path, backend, capsys):
    seed, losing, failures = run_attacks(tmp_path, backend, capsys)
    assert not failures, (f"seed {seed} (MP_SYNC_ATTACK_SEED={seed} replays it); {losing} attack(s) lost "
                          "updates:\n" + "\n".join(failures))


@pytest.mark.parametrize("route", ["alembic upgrade heads", "dbsync upgrade --expand"])
@pytest.mark.parametrize("kinds", [("other_table_too", "drop_sync_trigger"), ("other_table_too",),
                                   ("add_column", "recreate_always")])
def test_a_rebuild_does_not_hide_what_follows_it_offline(tmp_path, backend, capsys, route, kinds):
    """A batch rebuild (``recreate="always"``) cannot run offline without the live table, so the
    offline pass used to stop there: it missed an ``op.drop_sync_trigger`` after it, and on MariaDB
    the rebuild of ports committed before the run refused nodes' (soak seed 418226734).  Now the
    pass records the block and goes on: an explicit drop is refused before any DDL everywhere, and
    on MariaDB (DDL commits at once) so is the rebuild of a table that carries sync triggers."""
    old, new = PAIRS[0]
    sources = {**BATCH, "drop_sync_trigger": f'op.drop_sync_trigger("nodes", old={old!r}, new={new!r})'}
    attack = Attack(tuple((kind, sources[kind]) for kind in kinds), route)
    assert attack.refused_offline(backend) == (attack.explicit_drop or backend == "mysql")
    _, losing, failures = run_attacks(tmp_path, backend, capsys, [attack])
    assert not failures and not losing, failures
