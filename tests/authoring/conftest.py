"""A fresh expand/contract project per test: ``migrations-policy init``, models in a file,
``alembic revision --autogenerate`` run for real against the test's database."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config

from migrations_policy import commands

ENV_MODELS = '''
import runpy
from pathlib import Path

# The test's models, read afresh on every run (they change between revisions).
target_metadata = runpy.run_path(str(Path(config.config_file_name).parent / "models.py"))["metadata"]
'''

MODELS_HEADER = "import sqlalchemy as sa\nmetadata = sa.MetaData()\n"

#: Models with a naming convention, so that autogenerate names every constraint and index (the drawn
#: corpora: a generated drop must name what it drops on every backend).
CONVENTION = '''
metadata = sa.MetaData(naming_convention={
    "ix": "ix_%(column_0_label)s", "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s", "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s"})
'''


def drawn_seeds(prefix: str, default: int = 3) -> list[int]:
    """The seeds of a drawn test: ``PREFIX_SEED`` replays one, ``PREFIX_SEEDS`` sets how many are drawn."""
    fixed = os.environ.get(f"{prefix}_SEED")
    if fixed:
        return [int(fixed)]
    return [random.randrange(10**9) for _ in range(int(os.environ.get(f"{prefix}_SEEDS", str(default))))]


class Workspace:
    """An alembic project made by ``migrations-policy init`` in *root*, on *url*."""

    def __init__(self, root: Path, url):
        self.root = root
        self.url = url
        for name in [m for m in sys.modules if m == "dm" or m.startswith("dm.")]:
            del sys.modules[name]  # each test has its own data-migration package "dm"
        self.ini = root / "alembic.ini"
        self.versions = root / "migrations" / "versions"
        (root / "dm").mkdir()
        (root / "dm" / "__init__.py").write_text("")
        cwd = os.getcwd()
        os.chdir(root)
        try:
            commands.init("migrations")
        finally:
            os.chdir(cwd)
        env = root / "migrations" / "env.py"
        env.write_text(env.read_text().replace("target_metadata = None\n", ENV_MODELS))
        text = self.ini.read_text()
        rendered = url.render_as_string(hide_password=False).replace("%", "%%")
        text = text.replace("driver://user:pass@localhost/dbname", rendered)
        text = text.replace("prepend_sys_path = .", f"prepend_sys_path = {root}")
        text = text.replace("# data_migrations = myapp.data_migrations", "data_migrations = dm")
        self.ini.write_text(text)
        self.models("")

    @property
    def config(self) -> Config:
        return Config(str(self.ini))

    def models(self, body: str) -> None:
        (self.root / "models.py").write_text(MODELS_HEADER + textwrap.dedent(body))

    def files(self) -> set[Path]:
        return set(self.versions.glob("*/*.py")) | set((self.root / "dm").glob("*.py"))

    def revision(self, message: str) -> dict[str, Path]:
        """Autogenerate; the new files by kind: ``expand``, ``contract``, ``data``."""
        before = self.files()
        command.revision(self.config, message=message, autogenerate=True)
        new = {}
        for path in self.files() - before:
            kind = "data" if path.parent.name == "dm" else path.parent.name
            assert kind not in new, f"two new {kind} files"
            new[kind] = path
        return new

    def upgrade(self, target: str = "heads") -> None:
        command.upgrade(self.config, target)

    def use_data_migrations(self, path: Path) -> None:
        """List a generated stub module in the settings (what the developer is told to do)."""
        text = self.ini.read_text()
        first = text.index("data_migrations = ")
        end = text.index("\n", first)
        self.ini.write_text(text[:end] + f", dm.{path.stem}" + text[end:])

    def run_data_migrations(self) -> int:
        from migrations_policy.core.project import Project

        project = Project(self.ini)
        try:
            result = commands.online_data_migrations(project)
            print(result.text())
            return result.exit_code
        finally:
            project.dispose()

    def alembic_cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "alembic", "-c", str(self.ini), *args],
                              capture_output=True, text=True, cwd=self.root, timeout=120)


@pytest.fixture
def workspace(tmp_path, db_url) -> Workspace:
    return Workspace(tmp_path, db_url)


@pytest.fixture
def sqlite_workspace(tmp_path) -> Workspace:
    """For tests whose point is not the backend (offline comparisons, CLI plumbing)."""
    import sqlalchemy as sa

    return Workspace(tmp_path, sa.URL.create("sqlite", database=str(tmp_path / "test.db")))


def let_data_go(files: dict, decided: dict[str, str] | None = None) -> list[str]:
    """The documented 'let it go' edit of a move stub: delete the ``*_moved`` migrations from the
    stub module (and their names from the contract's ``requires_data_migrations``, should a
    developer have listed them); with *decided*, record the decision (``drops_data``) in the
    contract script.  Returns the names."""
    import re

    data, contract = files["data"].read_text(), files["contract"].read_text()
    names = re.findall(r"@data_migration\('(\w+_moved)'", data)
    blocks = [b for b in data.split("\n\n\n") if not any(f"'{n}'" in b for n in names)]
    files["data"].write_text("\n\n\n".join(blocks))
    for name in names:
        contract = contract.replace(f"    {name!r},\n", "")
    if decided:
        contract = contract.replace("# drops_data = {}", f"drops_data = {decided!r}")
    files["contract"].write_text(contract)
    sys.modules.pop(f"dm.{files['data'].stem}", None)
    return names


def confirm_guessed_renames(path: Path) -> int:
    """The documented edit that confirms every GUESSED rename of a generated expand script (the
    line that raises ``GuessedRename``, deleted); how many."""
    import re

    text = path.read_text()
    confirmed, count = re.subn(r"^ *raise migrations_policy\.window\.sync_triggers\.GuessedRename\(.*\)\n", "",
                               text, flags=re.M)
    path.write_text(confirmed)
    return count


def module_of(path: Path):
    """The revision module's attributes (revision, down_revision, depends_on, ...)."""
    import runpy

    return runpy.run_path(str(path))
