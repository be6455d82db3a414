"""A release's models, as the rehearsal sees them: mapped classes (ORM) found from a module or a MetaData.

``load_models("inventory.models.release1")`` finds the mapped classes the module
defines; ``"pkg.module:NAME"`` names a ``MetaData``, a declarative base or a
mapped class in it.  A bare ``MetaData`` (Core tables) is mapped to plain
classes, so the same ORM workload drives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapper, registry

from migrations_policy.data.discovery import _import as import_spec
from migrations_policy.core.errors import ConfigError


@dataclass
class Models:
    """One release's mapped classes (by class name) and the object they were loaded from."""

    label: str
    classes: dict[str, type] = field(default_factory=dict)
    target: Any = None

    @property
    def mappers(self) -> list[Mapper]:
        return [sa.inspect(cls) for cls in self.classes.values()]

    @property
    def tables(self) -> list[sa.Table]:
        found: dict[str, sa.Table] = {}
        for mapper in self.mappers:
            table = mapper.local_table
            if isinstance(table, sa.Table):
                found.setdefault(table.fullname, table)
        return list(found.values())


def _import(spec: str, what: str = "models") -> Any:
    """``pkg.module`` or ``pkg.module:NAME``; a one-line ConfigError when it cannot be had."""
    return import_spec(spec, f"{what} {spec!r}")


def _is_mapped_class(value: Any) -> bool:
    return isinstance(value, type) and isinstance(getattr(value, "__mapper__", None), Mapper)


def _map_metadata(metadata: sa.MetaData) -> dict[str, type]:
    """Map each table of a Core MetaData with a primary key to a plain class."""
    reg = registry()
    classes = {}
    for table in metadata.sorted_tables:
        if table.primary_key.columns:
            cls = type(f"{table.name}_row", (), {})
            reg.map_imperatively(cls, table)
            classes[cls.__name__] = cls
    return classes


def load_models(target: Any, label: str) -> Models:
    """Models from a ``"pkg.module[:NAME]"`` spec, a module, a MetaData, a declarative base or a class."""
    obj = _import(target) if isinstance(target, str) else target
    classes: dict[str, type] = {}
    if isinstance(obj, ModuleType):
        classes = {name: value for name, value in vars(obj).items()
                   if _is_mapped_class(value) and value.__module__ == obj.__name__
                   and isinstance(value.__mapper__.local_table, sa.Table)}
        if not classes:
            metadata = [value for value in vars(obj).values() if isinstance(value, sa.MetaData)]
            if metadata:
                classes = _map_metadata(metadata[0])
    elif isinstance(obj, sa.MetaData):
        classes = _map_metadata(obj)
    elif _is_mapped_class(obj) or hasattr(obj, "registry"):
        reg = getattr(obj, "registry", None)
        mappers = reg.mappers if reg is not None else [obj.__mapper__]
        classes = {m.class_.__name__: m.class_ for m in mappers if isinstance(m.local_table, sa.Table)}
    if not classes:
        raise ConfigError(f"models {target!r}: no mapped classes or MetaData tables found")
    return Models(label=label, classes=classes, target=obj)
