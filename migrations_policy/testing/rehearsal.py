"""The rolling-upgrade rehearsal as a pytest helper, for a project's own CI.

::

    # tests/test_rolling_upgrade.py of your project
    from migrations_policy.testing.rehearsal import assert_upgrade_safe, scratch_database

    def test_release_n_keeps_working_during_the_upgrade():
        with scratch_database("postgresql") as url:      # a throwaway server on 127.0.0.1
            assert_upgrade_safe("alembic.ini", url, "myapp.models_n", "myapp.models", from_revision="abc123")

``assert_upgrade_safe`` fails the test with the rehearsal's whole report (every
error each release's code saw, per phase) and returns the ``RehearsalResult``
when it passes, for further assertions.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from migrations_policy.core.project import Project
from migrations_policy.rehearsal import RehearsalOptions, RehearsalResult, rehearse
from migrations_policy.testing import servers


def rehearse_upgrade(alembic_ini: str | os.PathLike[str], url: str, old_models: Any, new_models: Any,
                     from_revision: str | Sequence[str], *, expand_to: str | None = None,
                     contract_to: str | None = None, contract: bool = True, **options: Any) -> RehearsalResult:
    """Run the rehearsal; *options* are ``RehearsalOptions`` fields (seconds, threads, workload, values...)."""
    project = Project(alembic_ini, url=url)
    try:
        return rehearse(project, old_models, new_models, from_revision, expand_to=expand_to,
                        contract_to=contract_to, contract=contract, options=RehearsalOptions(**options))
    finally:
        project.dispose()


def assert_upgrade_safe(alembic_ini: str | os.PathLike[str], url: str, old_models: Any, new_models: Any,
                        from_revision: str | Sequence[str], **kwargs: Any) -> RehearsalResult:
    """``rehearse_upgrade``, raising ``AssertionError`` with the full report unless nothing went wrong."""
    result = rehearse_upgrade(alembic_ini, url, old_models, new_models, from_revision, **kwargs)
    if result.exit_code:
        raise AssertionError("rolling-upgrade rehearsal failed:\n" + result.text())
    return result


@contextmanager
def scratch_database(backend: str = "postgresql") -> Iterator[str]:
    """An empty database for one rehearsal: ``sqlite`` (a temporary file), ``postgresql`` or ``mysql``
    (a throwaway server on 127.0.0.1, see ``servers``); yields its URL (with password) and removes it."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="mp-rehearsal-") as directory:
            yield f"sqlite:///{os.path.join(directory, 'rehearsal.db')}"
        return
    if backend not in servers.STARTERS:
        raise ValueError(f"unknown backend {backend!r} (sqlite, {', '.join(servers.STARTERS)})")
    server = servers.STARTERS[backend]()
    try:
        yield server.create_database().render_as_string(hide_password=False)
    finally:
        server.stop()
