"""Throwaway database servers on 127.0.0.1 for tests: PostgreSQL and MariaDB.

Each server lives in its own temporary directory, listens on a free port of
127.0.0.1 only, runs as an unprivileged user when the caller is root (both
servers refuse to run as root), and is removed by ``stop()``.  Nothing is
mocked: tests get a real server and a fresh database per test
(``server.create_database()``).

MariaDB comes from Debian's ``mariadb-server``; when it is missing and we are
root, ``ensure_mariadb_installed()`` installs it with apt-get.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL


class ServerUnavailable(RuntimeError):
    """The server binaries are missing or the server did not start."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unprivileged_user(preferred: str) -> pwd.struct_passwd | None:
    """The account to run a server as: None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in (preferred, "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerUnavailable("running as root and no unprivileged user (postgres, mysql, nobody) exists")


def _run(cmd: list[str], user: pwd.struct_passwd | None, log: Path, timeout: float = 120, **kw) -> None:
    with open(log, "ab") as out:
        try:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                user=user.pw_uid if user else None, group=user.pw_gid if user else None,
                extra_groups=[] if user else None, env=_env(user), **kw,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServerUnavailable(f"{cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise ServerUnavailable(f"{os.path.basename(cmd[0])} failed ({proc.returncode}): {' | '.join(tail)}")


def _env(user: pwd.struct_passwd | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "MYSQL"))}
    env.update(LC_ALL="C.UTF-8", LANG="C.UTF-8", TZ="UTC")
    if user is not None:
        env["HOME"] = tempfile.gettempdir()
        env["USER"] = env["LOGNAME"] = user.pw_name
    return env


def _chown_tree(path: Path, user: pwd.struct_passwd | None) -> None:
    if user is None:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, user.pw_uid, user.pw_gid)


@dataclass
class Server:
    """A running server: its admin URL, its directory, and how to stop it."""

    name: str
    url: URL
    directory: Path
    _stop: list = field(default_factory=list, repr=False)
    _admin: sa.Engine | None = field(default=None, repr=False)

    def engine(self, database: str | None = None, **kw) -> sa.Engine:
        url = self.url if database is None else self.url.set(database=database)
        return sa.create_engine(url, **kw)

    def _admin_engine(self) -> sa.Engine:
        """One AUTOCOMMIT engine for the server's life: creating and dropping a database per test
        reuses its pooled connection instead of connecting twice per test.  ``pool_pre_ping``: a
        test that kills sessions on the server (``pg_terminate_backend``, ``KILL``) may have killed it."""
        if self._admin is None:
            self._admin = self.engine(isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=4,
                                      pool_pre_ping=True)
        return self._admin

    def create_database(self, prefix: str = "t") -> URL:
        """Create a fresh, uniquely named database and return its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with self._admin_engine().connect() as conn:
            quoted = conn.dialect.identifier_preparer.quote(name)
            conn.exec_driver_sql(f"CREATE DATABASE {quoted}")
        return self.url.set(database=name)

    def drop_database(self, url: URL) -> None:
        with self._admin_engine().connect() as conn:
            quoted = conn.dialect.identifier_preparer.quote(url.database)
            suffix = " WITH (FORCE)" if self.name == "postgresql" else ""
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}{suffix}")

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.dispose()
            self._admin = None
        while self._stop:
            self._stop.pop()()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- PostgreSQL ----------------------------------------------------------------
def postgresql_bindir() -> Path:
    """Directory of initdb/pg_ctl: $PG_BINDIR, the newest /usr/lib/postgresql/*/bin, or PATH."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if candidates:
        return Path(candidates[-1])
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    if not os.environ.get("_MP_PG_INSTALL_TRIED"):
        os.environ["_MP_PG_INSTALL_TRIED"] = "1"
        apt_install("postgresql")
        return postgresql_bindir()
    raise ServerUnavailable("PostgreSQL binaries (initdb, pg_ctl) not found; set PG_BINDIR")


def start_postgresql() -> Server:
    bindir = postgresql_bindir()
    user = _unprivileged_user("postgres")
    directory = Path(tempfile.mkdtemp(prefix="mp-postgresql-"))
    os.chmod(directory, 0o755)
    data, log = directory / "data", directory / "server.log"
    log.touch()
    _chown_tree(directory, user)
    _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
          "--no-locale", "--no-sync"], user, log)
    port = free_port()
    options = (
        f"-p {port} -c listen_addresses=127.0.0.1 -k {directory} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=200 -c shared_buffers=128MB"
    )
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start"],
         user, directory / "pg_ctl.log")
    server = Server("postgresql", URL.create("postgresql+psycopg", username="postgres", host="127.0.0.1",
                                             port=port, database="postgres"), directory)
    server._stop.append(lambda: _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                                     user, directory / "pg_ctl.log"))
    return _ready(server)


# -- MariaDB -------------------------------------------------------------------
def mariadb_binaries() -> tuple[str, str] | None:
    server = shutil.which("mariadbd", path="/usr/sbin:/usr/bin:" + os.environ.get("PATH", "")) or shutil.which(
        "mysqld", path="/usr/sbin:/usr/bin")
    install = shutil.which("mariadb-install-db", path="/usr/bin:/usr/sbin:" + os.environ.get("PATH", "")) or \
        shutil.which("mysql_install_db", path="/usr/bin:/usr/sbin")
    return (server, install) if server and install else None


def apt_install(package: str) -> None:
    """Install a Debian package (root only): try the cached lists first, then update and retry."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ServerUnavailable(f"{package} is not installed (as root: apt-get install {package})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]
    for cmd in (install, ["apt-get", "update", "-q"], install):
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
        if cmd is install and proc.returncode == 0:
            return
    raise ServerUnavailable(f"apt-get install {package} failed: {proc.stderr.decode(errors='replace').strip()[-300:]}")


def ensure_mariadb_installed() -> tuple[str, str]:
    """Find MariaDB, installing Debian's mariadb-server with apt-get when root and missing."""
    found = mariadb_binaries()
    if not found:
        apt_install("mariadb-server")
        found = mariadb_binaries()
    if not found:
        raise ServerUnavailable("mariadb-server installed but mariadbd / mariadb-install-db not found")
    return found


def ensure_sqlite3_cli() -> str:
    """The ``sqlite3`` command-line shell (offline SQL is applied with it), installing Debian's
    sqlite3 with apt-get when root and missing."""
    found = shutil.which("sqlite3")
    if not found:
        apt_install("sqlite3")
        found = shutil.which("sqlite3")
    if not found:
        raise ServerUnavailable("sqlite3 installed but not on PATH")
    return found


def ensure_mysql_client() -> str:
    """MariaDB's command-line client (``mariadb``, or ``mysql``), from mariadb-client when missing."""
    found = shutil.which("mariadb") or shutil.which("mysql")
    if not found:
        apt_install("mariadb-client")
        found = shutil.which("mariadb") or shutil.which("mysql")
    if not found:
        raise ServerUnavailable("mariadb-client installed but neither mariadb nor mysql is on PATH")
    return found


def start_mariadb() -> Server:
    mariadbd, install_db = ensure_mariadb_installed()
    user = _unprivileged_user("mysql")
    directory = Path(tempfile.mkdtemp(prefix="mp-mariadb-"))
    os.chmod(directory, 0o755)
    data, log, sock = directory / "data", directory / "server.log", directory / "mysqld.sock"
    log.touch()
    _chown_tree(directory, user)
    _run([install_db, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
          "--skip-test-db", "--skip-name-resolve"], user, log, timeout=300)
    port = free_port()
    proc = subprocess.Popen(
        [mariadbd, "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--pid-file={directory / 'mysqld.pid'}", f"--log-error={log}",
         f"--tmpdir={directory}",  # its own: a shared /tmp being cleaned broke big anti-joins (Errcode 2)
         "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=256M",
         "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--max-connections=300",
         "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(user),
        user=user.pw_uid if user else None, group=user.pw_gid if user else None,
        extra_groups=[] if user else None,
    )

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # ssl_disabled: this server offers no TLS (have_ssl DISABLED), and PyMySQL >= 1.2 otherwise builds
    # an SSL context on every connect to try it (loading the system CA store: 170-330 ms of CPU per
    # connection, 15% of the MariaDB gate tests' time).  Every engine the tests and the commands they
    # drive create comes from this URL.
    server = Server("mysql", URL.create("mysql+pymysql", username="mp", password=secrets.token_hex(12),
                                        host="127.0.0.1", port=port, database="mysql",
                                        query={"charset": "utf8mb4", "ssl_disabled": "true"}), directory, [stop])
    socket_url = URL.create("mysql+pymysql", username="root", database="mysql", query={"unix_socket": str(sock)})
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            server.stop()
            raise ServerUnavailable(f"mariadbd exited ({proc.returncode}): {' | '.join(tail)}")
        try:
            engine = sa.create_engine(socket_url, isolation_level="AUTOCOMMIT")
            with engine.connect() as conn:
                # A password-protected TCP account for the tests; values are bound, not formatted.
                conn.execute(sa.text("CREATE USER 'mp'@'%' IDENTIFIED BY :pw"), {"pw": server.url.password})
                conn.execute(sa.text("GRANT ALL PRIVILEGES ON *.* TO 'mp'@'%' WITH GRANT OPTION"))
            engine.dispose()
            break
        except sa.exc.OperationalError:
            engine.dispose()
            if time.monotonic() > deadline:
                server.stop()
                raise ServerUnavailable("mariadbd did not accept connections within 90 s") from None
            time.sleep(0.2)
    return _ready(server)


def _ready(server: Server, seconds: float = 60) -> Server:
    """Wait until *server* answers over TCP; stop it at interpreter exit at the latest."""
    atexit.register(server.stop)
    deadline = time.monotonic() + seconds
    while True:
        engine = server.engine()
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return server
        except sa.exc.OperationalError as exc:
            if time.monotonic() > deadline:
                server.stop()
                raise ServerUnavailable(f"{server.name} not reachable: {str(exc.orig).splitlines()[0]}") from None
            time.sleep(0.2)
        finally:
            engine.dispose()


STARTERS = {"postgresql": start_postgresql, "mysql": start_mariadb}
