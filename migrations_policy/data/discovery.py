"""Finding a project's data migrations: configured modules, an entry point group, the release mapping.

* ``data_migrations = pkg.module, other.module`` (settings): each module's
  ``DataMigration`` objects, in the order the module defines them;
* the entry point group ``migrations_policy.data_migrations``: each entry point
  names a module, a ``DataMigration`` or a list of them;
* ``release_mapping = pkg.releases:RELEASE_MAPPING``: adds the built-in
  object-version backfill, which runs last.

Nothing is found by file name, so no migration is ever forgotten because its
release has passed (glance's mistake).
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Iterable

from migrations_policy.core.config import Settings
from migrations_policy.core.errors import ConfigError
from migrations_policy.core import project_code
from migrations_policy.data.declare import DataMigration, Registry
from migrations_policy.data.versions import ReleaseMapping, version_backfill_migrations

ENTRY_POINT_GROUP = "migrations_policy.data_migrations"


def migrations_in(obj: Any) -> list[DataMigration]:
    """The data migrations a module, a DataMigration or an iterable of them provides."""
    if isinstance(obj, DataMigration):
        return [obj]
    if isinstance(obj, ModuleType):
        return [value for value in vars(obj).values() if isinstance(value, DataMigration)]
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        found = list(obj)
        if all(isinstance(item, DataMigration) for item in found):
            return found
    raise ConfigError(f"{obj!r} is not a module, a DataMigration or a list of them")


def _import(spec: str, what: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name.strip())
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a project's module may raise anything on import, or sys.exit()
        raise ConfigError(f"{what}: cannot import {module_name.strip()!r}: {project_code.describe(exc)}") from None
    if not attribute:
        return module
    try:
        return getattr(module, attribute.strip())
    except AttributeError:
        raise ConfigError(f"{what}: {module_name.strip()!r} has no {attribute.strip()!r}") from None


def load_release_mapping(spec: str) -> ReleaseMapping:
    """The ``package.module:NAME`` release mapping of the settings."""
    if ":" not in spec:
        raise ConfigError(f"release_mapping: expected 'package.module:NAME', got {spec!r}")
    mapping = _import(spec, "release_mapping")
    if not isinstance(mapping, ReleaseMapping):
        raise ConfigError(f"release_mapping: {spec} is not a migrations_policy.data.ReleaseMapping")
    return mapping


def load_registry(settings: Settings, sys_paths: Iterable[str] = (), use_entry_points: bool = True) -> Registry:
    """Every data migration of the project, the object-version backfill last."""
    for path in reversed(list(sys_paths or ())):
        if path not in sys.path:
            sys.path.insert(0, path)
    registry = Registry()
    registry.listed, registry.roots = list(settings.data_migrations), list(sys_paths or ())
    for module in settings.data_migrations:
        for migration in migrations_in(_import(module, "data_migrations")):
            registry.add(migration)
    if use_entry_points:
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = entry_point.load()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                raise ConfigError(f"entry point {entry_point.name} ({ENTRY_POINT_GROUP}): "
                                  f"{project_code.describe(exc)}") from None
            for migration in migrations_in(loaded):
                registry.add(migration)
    if settings.release_mapping:
        for migration in version_backfill_migrations(load_release_mapping(settings.release_mapping)):
            registry.add(migration)
    return registry
