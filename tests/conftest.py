"""Real databases for the test suite: SQLite, PostgreSQL 15 and MariaDB.

Servers start once per test session, on demand, on free ports of 127.0.0.1
(``migrations_policy.testing.servers``).  A test that takes the ``db_url``
fixture runs once per backend; ``backend`` names it.

* ``MP_TEST_BACKENDS=sqlite,postgresql`` limits the backends for a quick local run;
  the terminal summary then says which backends were skipped.
* Under ``CI=true`` every backend is required: a server that cannot start fails
  the tests that need it, it never skips them.
"""

from __future__ import annotations

import os
import random
import signal

import pytest
import sqlalchemy as sa

from migrations_policy.testing import servers

ALL_BACKENDS = ("sqlite", "postgresql", "mysql")
# A suite started in the background (``nohup``, ``&`` in a script) inherits SIGINT ignored, and so
# would every process it starts: the tests that press Ctrl-C on dbsync and lint need it delivered.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _selected_backends() -> tuple[str, ...]:
    raw = os.environ.get("MP_TEST_BACKENDS", "")
    if not raw or IN_CI:
        return ALL_BACKENDS
    chosen = tuple(b.strip() for b in raw.split(",") if b.strip())
    unknown = set(chosen) - set(ALL_BACKENDS)
    if unknown:
        raise pytest.UsageError(f"MP_TEST_BACKENDS: unknown backend(s) {', '.join(sorted(unknown))}")
    return chosen


SELECTED = _selected_backends()
_servers: dict[str, servers.Server | Exception] = {}
_skipped_backends: set[str] = set()


def get_server(name: str) -> servers.Server:
    """The session's server for *name*, started on first use."""
    if name not in _servers:
        try:
            _servers[name] = servers.STARTERS[name]()
        except servers.ServerUnavailable as exc:
            _servers[name] = exc
    found = _servers[name]
    if isinstance(found, Exception):
        pytest.fail(f"{name} server unavailable: {found}", pytrace=False)
    return found


#: Left out of the developers' quick loop (``tox -e quick``: ``-m "not slow"``), run by CI and by
#: ``tox``: the directories whose tests drive whole commands against databases (each several seconds:
#: the gate's offline runs, the runner, lock holders, killed processes), and the modules measured
#: slowest elsewhere (docs/testing.rst: "The developers' quick loop").  A test file under a listed
#: directory, or listed itself, gets the ``slow`` marker; nothing else is marked here.
SLOW_DIRECTORIES = ("prove", "gate", "data", "authoring")
#: The modules: each of their tests took 4 s or more (wall, SQLite, load ~15 on 2 cores: about 0.5 s
#: of CPU or more) in the quick loop's measured run; most run whole lint runs in fresh worker
#: processes several times.
SLOW_MODULES = (
    "test_embedding.py",        # installs a project with pip and runs its console scripts
    "test_roundtrip.py",        # every revision of the example up and down
    "lint/test_adoption.py",    # init / adopt / lint on generated histories
    "lint/test_cache_header_modules.py",
    "lint/test_cache_index.py",
    "lint/test_cache_keys.py",
    "lint/test_cache_read_files.py",
    "lint/test_cache_unloadable.py",
    "lint/test_custom_operations.py",
    "lint/test_dialect_guards.py",
    "lint/test_every_script_a_verdict.py",
    "lint/test_existing_nullable.py",
    "lint/test_fuzz_scripts.py",
    "lint/test_isolation.py",
    "lint/test_mp160_in_a_run.py",
    "lint/test_output_options.py",
    "lint/test_plain_scripts.py",
    "lint/test_real_world_shapes.py",
)
_TESTS = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config):
    # pytest-xdist (the quick loop's ``-n``): every worker collects on its own, and generated tests
    # draw their seeds (part of their ids) at collection; the run's one id seeds every worker alike,
    # so they collect the same tests.  Each test still prints the seed it drew.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        random.seed(workerinput["testrunuid"])


def pytest_collection_modifyitems(config, items):
    for item in items:
        relative = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/")
        if relative.split("/", 1)[0] in SLOW_DIRECTORIES or relative in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):
    for server in _servers.values():
        if isinstance(server, servers.Server):
            server.stop()


def pytest_terminal_summary(terminalreporter):
    skipped = sorted(set(ALL_BACKENDS) - set(SELECTED))
    if skipped:
        terminalreporter.write_line(
            f"migrations_policy: backends NOT tested (MP_TEST_BACKENDS): {', '.join(skipped)}", yellow=True
        )


@pytest.fixture(params=ALL_BACKENDS)
def backend(request) -> str:
    if request.param not in SELECTED:
        _skipped_backends.add(request.param)
        pytest.skip(f"backend {request.param} not selected (MP_TEST_BACKENDS)")
    return request.param


@pytest.fixture
def db_url(backend, tmp_path) -> sa.URL:
    """A fresh, empty database on *backend*, dropped after the test."""
    if backend == "sqlite":
        yield sa.URL.create("sqlite", database=str(tmp_path / "test.db"))
        return
    server = get_server(backend)
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def db_engine(db_url):
    engine = sa.create_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def server_for(request):
    """``server_for('postgresql')``: the session's server, for tests of one backend."""
    def get(name: str) -> servers.Server:
        if name not in SELECTED:
            pytest.skip(f"backend {name} not selected (MP_TEST_BACKENDS)")
        return get_server(name)
    return get


@pytest.fixture
def example_project(tmp_path, db_url):
    """The inventory example copied to *tmp_path*, as a ``Project`` on the test database."""
    from migrations_policy.core.project import Project

    from .helpers import copy_example, forget_example_modules

    ini = copy_example(tmp_path)
    forget_example_modules()
    project = Project(ini, url=db_url.render_as_string(hide_password=False))
    yield project
    project.dispose()
    forget_example_modules()


@pytest.fixture(autouse=True)
def _restore_logging():
    """A test that runs a project's env.py in-process lets it call ``logging.config.fileConfig``, which
    points handlers at pytest's capture stream of that test; later tests would log to a closed stream
    ("--- Logging error ---" on their stderr).  Put the loggers back as they were."""
    import logging

    names = [None, "alembic", "sqlalchemy", "sqlalchemy.engine", "migrations_policy"]
    saved = [(logging.getLogger(n), logging.getLogger(n).handlers[:], logging.getLogger(n).level,
              logging.getLogger(n).propagate, logging.getLogger(n).disabled) for n in names]
    existing = set(logging.root.manager.loggerDict)
    yield
    for logger, handlers, level, propagate, disabled in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled
    for name in set(logging.root.manager.loggerDict) - existing:
        logger = logging.root.manager.loggerDict[name]
        if isinstance(logger, logging.Logger):
            logger.handlers[:] = []
