"""Fuzz dbsync's inputs: broken config files, bad URLs (passwords stay masked), hostile identifiers in
--migration / --option, garbage revisions for stamp.  Every case: a documented exit code, one line on
stderr, no traceback, and nothing executed (the data and the version table are unchanged)."""

from __future__ import annotations

import random
import string
from urllib.parse import quote_plus

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy import cli
from migrations_policy.data import ledger
from migrations_policy.core.project import Project

from ..helpers import copy_example, forget_example_modules
from .conftest import accounts, create_schema, insert_seed, seed_rows

HOSTILE = ["x'; DROP TABLE accounts; --", 'a"b', "`accounts`", "名前", "a" * 5000, "account_labels;",
           "account_labels.n=1", "../../etc/passwd", "%s%s%n", "\x00", "--help", "ACCOUNT_LABELS", " ", ""]
PASSWORD = "p@ss:w/rd%20s3cret"


def fuzz_strings(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.printable + "é名'\"`;\\%"
    return [*HOSTILE, *("".join(rng.choices(alphabet, k=rng.randint(1, 60))) for _ in range(count))]


def one_line_error(capsys, *forbidden: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for secret in forbidden:
        assert secret not in err, err
    return lines[0]


@pytest.fixture
def filled(prove_project, db_url, db_engine):
    create_schema(db_engine)
    insert_seed(db_engine, *seed_rows(1, 200, 50))
    yield prove_project, db_url.render_as_string(hide_password=False), db_engine


def untouched(engine) -> tuple:
    with engine.connect() as conn:
        return (conn.execute(sa.select(sa.func.count()).where(accounts.c.n > 0)).scalar(),
                conn.execute(sa.select(sa.func.count()).select_from(accounts)).scalar(),
                sorted(ledger.read(conn)))


def test_hostile_migration_names_and_options_run_nothing(filled, capsys):
    project, url, engine = filled
    before = untouched(engine)
    assert before == (0, 200, [])
    for text in fuzz_strings(11, 40):
        for args in (["--migration", text], ["--option", text], ["--option", f"account_labels.{text}=1"],
                     ["--option", f"{text}.key=1"], ["--batch-size", text], ["--max-count", text]):
            code = cli.dbsync_main(["-c", str(project / "alembic.ini"), "--url", url, "online_data_migrations",
                                    *args])
            assert code == 2, (args, capsys.readouterr())
            one_line_error(capsys)
    assert untouched(engine) == before


COMMANDS = {"status": ["status"], "check": ["check"], "upgrade": ["upgrade", "--expand"],
            "online_data_migrations": ["online_data_migrations"], "version": ["version"],
            "plan": ["plan", "--max-lock-seconds", "0"]}
#: Exit codes each command documents (docs/exit_codes.rst); 2 is always "one line on stderr".
DOCUMENTED = {"status": {0, 2}, "check": {0, 2, 3, 4, 5}, "upgrade": {0, 2, 4},
              "online_data_migrations": {0, 1, 2}, "version": {0, 2}, "stamp": {0, 2},
              "plan": {0, 2, 6}}


def outcome(argv: list[str], capsys, *secrets: str, codes=frozenset({2})) -> str | None:
    """None when dbsync answered with a documented exit code (2: exactly one clean line); else what went wrong."""
    try:
        code = cli.dbsync_main(argv)
    except BaseException as exc:  # noqa: BLE001 - a traceback is exactly what we look for
        return f"raised {type(exc).__name__}: {exc}"
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    leaked = [secret for secret in secrets if secret in err or secret in out]
    if code not in codes or (code == 2 and len(lines) != 1) or "Traceback" in err or leaked:
        return f"exit {code}, stderr {err!r}"
    return None


# -- generated alembic ini files ---------------------------------------------------------------
_VALUES = {
    "script_location": ["%(here)s/migrations", "/nonexistent/place", "", "%(nope)s", "%(here)s", "%%(here)s/x",
                        "migrations", "%(here)s/migrations/versions"],
    "version_locations": ["%(here)s/migrations/versions/expand %(here)s/migrations/versions/contract",
                          "/nonexistent/x", "%(here)s/migrations/versions/expand", "", "%(here)s/nope %(here)s",
                          "%(here)s/migrations/versions/contract"],
    "path_separator": ["space", "os", "bogus", "", ";"],
    "prepend_sys_path": ["%(here)s", ".", "/nonexistent", ""],
    "sqlalchemy.url": ["sqlite:///%(here)s/inventory.db", "garbage", "%(x)s", ""],
}
_POLICY_VALUES = {
    "data_migrations": ["inventory.data_migrations", "no_such_module_xyz", "", "os", "inventory.nope"],
    "release_mapping": ["inventory.releases:RELEASE_MAPPING", "os:path", "nope", "inventory.releases:NOPE", ""],
    "batch_size": ["5000", "-5", "x", "0", "1e99"],
    "batch_seconds": ["0.05", "-1", "nan?", ""],
    "no_such_setting": ["1"],
}


def _section(rng: random.Random, name: str, values: dict) -> list[str]:
    header = rng.choice([f"[{name}]"] * 8 + [f"[{name}", f"{name}]", f"[{name.upper()}]", "[alembic_other]"])
    lines = [header]
    for key, choices in values.items():
        if rng.random() < 0.8:
            lines.append(f"{key} = {rng.choice(choices)}")
    if rng.random() < 0.1:
        lines.append(rng.choice(["key without value", "= value without key", "  indented = continuation"]))
    return lines


def generated_ini(seed: int) -> bytes:
    """A mutated version of the example's alembic.ini: sections, keys and values mixed, dropped,
    misspelt or broken; some mutations leave it valid (then the command must work normally)."""
    rng = random.Random(seed)
    kind = rng.random()
    if kind < 0.08:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80)))
    if kind < 0.14:
        return b""
    lines = []
    sections = [("alembic", _VALUES), ("migrations_policy", _POLICY_VALUES)]
    rng.shuffle(sections)
    for name, values in sections:
        if rng.random() < 0.85:
            lines += _section(rng, name, values)
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.1:
        text = text[: rng.randrange(len(text) + 1)]  # truncated mid-line
    return text.encode()


@pytest.fixture(scope="module")
def example_at_head(tmp_path_factory):
    """The example at head on SQLite, upgraded once for the module; the generated inis point at it."""
    root = tmp_path_factory.mktemp("fuzz_ini")
    ini = copy_example(root)
    forget_example_modules()
    assert cli.dbsync_main(["-c", str(ini), "upgrade"]) == 0
    return ini


def _database_state(db: str) -> tuple:
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        tables = sorted(sa.inspect(conn).get_table_names())
        versions = sorted(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    engine.dispose()
    return tables, versions


@pytest.mark.parametrize("seed", range(40))
def test_generated_ini_files(example_at_head, seed, capsys):
    ini = example_at_head.parent / f"generated_{seed}.ini"
    ini.write_bytes(generated_ini(seed))
    db = example_at_head.parent / "inventory.db"
    before = _database_state(db)
    capsys.readouterr()
    for command, argv in COMMANDS.items():
        forget_example_modules()
        for url in ([], ["--url", f"sqlite:///{db}"]):
            problem = outcome(["-c", str(ini), *url, *argv], capsys, codes=DOCUMENTED[command])
            assert problem is None, (command, url, ini.read_bytes(), problem)
    assert _database_state(db) == before


# -- generated version-table contents -----------------------------------------------------------
def generated_revision_ids(seed: int, count: int, known: set[str]) -> list[str]:
    """Revision ids no script defines (nor any prefix of one: alembic resolves prefixes)."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "_-.@'\";: "
    found = []
    while len(found) < count:
        kind = rng.random()
        if kind < 0.3:
            candidate = "".join(rng.choices("0123456789abcdef", k=12))
        elif kind < 0.6:
            candidate = rng.choice(sorted(known)) + "_" + "".join(rng.choices(string.ascii_lowercase, k=3))
        else:
            candidate = "".join(rng.choices(alphabet, k=rng.randint(1, 32))).strip() or "x"
        if not any(k.startswith(candidate) or candidate == k for k in known):
            found.append(candidate[:32])
    return found


def test_unknown_revisions_in_the_version_table(tmp_path, db_url, capsys):
    """status, check and upgrade on a database whose version table names revisions no script
    defines: one line naming them, exit 2, the version table and the tables untouched."""
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = db_url.render_as_string(hide_password=False)
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "upgrade", "--expand"]) == 0
    capsys.readouterr()
    known = {rev.revision for rev in Project(ini, url=url).script.walk_revisions()}
    engine = sa.create_engine(db_url)
    version = sa.table("alembic_version", sa.column("version_num", sa.String))

    def state():
        with engine.connect() as conn:
            return (sorted(sa.inspect(conn).get_table_names()),
                    sorted(conn.execute(sa.select(version.c.version_num)).scalars()))

    for number, bogus in enumerate(generated_revision_ids(7, 12, known)):
        rows = [bogus] + (["r2_meta_display_name_version"] if number % 3 == 0 else [])
        with engine.begin() as conn:
            conn.execute(sa.delete(version))
            conn.execute(sa.insert(version), [{"version_num": row} for row in rows])
        before = state()
        for argv in (["status"], ["check"], ["upgrade"], ["upgrade", "--expand"], ["--format", "json", "status"]):
            code = cli.dbsync_main(["-c", str(ini), "--url", url, *argv])
            line = one_line_error(capsys)
            assert code == 2, (argv, bogus, line)
            assert bogus in line, (argv, bogus, line)
        assert state() == before
    engine.dispose()


def test_garbage_revisions_for_stamp_change_nothing(tmp_path, db_url, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = db_url.render_as_string(hide_password=False)
    project = Project(ini, url=url)
    alembic_command.upgrade(project.alembic_config, "r1_inventory")
    project.dispose()
    engine = sa.create_engine(db_url)

    def versions():
        with engine.connect() as conn:
            return sorted(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())

    assert versions() == ["r1_inventory"]
    # "--help" is argparse's (exit 0); "" is a known bug, see test_stamp_an_empty_revision.
    garbage = [r for r in fuzz_strings(5, 25) if r and not r.startswith("-")]
    for revision in [*garbage, "'; DROP TABLE alembic_version; --", "heads@-99", "base+1:x",
                     "r1_inventory@expand@contract", "deadbeef" * 10]:
        code = cli.dbsync_main(["-c", str(ini), "--url", url, "stamp", revision])
        line = one_line_error(capsys)
        assert code == 2, (revision, line)
    assert versions() == ["r1_inventory"]
    with engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) >= {"nodes", "ports", "alembic_version"}
    engine.dispose()


def test_stamp_an_empty_revision(tmp_path, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    project = Project(ini, url=url)
    alembic_command.upgrade(project.alembic_config, "r1_inventory")
    project.dispose()
    problem = outcome(["-c", str(ini), "--url", url, "stamp", ""], capsys)
    assert problem is None, problem


UNSUPPORTED_ON_SQLITE = [
    'op.create_unique_constraint(None, "nodes", ["{column}"])',
    'op.create_unique_constraint("uq_{column}", "nodes", ["{column}"])',
    'op.create_check_constraint(None, "nodes", "length({column}) > 0")',
    'op.create_foreign_key(None, "ports", "nodes", ["node_id"], ["id"])',
    'op.drop_constraint("uq_{column}", "nodes", type_="unique")',
    'op.alter_column("nodes", "{column}", nullable=False)',
]


def test_ops_the_dialect_cannot_run_are_one_line_naming_the_revision(tmp_path, capsys):
    """Autogenerate writes ``create_unique_constraint(None, ...)``; SQLite cannot ALTER constraints
    (alembic raises NotImplementedError).  Generated revisions of such ops: exit 2, one line naming
    the revision, the version table unchanged."""
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "--progress", "none", "upgrade", "--expand"]) == 0
    capsys.readouterr()
    rng = random.Random(3)
    versions = ini.parent / "migrations" / "versions" / "expand"
    for number in range(6):
        ops = rng.sample(UNSUPPORTED_ON_SQLITE, k=rng.randint(1, 3))
        column = rng.choice(["name", "uuid", "extra"])
        body = "\n".join("    " + op.format(column=column) for op in ops)
        revision = f"unsupported_{number}"
        (versions / f"9{number}_{revision}.py").write_text(
            f'"""generated"""\nfrom alembic import op\n\nrevision = "{revision}"\n'
            f'down_revision = "r2_meta_display_name_version"\nbranch_labels = None\ndepends_on = None\n\n\n'
            f"def upgrade():\n{body}\n\n\ndef downgrade():\n    pass\n")
        before = _database_state(tmp_path / "x.db")
        code = cli.dbsync_main(["-c", str(ini), "--url", url, "--progress", "none", "upgrade", "--expand"])
        line = one_line_error(capsys)
        assert code == 8 and f"migration failed: revision r2_meta_display_name_version -> {revision}" in line, (ops, line)
        assert _database_state(tmp_path / "x.db") == before
        (versions / f"9{number}_{revision}.py").unlink()
