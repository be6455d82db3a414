"""No secret printed, anywhere: generated database URLs (passwords in the userinfo, raw or
percent-encoded, in query parameters, behind malformed schemes; driver options a driver chokes
on) given to every command that takes a URL.  Every run: a documented exit code, one line on
stderr when it fails, no traceback, and the password in no form in stdout or stderr."""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from urllib.parse import quote, quote_plus

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from migrations_policy.core import urls as _urls
from migrations_policy import cli

from ..helpers import REPO, copy_example, forget_example_modules

SCHEMES = ["postgresql+psycopg", "postgresql", "mysql+pymysql", "mysql", "nosuchdialect", "postgresql+nodriver"]
SECRET_NAMES = ["password", "passwd", "PASSWORD", "pwd", "sslpassword", "api_key", "token", "client_secret",
                "db_pass"]
#: Driver options a driver may choke on while connecting (not while parsing the URL).
BAD_OPTIONS = ["charset=bogus", "ssl_ca=/nonexistent/ca.pem", "sslrootcert=/nonexistent/root.crt",
               "connect_timeout=soon", "sslmode=bogus", "ssl_cert=/nonexistent", "unix_socket=/nonexistent/s"]
PASSWORD_ALPHABET = string.ascii_letters + string.digits + "@:/%?&=#+;!$*~()[],"


def generated_password(rng: random.Random) -> str:
    """A password that cannot occur in any message by accident (the Zq9 prefix), with URL-special characters."""
    return "Zq9" + "".join(rng.choices(PASSWORD_ALPHABET, k=rng.randint(4, 14)))


def generated_url(rng: random.Random, password: str) -> str:
    scheme, user = rng.choice(SCHEMES), rng.choice(["u", "app_user", "x.y"])
    host = rng.choice(["127.0.0.1:1", "127.0.0.1:1", "localhost:1", "[::1:bad", "127.0.0.1:99999"])
    encoded = rng.choice([quote_plus(password), quote(password, safe=""), password])
    options = rng.sample(BAD_OPTIONS, k=rng.randint(0, 2))
    form = rng.randrange(6)
    if form == 0:
        text = f"{scheme}://{user}:{encoded}@{host}/db"
    elif form == 1:
        options.append(f"{rng.choice(SECRET_NAMES)}={rng.choice([quote_plus(password), password])}")
        text = f"{scheme}://{user}@{host}/db"
    elif form == 2:
        text = f"{scheme}:/{user}:{password}@{host}/db"
    elif form == 3:
        text = f"{scheme}//{user}:{password}@{host}/db"
    elif form == 4:
        text = f"{user}:{password}@{host}/db"
    else:
        text = f"{scheme}://{user}:{encoded}@{host}/db"
        options.insert(0, f"{rng.choice(SECRET_NAMES)}={quote_plus(password)}")
    rng.shuffle(options)
    return text + ("?" + "&".join(options) if options else "")


def forms(password: str) -> set[str]:
    """Every form of the password a message could carry (encoded, decoded) and its tail."""
    return {password, quote_plus(password), quote(password, safe=""), password[3:]}


def commands(ini) -> dict[str, tuple]:
    """Every command that takes a URL: (entry point, arguments before --url, after, documented exit codes)."""
    dbsync = cli.dbsync_main
    developer = cli.main
    models = ["--old-models", "inventory.models.release1", "--new-models", "inventory.models.release2",
              "--from-revision", "r1_inventory", "--seconds", "0.1"]
    return {
        "status": (dbsync, ["-c", str(ini)], ["status"], {2}),
        "check": (dbsync, ["-c", str(ini)], ["check"], {2}),
        "version": (dbsync, ["-c", str(ini)], ["version"], {2}),
        "upgrade": (dbsync, ["-c", str(ini)], ["upgrade"], {2}),
        "online_data_migrations": (dbsync, ["-c", str(ini)], ["online_data_migrations"], {2}),
        "stamp": (dbsync, ["-c", str(ini)], ["stamp", "heads"], {2}),
        "rollback": (dbsync, ["-c", str(ini)], ["rollback", "--dry-run"], {2}),
        # the example declares no prunes: nothing to connect for (0) unless the URL cannot be parsed
        "prune": (dbsync, ["-c", str(ini)], ["prune"], {0, 2}),
        "revision": (dbsync, ["-c", str(ini)], ["revision", "-m", "x"], {2}),
        "status-json": (dbsync, ["-c", str(ini), "--format", "json"], ["status"], {2}),
        "trace": (developer, ["trace", "-c", str(ini)], [], {2}),
        "rehearse": (developer, ["rehearse", "-c", str(ini), *models], [], {2}),
        # lint needs the scratch database only for scripts that cannot run offline: 0 is fine too.
        "lint": (developer, ["lint", str(ini.parent / "migrations" / "versions")], [], {0, 1, 2}),
    }


@pytest.fixture
def example_ini(tmp_path):
    ini = copy_example(tmp_path)
    forget_example_modules()
    return ini


@pytest.mark.parametrize("seed", range(12))
def test_generated_urls_never_print_the_password(example_ini, seed, capsys):
    rng = random.Random(seed)
    for name, (entry, before, after, codes) in commands(example_ini).items():
        password = generated_password(rng)
        url = generated_url(rng, password)
        forget_example_modules()
        try:
            code = entry([*before, "--url", url, *after])
        except BaseException as exc:  # noqa: BLE001 - a traceback is the failure we look for
            pytest.fail(f"{name} {url!r}: raised {type(exc).__name__}: {exc}")
        out, err = capsys.readouterr()
        leaked = [form for form in forms(password) if form in out or form in err]
        assert not leaked, (name, url, out, err)
        assert "Traceback" not in err and code in codes, (name, url, code, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1, (name, url, err)


@settings(max_examples=300, deadline=None)
@given(password=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"),
                                      blacklist_characters="'\"`"), min_size=1, max_size=30),
       scheme=st.sampled_from(["postgresql+psycopg://", "mysql://", "postgresql:/", "postgresql//", ""]),
       name=st.sampled_from(SECRET_NAMES))
def test_mask_text_masks_every_url_form_without_having_seen_it(password, scheme, name):
    """The text patterns alone (no remembered password): userinfo behind any scheme-like prefix, and
    secret query parameters (unquoted values run to the next '&')."""
    saved = set(_urls._remembered)
    _urls._remembered.clear()
    try:
        if password.startswith("/") or "@" not in password + "@":
            return
        in_userinfo = _urls.mask_text(f"error: cannot connect to {scheme}user:{password}@db.example:5432/app now")
        assert f":{password}@" not in in_userinfo and "***@db.example" in in_userinfo, in_userinfo
        value = quote_plus(password)
        in_query = _urls.mask_text(f"failed: {scheme}user@db.example/app?charset=utf8&{name}={value}&x=1 now")
        assert f"={value}&" not in in_query and f"{name}=***" in in_query, in_query
    finally:
        _urls._remembered.update(saved)


def test_secret_query_parameters_are_masked_in_a_parsed_url():
    url = _urls.parse_url("postgresql+psycopg://u@h/db?sslmode=require&password=Zq9abc%40def&application_name=x")
    shown = _urls.mask_url(url)
    assert "Zq9abc" not in shown and "password=***" in shown and "sslmode=require" in shown


DBSYNC = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"


def test_status_piped_into_head_is_no_traceback(tmp_path):
    """``dbsync status | head``: the reader is gone before dbsync writes; no traceback, the command's exit code."""
    ini = copy_example(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    for argv in (["status"], ["--format", "json", "status"], ["check"]):
        read, write = os.pipe()
        os.close(read)  # the pipe's reader went away: every write fails with EPIPE
        try:
            done = subprocess.run([sys.executable, "-c", DBSYNC, "-c", str(ini), *argv],
                                  stdout=write, stderr=subprocess.PIPE, env=env, timeout=120, text=True)
        finally:
            os.close(write)
        assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
        assert done.returncode == (3 if argv == ["check"] else 0), (argv, done.returncode, done.stderr)


# -- passwords written in the ini file (not --url), through every output path ------------------------------

#: Every printable ASCII special character: '%' included (configparser's interpolation marker).
HOSTILE_ALPHABET = string.ascii_letters + string.digits + string.punctuation


def hostile_password(rng: random.Random) -> str:
    body = "".join(rng.choices(HOSTILE_ALPHABET, k=rng.randint(5, 16)))
    # at least one '%' and one other special character, somewhere
    at = rng.randrange(len(body) + 1)
    body = body[:at] + "%" + rng.choice(string.punctuation) + body[at:]
    return "Zq9" + body


def ini_url(rng: random.Random, password: str, host: str, database: str) -> tuple[str, str]:
    """(the ini value of sqlalchemy.url, how the password is carried): userinfo or a query-string secret,
    written raw (a '%' the user forgot to double), percent-encoded, or '%%'-escaped for configparser."""
    scheme = rng.choice(["postgresql+psycopg", "mysql+pymysql"]) if host.endswith(":1") else "postgresql+psycopg"
    encoded = quote(password, safe="")
    escape = rng.choice([lambda s: s, lambda s: s.replace("%", "%%")])
    form = rng.choice(["userinfo-encoded", "userinfo-raw", "pw", "password", "options", "options-encoded"])
    if form == "userinfo-encoded":
        return f"{scheme}://mp:{escape(encoded)}@{host}/{database}", form
    if form == "userinfo-raw":
        return f"{scheme}://mp:{escape(password)}@{host}/{database}", form
    if form in ("pw", "password"):
        return f"{scheme}://mp@{host}/{database}?{form}={escape(encoded)}", form
    if form == "options":
        return f"{scheme}://mp@{host}/{database}?options={escape('-c password=' + encoded)}", form
    return f"{scheme}://mp@{host}/{database}?options={escape(quote('-c password=' + password, safe=''))}", form


def ini_forms(password: str) -> set[str]:
    """The password in any form, and its pieces after the first '%' (what an interpolation error quotes)."""
    found = forms(password) | {quote(password, safe="").replace("%", "%%"), password.replace("%", "%%")}
    for form in list(found):
        if "%" in form:
            tail = form.split("%", 1)[1]
            if len(tail) >= 4:
                found.add(tail)
    return {form for form in found if len(form) >= 4}


def ini_commands(ini) -> dict[str, tuple]:
    dbsync = cli.dbsync_main
    return {
        "status": (dbsync, ["-c", str(ini)], ["status"]),
        "status-json": (dbsync, ["-c", str(ini), "--format", "json"], ["status"]),
        "check": (dbsync, ["-c", str(ini)], ["check"]),
        "check-json": (dbsync, ["-c", str(ini), "--format", "json"], ["check"]),
        "version": (dbsync, ["-c", str(ini)], ["version"]),
        "plan": (dbsync, ["-c", str(ini)], ["plan"]),
        "plan-json": (dbsync, ["-c", str(ini), "--format", "json"], ["plan"]),
        "upgrade": (dbsync, ["-c", str(ini)], ["upgrade", "--expand"]),
        "online_data_migrations": (dbsync, ["-c", str(ini)], ["online_data_migrations"]),
        "rollback": (dbsync, ["-c", str(ini)], ["rollback", "--dry-run"]),
        "prune": (dbsync, ["-c", str(ini)], ["prune"]),
    }


#: MP_SECRET_SEEDS=1,2,3 replays given seeds; otherwise four fresh ones (printed by the test).
INI_SEEDS = [int(s) for s in os.environ.get("MP_SECRET_SEEDS", "").split(",") if s.strip()] or \
    [random.randrange(10**9) for _ in range(4)]


@pytest.mark.parametrize("seed", INI_SEEDS)
def test_generated_ini_passwords_never_print(tmp_path, seed, capsys, server_for):
    """The password lives in the ini file: raw ('%' not doubled), percent-encoded, '%%'-escaped, in a
    ``?pw=`` / ``?password=`` parameter or libpq's ``?options=-c password=``.  Half the URLs point at no
    server (connection errors), half at a real PostgreSQL whose role has that password (success output,
    text and JSON, and alembic's log lines at INFO).  No form of the password in any output."""
    print("seed", seed)
    rng = random.Random(seed)
    server = server_for("postgresql")
    ini = copy_example(tmp_path)
    set_logging = ini.read_text().replace("[logger_root]\nlevel = WARNING", "[logger_root]\nlevel = INFO")
    ini.write_text(set_logging)
    for name, (entry, before, after) in ini_commands(ini).items():
        password = hostile_password(rng)
        live = rng.random() < 0.5
        if live:
            admin = server.engine(isolation_level="AUTOCOMMIT")
            role = f"r{rng.randrange(10**9)}"
            database = server.create_database().database
            from psycopg import sql  # DDL takes no bind parameters: psycopg composes the literal safely

            with admin.connect() as conn:
                conn.connection.driver_connection.execute(
                    sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(sql.Identifier(role),
                                                                                sql.Literal(password)))
            admin.dispose()
            host = f"127.0.0.1:{server.url.port}"
        else:
            role, database, host = "mp", "db", "127.0.0.1:1"
        value, form = ini_url(rng, password, host, database)
        value = value.replace("://mp", f"://{role}", 1)
        text = ini.read_text().splitlines()
        text = [f"sqlalchemy.url = {value}" if line.startswith("sqlalchemy.url") else line for line in text]
        ini.write_text("\n".join(text) + "\n")
        forget_example_modules()
        try:
            code = entry([*before, *after])
        except BaseException as exc:  # noqa: BLE001 - a traceback is the failure we look for
            pytest.fail(f"seed {seed} {name} {form} {value!r}: raised {type(exc).__name__}: {exc}")
        out, err = capsys.readouterr()
        leaked = [f for f in ini_forms(password) if f in out or f in err]
        assert not leaked, (seed, name, form, value, leaked, out, err)
        assert "Traceback" not in err, (seed, name, value, err)
        if not live and (code, name) != (0, "prune"):  # the example declares no prunes: nothing to connect for
            assert code == 2 and len(err.strip().splitlines()) == 1, (seed, name, form, value, code, err)
