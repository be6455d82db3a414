"""Object tables and their ``version`` column (as ironic does it).

An *object table* stores versioned objects: every row records the version of
the object that wrote it, so a contract or an upgrade can check that no row is
older than the release window accepts (``migrations_policy.data.versions``).

ORM models use the mixin::

    from migrations_policy.authoring import VersionedMixin

    class Node(VersionedMixin, Base):
        __tablename__ = "nodes"
        VERSION = "1.1"            # the object version this code writes
        ...

which adds ``version = Column(String(15), nullable=True, index=True)`` (nullable
at first: rows written by code older than the column are NULL until a data
migration fills them) and writes ``VERSION`` on every insert and update.
During a rolling upgrade a service pinned to the previous release writes that
release's version instead::

    configure_object_versions(pin_release_version="2.0", release_mapping=RELEASE_MAPPING)

Core tables are marked with ``object_table(table)``, which adds the same column.
The autogenerate comparator (``compare_object_table``) gives a marked table
that lacks ``version`` in the database the column and its index in the expand
script; ``migrations-policy check-models`` reports object tables without it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

#: ``table.info`` key marking an object table, and ``column.info`` key marking its version column.
OBJECT_TABLE = "migrations_policy.object_table"
VERSION_COLUMN_INFO = "migrations_policy.object_version"
VERSION_COLUMN = "version"
VERSION_LENGTH = 15


def version_column() -> sa.Column:
    return sa.Column(VERSION_COLUMN, sa.String(VERSION_LENGTH), nullable=True, index=True,
                     info={VERSION_COLUMN_INFO: True})


def version_index_name(table: str) -> str:
    return f"ix_{table}_{VERSION_COLUMN}"


def object_table(table: sa.Table) -> sa.Table:
    """Mark a Core ``Table`` as an object table, adding the version column if it has none."""
    table.info[OBJECT_TABLE] = True
    if VERSION_COLUMN not in table.c:
        table.append_column(version_column())
    return table


def is_object_table(table: sa.Table) -> bool:
    return bool(table.info.get(OBJECT_TABLE)) or any(c.info.get(VERSION_COLUMN_INFO) for c in table.c)


class VersionedMixin:
    """Declarative mixin: a ``version`` column written from ``VERSION`` (or the pinned release)."""

    #: The object version this code writes; None: the newest the release mapping lists.
    VERSION: ClassVar[str | None] = None
    #: The object's name in the release mapping (default: the class name).
    OBJECT_NAME: ClassVar[str | None] = None

    @declared_attr
    def version(cls) -> Mapped[str | None]:
        return mapped_column(sa.String(VERSION_LENGTH), nullable=True, index=True, info={VERSION_COLUMN_INFO: True})

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        table = cls.__dict__.get("__table__")
        if isinstance(table, sa.Table):
            table.info[OBJECT_TABLE] = True


# -- which version to write ------------------------------------------------------
class _VersionState:
    pin_release_version: str | None = None
    release_mapping: Any = None


_state = _VersionState()


def configure_object_versions(*, pin_release_version: str | None = None, release_mapping: Any = None,
                              settings: Any = None) -> None:
    """Set (or with no arguments, clear) the pin and the release mapping for the ORM hook.

    *release_mapping* is a ``migrations_policy.data.ReleaseMapping`` or a plain
    ``{release: {object name: [versions, oldest first]}}``.  With *settings*
    (``migrations_policy.core.config.Settings``), both come from the project's
    ``pin_release_version`` and ``release_mapping`` settings unless given.
    """
    if settings is not None:
        pin_release_version = pin_release_version or settings.pin_release_version or None
        if release_mapping is None and settings.release_mapping:
            from migrations_policy.data.discovery import load_release_mapping

            release_mapping = load_release_mapping(settings.release_mapping)
    releases = _releases(release_mapping)
    if pin_release_version and (releases is None or pin_release_version not in releases):
        from migrations_policy.core.errors import ConfigError

        known = ", ".join(releases or ()) or "no release mapping given"
        raise ConfigError(f"pin_release_version {pin_release_version!r} is not a release of the mapping ({known})")
    _state.pin_release_version = pin_release_version or None
    _state.release_mapping = release_mapping


def _releases(mapping: Any) -> Mapping[str, Mapping[str, Any]] | None:
    if mapping is None:
        return None
    return getattr(mapping, "releases", mapping)


def object_name(cls: type) -> str:
    return getattr(cls, "OBJECT_NAME", None) or cls.__name__


def version_to_write(cls: type) -> str | None:
    """The version an object of *cls* is written with: the pinned release's, else ``VERSION``."""
    releases = _releases(_state.release_mapping)
    name = object_name(cls)
    if _state.pin_release_version and releases is not None:
        versions = list(releases[_state.pin_release_version].get(name) or ())
        if versions:
            return versions[-1]
    version = getattr(cls, "VERSION", None)
    if version is None and releases is not None:
        for objects in reversed(list(releases.values())):
            if objects.get(name):
                return list(objects[name])[-1]
    return version


def _write_version(mapper, connection, target) -> None:
    version = version_to_write(type(target))
    if version is not None:
        target.version = version


event.listen(VersionedMixin, "before_insert", _write_version, propagate=True)
event.listen(VersionedMixin, "before_update", _write_version, propagate=True)


# -- autogenerate ----------------------------------------------------------------
def compare_object_table(autogen_context, modify_table_ops, schema, tname, conn_table, metadata_table):
    """An object table lacking ``version`` in the database gets the column and its index (expand).

    alembic already adds a column the model declares; this covers tables marked
    as object tables whose model does not declare it, and makes sure the index
    the object-version checks need comes with it.
    """
    from alembic.operations import ops
    from alembic.util import PriorityDispatchResult

    if conn_table is None or metadata_table is None or not is_object_table(metadata_table):
        return PriorityDispatchResult.CONTINUE
    if VERSION_COLUMN in conn_table.c:
        return PriorityDispatchResult.CONTINUE
    pending = modify_table_ops.ops
    if not any(isinstance(o, ops.AddColumnOp) and o.column.name == VERSION_COLUMN for o in pending):
        pending.append(ops.AddColumnOp.from_column_and_tablename(schema, tname, version_column()))
    indexed = any(isinstance(o, ops.CreateIndexOp) and _covers_version(o) for o in pending) or any(
        _index_covers_version(ix) for ix in metadata_table.indexes)
    if not indexed:
        pending.append(ops.CreateIndexOp(version_index_name(tname), tname, [VERSION_COLUMN], schema=schema))
    return PriorityDispatchResult.CONTINUE


def _covers_version(op) -> bool:
    columns = [getattr(c, "name", c) for c in op.columns]
    return bool(columns) and columns[0] == VERSION_COLUMN


def _index_covers_version(index: sa.Index) -> bool:
    columns = [c.name for c in index.columns]
    return bool(columns) and columns[0] == VERSION_COLUMN
