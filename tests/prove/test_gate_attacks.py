"""The contract gate under attack, on SQLite, PostgreSQL and MariaDB.

The inventory example is expanded to release 2 with rows whose data migrations
have not run.  Its release-3 contract (drop ``nodes.extra`` and ``nodes.name``) is
then rewritten by a generated *attack*: how it declares its requirements (ten
forms, from a literal to an aliased call the source scan cannot see), where the
call sits (before or after the drops), where the revision sits (contract branch,
a contract file parented on the expand head, a merge of both heads, a contract
revision in the expand directory, a requiring revision on the expand branch), how
env.py is wired (hook kept or removed) and which route applies it (dbsync
upgrade with each phase flag, alembic upgrade heads / <rev> / contract@+2, dbsync
and alembic stamp).  Whatever the attack, nothing may be dropped: both columns
keep every row's value and the contract revision is not recorded as applied.

Each run draws ``MP_GATE_ATTACKS`` (default 14) attacks per backend from a seed
printed with any failure (``MP_GATE_ATTACK_SEED`` replays one); ``MP_GATE_ATTACKS=all``
walks the whole product.  A control test shows each declaration form is not simply
refusing everything: once the data is migrated, the same contract applies.
"""

from __future__ import annotations

import itertools
import textwrap
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from ..gate.conftest import ROWS, App
from .attacks import EXPAND_HEAD, draw, expanded_app, run_attacks, run_route, skip_most_on_servers

CONTRACT_REV = "r3_drop_extra_name"
NEEDED = ("nodes_extra_to_meta", "nodes_name_to_display_name")
_NEEDED = repr(NEEDED)

#: How a contract declares what it needs: (module-level source, call inside upgrade() or None).
FORMS: dict[str, tuple[str, str | None]] = {
    "attribute": (f"requires_data_migrations = {_NEEDED}", None),
    "attribute_variable": (f"NEEDED = {_NEEDED}\nrequires_data_migrations = NEEDED", None),
    "literal_call": ("", "op.require_data_migrations(%s)" % ", ".join(repr(n) for n in NEEDED)),
    "starred_constant": (f"NEEDED = {_NEEDED}", "op.require_data_migrations(*NEEDED)"),
    "imported_constant": ("from inventory.upgrade_needs import NEEDED", "op.require_data_migrations(*NEEDED)"),
    "computed_list": (f"_ALL = {{name: True for name in {_NEEDED}}}",
                      "op.require_data_migrations(*[name for name, needed in _ALL.items() if needed])"),
    "helper_function": (f"def _needs():\n    return list(NEEDED)\n\n\nNEEDED = {_NEEDED}",
                        "op.require_data_migrations(*_needs())"),
    "local_variable": ("", f"needed = list({_NEEDED})\nop.require_data_migrations(*needed)"),
    "aliased_call": (f"NEEDED = {_NEEDED}", "require = op.require_data_migrations\nrequire(*NEEDED)"),
    "getattr_call": (f"NEEDED = {_NEEDED}", 'getattr(op, "require_" + "data_migrations")(*NEEDED)'),
}
#: Forms whose call the source scan cannot see: checked when the call runs, so it must come first.
RUNTIME_ONLY = {"aliased_call", "getattr_call"}
#: Forms refused whatever the data: their requirements cannot be known before the revision runs.
NEVER_APPLIED = {"local_variable"}

#: Where the revision sits: (directory, down_revision, depends_on).
PLACEMENTS = {
    "contract_branch": ("contract", "contract_root", EXPAND_HEAD),
    "contract_file_on_expand_head": ("contract", EXPAND_HEAD, None),
    "merge_of_both_heads": ("contract", ("contract_root", EXPAND_HEAD), None),
    "contract_branch_in_expand_dir": ("expand", "contract_root", EXPAND_HEAD),
    "requiring_revision_on_expand": ("expand", EXPAND_HEAD, None),
}
ROUTES = ("dbsync upgrade --contract", "dbsync upgrade", "dbsync upgrade --expand", "alembic upgrade heads",
          f"alembic upgrade {CONTRACT_REV}", "alembic upgrade contract@+2", f"dbsync stamp {CONTRACT_REV}",
          f"alembic stamp {CONTRACT_REV}")
ENVS = ("wired", "unwired")


@dataclass(frozen=True)
class Attack:
    form: str
    position: str  # "before" or "after" the drops
    placement: str
    env: str
    route: str

    def __str__(self) -> str:
        return f"{self.form}/{self.position}/{self.placement}/{self.env}/{self.route!r}"


def _all_attacks() -> list[Attack]:
    found = []
    for form, placement, env, route in itertools.product(FORMS, PLACEMENTS, ENVS, ROUTES):
        positions = ("before",) if form in RUNTIME_ONLY or FORMS[form][1] is None else ("before", "after")
        found.extend(Attack(form, position, placement, env, route) for position in positions)
    return found


def contract_source(form: str, position: str, placement: str) -> tuple[str, str]:
    """(directory, source) of the rewritten release-3 contract revision."""
    module_level, call = FORMS[form]
    directory, down, depends = PLACEMENTS[placement]
    drops = textwrap.dedent('''\
        op.drop_sync_trigger("nodes", old="extra", new="meta")  # the example's expand installed them
        op.drop_sync_trigger("nodes", old="name", new="display_name")
        with op.batch_alter_table("nodes") as batch:
            batch.drop_column("extra")
            batch.drop_column("name")''')
    body = [drops]
    if call:
        body.insert(0 if position == "before" else 1, call)
    body_text = textwrap.indent("\n".join(body), "    ")
    source = (f'"""release 3 under attack: {form}, {position}, {placement}"""\n'
              "from alembic import op\nimport sqlalchemy as sa\n\nimport migrations_policy.window.sync_triggers\n\n"
              f"revision = {CONTRACT_REV!r}\ndown_revision = {down!r}\nbranch_labels = None\n"
              f"depends_on = {depends!r}\n\n{module_level}\n\n\n"
              f"def upgrade() -> None:\n{body_text}\n\n\ndef downgrade() -> None:\n    pass\n")
    return directory, source


def _install(app: App, attack: Attack) -> None:
    root = app.ini.parent
    (root / "inventory" / "upgrade_needs.py").write_text(f"NEEDED = {_NEEDED}\n")
    original = root / "migrations" / "versions" / "contract" / "0003_r3_drop_extra_name.py"
    original.unlink()
    directory, source = contract_source(attack.form, attack.position, attack.placement)
    (root / "migrations" / "versions" / directory / "0003_r3_attack.py").write_text(source)
    if attack.env == "unwired":
        env_py = root / "migrations" / "env.py"
        text = env_py.read_text()
        assert text.count(",\n                      **policy.configure_options(context))") == 2
        env_py.write_text(text.replace(",\n                      **policy.configure_options(context))", ")"))


def _data_intact(app: App) -> bool:
    if not {"extra", "name"} <= app.columns("nodes"):
        return False
    with app.engine.connect() as conn:
        row = conn.execute(sa.text("SELECT count(extra), count(name), count(*) FROM nodes")).one()
    return tuple(row) == (ROWS, ROWS, ROWS)


def test_no_attack_drops_pending_data(tmp_path, backend, capsys):
    seed, attacks = draw(_all_attacks(), backend, "MP_GATE_ATTACKS", "MP_GATE_ATTACK_SEED", 14)

    def attempt(app: App, attack: Attack) -> list[str]:
        _install(app, attack)
        code, output = run_route(app, attack.route, capsys)
        problems = []
        if not _data_intact(app):
            problems.append("DATA DROPPED")
        if CONTRACT_REV in app.heads():
            problems.append("contract recorded as applied")
        if "Traceback" in output:
            problems.append("traceback")
        if code is not None and code not in (0, 2, 4):  # 2: refused before expand (object versions)
            problems.append(f"exit {code}")
        return problems and [*problems, f"({output.strip()[:300]})"]

    run_attacks(tmp_path, backend, seed, "MP_GATE_ATTACK_SEED", attacks, attempt)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_applies_once_the_data_is_migrated(tmp_path, db_url, backend, form, capsys):
    """The control: the gate judges, it does not refuse everything.  (On the server backends a
    third of the forms, drawn at random, to keep the suite short.)"""
    skip_most_on_servers(form, backend)
    app = expanded_app(tmp_path, db_url)
    try:
        _install(app, Attack(form, "after" if FORMS[form][1] and form not in RUNTIME_ONLY else "before",
                             "contract_branch", "wired", "dbsync upgrade --contract"))
        assert app.dbsync("upgrade", "--contract") == 4
        assert _data_intact(app)
        assert app.dbsync("online_data_migrations") == 0
        capsys.readouterr()
        code = app.dbsync("upgrade", "--contract")
        err = capsys.readouterr().err
        if form in NEVER_APPLIED:
            assert code == 4 and "cannot be evaluated before the revision runs" in err
            assert "0003_r3_attack.py:" in err
            assert _data_intact(app)
        else:
            assert code == 0, err
            assert "extra" not in app.columns("nodes") and CONTRACT_REV in app.heads()
    finally:
        app.engine.dispose()


def test_an_emptied_version_table_is_not_a_fresh_database(tmp_path, db_url, backend, capsys):
    app = expanded_app(tmp_path, db_url)
    try:
        with app.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM alembic_version"))
        capsys.readouterr()
        assert app.dbsync("status") in (0, 1, 2)
        assert "contract: allowed" not in capsys.readouterr().out
        for route in ("alembic upgrade heads", "dbsync upgrade --contract", f"alembic upgrade {CONTRACT_REV}"):
            run_route(app, route, capsys)
            assert _data_intact(app), route
    finally:
        app.engine.dispose()


def test_stamp_across_the_gate_needs_force_and_is_kept_in_the_history(tmp_path, db_url, backend, capsys):
    app = expanded_app(tmp_path, db_url)
    try:
        before = app.heads()
        assert app.dbsync("stamp", CONTRACT_REV) == 4
        assert app.heads() == before
        for reason in ("restored from backup", "second try"):
            with app.engine.begin() as conn:  # back to where the stamp started
                conn.execute(sa.text("DELETE FROM alembic_version"))
                for head in before:
                    conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": head})
            assert app.dbsync("stamp", CONTRACT_REV, "--force", "--reason", reason) == 0
            assert CONTRACT_REV in app.heads() and _data_intact(app)  # a stamp runs no DDL
        with app.engine.connect() as conn:
            history = conn.execute(sa.text(
                "SELECT command, reason, migration FROM migrations_policy_gate_overrides ORDER BY id")).all()
        assert [(h.command, h.reason, h.migration) for h in history] == [
            ("stamp", reason, name) for reason in ("restored from backup", "second try")
            for name in (*NEEDED, "port_node_orphans",  # the example contract's own requirements
                         "object_version_nodes", "object_version_ports")]  # and every unfinished one (global rule)
    finally:
        app.engine.dispose()
