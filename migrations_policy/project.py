"""The project a command works on: its alembic config, its settings, its database.

``Project`` is what every command receives.  It owns the SQLAlchemy engine (created
lazily, so commands that need no database never open one) and hands alembic's
``env.py`` an open connection through ``config.attributes["connection"]``, which
is how dbsync applies its own session settings (lock timeouts) to every DDL.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine, URL
from sqlalchemy.exc import SQLAlchemyError

from . import _urls
from .config import DEFAULT_ALEMBIC_INI, Settings, load_settings
from .errors import ConfigError, DatabaseError



class Project:
    """An alembic environment plus migrations_policy settings and a lazy engine."""

    def __init__(self, alembic_ini: str | os.PathLike[str] = DEFAULT_ALEMBIC_INI, url: str | None = None):
        path = Path(alembic_ini)
        if not path.is_file():
            raise ConfigError(f"{path}: alembic config file not found (use -c/--config)")
        self.alembic_ini = path
        self.alembic_config = AlembicConfig(str(path))
        self.settings: Settings = load_settings(path.parent, alembic_ini=path)
        # Like alembic's own commands: the project's code (prepend_sys_path) becomes importable,
        # for its data migrations and release mapping.
        for entry in reversed(self.alembic_config.get_prepend_sys_paths_list() or []):
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
            try:
                self._engine = create_engine(self.url)
            except (SQLAlchemyError, ImportError, ValueError) as exc:
                raise DatabaseError(f"cannot use database {self.masked_url}: {_urls.mask_text(_one_line(exc))}") from None
        return self._engine

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection, with connection failures turned into one-line DatabaseErrors."""
        try:
            conn = self.engine.connect()
        except SQLAlchemyError as exc:
            raise DatabaseError(f"cannot connect to {self.masked_url}: {_urls.mask_text(_one_line(exc))}") from None
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


def _one_line(exc: BaseException) -> str:
    """The first meaningful line of a driver's error, without SQLAlchemy's background link."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("(Background on this error"):
            return line
    return type(exc).__name__
