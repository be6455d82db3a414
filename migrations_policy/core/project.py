"""The project a command works on: its alembic config, its settings, its database.

``Project`` is what every command receives.  It owns the SQLAlchemy engine (created
lazily, so commands that need no database never open one) and hands alembic's
``env.py`` an open connection through ``config.attributes["connection"]``, which
is how dbsync applies its own session settings (lock timeouts) to every DDL.
"""

from __future__ import annotations

import configparser
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection, Engine, URL

from migrations_policy.core import urls as _urls
from migrations_policy.core.engines import _first_line as _one_line, connection_error, open_engine
from migrations_policy.core.config import DEFAULT_ALEMBIC_INI, Settings, load_settings
from migrations_policy.core.errors import ConfigError



class Project:
    """An alembic environment plus migrations_policy settings and a lazy engine."""

    def __init__(self, alembic_ini: str | os.PathLike[str] = DEFAULT_ALEMBIC_INI, url: str | None = None):
        path = _config_path(Path(alembic_ini))
        self.alembic_ini = path
        _remember_ini_url(path)
        if url:
            _urls.remember_url_text(url)
        self.alembic_config = open_alembic_config(path)
        self.settings: Settings = load_settings(path.parent, alembic_ini=None if path.suffix == ".toml" else path)
        # Like alembic's own commands: the project's code (prepend_sys_path) becomes importable,
        # for its data migrations and release mapping.
        for entry in reversed(_alembic_option(path, self.alembic_config.get_prepend_sys_paths_list) or []):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        self._url_override = url
        if url:
            # Plain alembic commands run on this config must see the same database.
            self.alembic_config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
        self._engine: Engine | None = None

    # -- database -------------------------------------------------------
    @property
    def url(self) -> URL:
        text = self._url_override or self.alembic_config.get_main_option("sqlalchemy.url")
        if not text:
            raise ConfigError(f"{self.alembic_ini}: no sqlalchemy.url set (use --url)")
        return _urls.parse_url(text)

    @property
    def masked_url(self) -> str:
        return _urls.mask_url(self.url)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = open_engine(self.url)
        return self._engine

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection, with connection failures turned into one-line DatabaseErrors."""
        try:
            conn = self.engine.connect()
        except Exception as exc:  # noqa: BLE001 - whatever the driver raises while connecting: one line
            raise connection_error(exc, self.url) from None
        try:
            yield conn
        finally:
            conn.close()

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- scripts ----------------------------------------------------------
    @property
    def script(self) -> ScriptDirectory:
        try:
            return ScriptDirectory.from_config(self.alembic_config)
        except CommandError as exc:
            raise ConfigError(f"{self.alembic_ini}: {_one_line(exc)}") from None

    def check_version_table(self, connection: Connection) -> None:
        """Refuse (one line) when the database's version table names revisions no script defines:
        the wrong database, the wrong ``-c``, or version_locations missing a directory."""
        from alembic.migration import MigrationContext

        script = self.script
        unknown = []
        try:
            heads = MigrationContext.configure(connection).get_current_heads()
            for head in heads:
                try:
                    script.get_revision(head)
                except CommandError:
                    unknown.append(head)
        except CommandError as exc:  # a revision map that cannot be built (duplicate ids, cycles)
            raise ConfigError(f"{self.alembic_ini}: {_one_line(exc)}") from None
        finally:
            if connection.in_transaction():
                connection.rollback()
        if unknown:
            locations = _alembic_option(self.alembic_ini, self.alembic_config.get_version_locations_list)
            raise ConfigError(
                f"{self.masked_url}: the version table records revision(s) {', '.join(map(repr, unknown))} that "
                f"no script of {self.alembic_ini} defines (version_locations: "
                f"{', '.join(locations) if locations else script.versions}); wrong -c/--config or --url?")


def _config_path(path: Path) -> Path:
    """The project's config file: *path*, or (for the default ``alembic.ini`` when absent) the
    ``pyproject.toml`` of alembic's pyproject template in the current directory."""
    if path.is_file():
        return path
    if path.name == DEFAULT_ALEMBIC_INI and _tool_alembic(path.parent / "pyproject.toml"):
        return path.parent / "pyproject.toml"
    raise ConfigError(f"{path}: alembic config file not found (use -c/--config)")


def _tool_alembic(toml: Path) -> bool:
    """Whether *toml* exists and has a ``[tool.alembic]`` table (alembic's pyproject template)."""
    if not toml.is_file():
        return False
    from migrations_policy.core.config import read_pyproject

    return read_pyproject(toml, table="alembic") is not None


def _alembic_option(path: Path, read, *args):
    """Call alembic's config reader *read*; its errors (a malformed file or value) become one ConfigError."""
    try:
        return read(*args)
    except (CommandError, configparser.Error, UnicodeDecodeError, OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {_one_line(exc)}") from None


def _remember_ini_url(path: Path) -> None:
    """Remember the secrets of the ini file's ``sqlalchemy.url`` as written (before interpolation, which
    may fail on a '%' of the password and quote the rest of it), so that no message shows them."""
    if path.suffix == ".toml":
        return
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeError):
        return  # opening the file reports it, in one line
    for section in parser.sections():
        for name, value in parser.items(section):
            if name.endswith("url") and value:
                _urls.remember_url_text(value)


def open_alembic_config(path: Path) -> AlembicConfig:
    """The alembic Config of *path*: an ini file (with a ``pyproject.toml`` holding ``[tool.alembic]``
    next to it, as alembic's pyproject template writes), or that ``pyproject.toml`` itself.

    Checked here, once, so that every command fails with one line naming the file: the
    ``[alembic]`` section (or ``[tool.alembic]`` table) and its ``script_location`` must exist.
    """
    toml = path if path.suffix == ".toml" else path.parent / "pyproject.toml"
    with_toml = _tool_alembic(toml)
    if path.suffix == ".toml" and not with_toml:
        raise ConfigError(f"{path}: no [tool.alembic] table")
    config = AlembicConfig(None if path.suffix == ".toml" else str(path), toml_file=str(toml) if with_toml else None)
    section = config.config_ini_section
    if not with_toml and not _alembic_option(path, lambda: config.file_config.has_section(section)):
        raise ConfigError(f"{path}: no [{section}] section: not an alembic ini file (an [alembic] section "
                          "with script_location, or alembic's pyproject.toml [tool.alembic])")
    if not _alembic_option(path, config.get_alembic_option, "script_location"):
        raise ConfigError(f"{path}: no script_location in [{section}]" + (" or [tool.alembic]" if with_toml else ""))
    return config
