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
from migrations_policy.project import Project

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
            assert code == 127, (args, capsys.readouterr())
            one_line_error(capsys)
    assert untouched(engine) == before


CONFIGS = {
    "empty": b"", "binary": b"\x00\xff\xfe garbage", "no_location": b"[alembic]\n",
    "bad_location": b"[alembic]\nscript_location = /nonexistent/place\n", "not_ini": b"not an ini file at all\n[[[",
    "interpolation": b"[alembic]\nscript_location = %(nope)s\n",
    "bad_lock_timeout": b"[alembic]\nscript_location = .\n[migrations_policy]\nlock_timeout = soon\n",
    "bad_batch_size": b"[alembic]\nscript_location = .\n[migrations_policy]\nbatch_size = -5\n",
    "bad_data_module": b"[alembic]\nscript_location = .\n[migrations_policy]\ndata_migrations = no_such_module_xyz\n",
    "bad_mapping": b"[alembic]\nscript_location = .\n[migrations_policy]\nrelease_mapping = os:path\n",
}
COMMANDS = {"status": ["status"], "check": ["check"], "upgrade": ["upgrade", "--expand"],
            "online_data_migrations": ["online_data_migrations"], "stamp": ["stamp", "heads"]}
def outcome(argv: list[str], capsys, *secrets: str) -> str | None:
    """None when dbsync answered with exit 2 and one clean line; else what went wrong."""
    try:
        code = cli.dbsync_main(argv)
    except Exception as exc:  # noqa: BLE001 - a traceback is exactly what we look for
        return f"raised {type(exc).__name__}: {exc}"
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    leaked = [secret for secret in secrets if secret in err]
    if code != 2 or len(lines) != 1 or "Traceback" in err or leaked:
        return f"exit {code}, stderr {err!r}"
    return None


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("command", COMMANDS)
def test_broken_config_files(tmp_path, config, command, capsys):
    ini = tmp_path / "alembic.ini"
    ini.write_bytes(CONFIGS[config])
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    problem = outcome(["-c", str(ini), "--url", url, *COMMANDS[command]], capsys)
    assert problem is None, problem


URLS = ["garbage", "nosuchdialect://u:{pw}@127.0.0.1/x", "postgresql+psycopg://u:{pw}@127.0.0.1:1/x",
        "mysql+pymysql://u:{pw}@127.0.0.1:1/x", "postgresql://u:{pw}@[::1:bad/x", "sqlite:////nonexistent/dir/x.db",
        "postgresql+nodriver://u:{pw}@127.0.0.1/x", "mysql+pymysql://u:{pw}@127.0.0.1:99999/x"]


@pytest.mark.parametrize("encoded", [True, False], ids=["encoded-password", "raw-password"])
@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", ["status", "check", "upgrade", "online_data_migrations", "version"])
def test_bad_urls_are_one_line_with_the_password_masked(tmp_path, url, command, encoded, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    password = quote_plus(PASSWORD) if encoded else PASSWORD
    problem = outcome(["-c", str(ini), "--url", url.format(pw=password), command], capsys,
                      PASSWORD, password, "s3cret")
    assert problem is None, problem


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
