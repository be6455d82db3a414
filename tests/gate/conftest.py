"""The inventory example at release 1 with rows, on every backend, driven through dbsync."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from migrations_policy import cli
from migrations_policy.core.project import Project

from ..helpers import copy_example, forget_example_modules, set_ini_option

ROWS = 300
ORPHANS = 3  # ports pointing at nodes that do not exist


class App:
    """The example app copied to a temp dir, with its database URL."""

    def __init__(self, ini, url: sa.URL):
        self.ini = ini
        self.url = url
        self.url_text = url.render_as_string(hide_password=False)
        self.engine = sa.create_engine(url)

    def project(self) -> Project:
        return Project(self.ini, url=self.url_text)

    def dbsync(self, *args: str) -> int:
        return cli.dbsync_main(["-c", str(self.ini), "--url", self.url_text, *args])

    def alembic_upgrade(self, target: str) -> None:
        project = self.project()
        try:
            alembic_command.upgrade(project.alembic_config, target)
        finally:
            project.dispose()

    def columns(self, table: str) -> set[str]:
        return {c["name"] for c in sa.inspect(self.engine).get_columns(table)}

    def heads(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version")))

    def seed_release1(self, rows: int = ROWS) -> None:
        meta = sa.MetaData()
        nodes = sa.Table("nodes", meta, autoload_with=self.engine)
        ports = sa.Table("ports", meta, autoload_with=self.engine)
        if rows == 0:  # an empty parameter list would run INSERT ... DEFAULT VALUES once
            return
        with self.engine.begin() as conn:
            conn.execute(nodes.insert(), [
                {"id": i, "uuid": str(uuid.uuid4()), "name": f"n{i}", "extra": f'{{"i": {i}}}'}
                for i in range(1, rows + 1)])
            conn.execute(ports.insert(), [
                {"id": i, "node_id": i if i > ORPHANS else rows + 1000 + i, "address": f"a{i}"}
                for i in range(1, rows + 1)])


@pytest.fixture
def app(tmp_path, db_url):
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    forget_example_modules()
    application = App(ini, db_url)
    application.alembic_upgrade("r1_inventory")
    application.seed_release1()
    yield application
    application.engine.dispose()
    forget_example_modules()


@pytest.fixture
def expanded(app):
    assert app.dbsync("upgrade", "--expand") == 0
    return app


@pytest.fixture
def recovery_project(tmp_path, db_url):
    """``recovery.release1_project``: release 1 applied, its expand revision pending."""
    from .recovery import release1_project

    proj = release1_project(tmp_path, db_url)
    yield proj
    proj.engine.dispose()
