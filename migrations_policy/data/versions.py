"""Object versions (after ironic): every object row carries the version of the code that wrote it.

A project's release mapping says which versions each release accepts::

    RELEASE_MAPPING = ReleaseMapping(
        tables={"Node": "nodes", "Port": "ports"},       # object -> table
        releases={                                       # oldest first; the last is current
            "2.0": {"Node": ["1.0", "1.1"], "Port": ["1.0"]},
            "3.0": {"Node": ["1.1"], "Port": ["1.0", "1.1"]},
        },
    )

``check_object_versions`` (run by ``dbsync check`` and before ``dbsync upgrade``)
refuses rows whose version is NULL or accepted by no release in the mapping, and
tolerates object tables (or version columns) that do not exist yet: pending
expand revisions create them, and a table that does not exist has no rows to
be incompatible.  ``version_backfill_migrations`` are the built-in data
migrations, run last, that set ``version`` on rows still NULL to the current
release's newest version of their object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from migrations_policy.core.errors import ConfigError, PolicyError
from migrations_policy.data.declare import DataMigration

OK, ABSENT, NO_COLUMN, BAD = "ok", "absent", "no version column", "bad"


class ObjectVersionError(PolicyError):
    """Rows with a NULL or unaccepted object version: the previous upgrade's data migrations are not done."""

    exit_code = 2


@dataclass(frozen=True)
class ReleaseMapping:
    """Release -> object -> accepted versions (releases oldest first), and each object's table."""

    releases: Mapping[str, Mapping[str, Sequence[str]]]
    tables: Mapping[str, str]
    key: str = "id"
    column: str = "version"

    def __post_init__(self) -> None:
        if not self.releases:
            raise ConfigError("release mapping: no releases")
        for release, objects in self.releases.items():
            unknown = set(objects) - set(self.tables)
            if unknown:
                raise ConfigError(f"release mapping {release!r}: objects without a table: {', '.join(sorted(unknown))}")

    @property
    def current(self) -> str:
        return list(self.releases)[-1]

    def accepted(self, release: str | None = None) -> dict[str, set[str]]:
        """Versions accepted per object: by *release*, or by any release of the mapping (the default)."""
        if release is not None and release not in self.releases:
            raise ConfigError(f"release mapping: unknown release {release!r} (known: {', '.join(self.releases)})")
        chosen = [self.releases[release]] if release else list(self.releases.values())
        accepted: dict[str, set[str]] = {name: set() for name in self.tables}
        for objects in chosen:
            for name, versions in objects.items():
                accepted[name].update(versions)
        return accepted

    def latest(self, name: str) -> str | None:
        """The newest version of object *name* in the newest release that lists it."""
        for objects in reversed(list(self.releases.values())):
            if objects.get(name):
                return list(objects[name])[-1]
        return None


@dataclass
class ObjectTableCheck:
    object: str
    table: str
    status: str
    null_rows: int = 0
    unaccepted: dict[str, int] = field(default_factory=dict)

    def problem(self) -> str | None:
        if self.status != BAD:
            return None
        parts = [f"{self.null_rows} with NULL version"] if self.null_rows else []
        parts += [f"{count} at version {version!r}" for version, count in sorted(self.unaccepted.items())]
        return f"{self.object} ({self.table}): {', '.join(parts)}"


@dataclass
class ObjectVersionReport:
    checks: list[ObjectTableCheck]

    @property
    def ok(self) -> bool:
        return all(c.status != BAD for c in self.checks)

    def problems(self) -> list[str]:
        return [p for p in (c.problem() for c in self.checks) if p]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "objects": [vars(c) for c in self.checks]}

    def raise_for_problems(self) -> None:
        if not self.ok:
            raise ObjectVersionError(
                "object rows with NULL or unaccepted versions: " + "; ".join(self.problems())
                + " (finish the data migrations: dbsync online_data_migrations)")


def check_object_versions(connection: Connection, mapping: ReleaseMapping, release: str | None = None,
                          added_by_pending: Callable[[], set[tuple[str, str | None]]] | None = None
                          ) -> ObjectVersionReport:
    """Count rows whose version is NULL or not accepted; absent tables and columns are tolerated,
    and so are those *added_by_pending* (called only when some rows would be refused) names:
    ``(table, column)`` / ``(table, None)`` that pending expand revisions add, partly applied or not
    (their rows were written before the column existed, by nothing the mapping could judge)."""
    inspector = sa.inspect(connection)
    accepted = mapping.accepted(release)
    checks = []
    for name, table_name in mapping.tables.items():
        check = ObjectTableCheck(name, table_name, OK)
        checks.append(check)
        if not inspector.has_table(table_name):
            check.status = ABSENT
            continue
        if mapping.column not in {c["name"] for c in inspector.get_columns(table_name)}:
            check.status = NO_COLUMN
            continue
        version = sa.column(mapping.column)
        rows = connection.execute(sa.select(version, sa.func.count()).select_from(sa.table(table_name, version))
                                  .group_by(version)).all()
        for value, count in rows:
            if value is None:
                check.null_rows += count
            elif value not in accepted[name]:
                check.unaccepted[value] = count
        if check.null_rows or check.unaccepted:
            check.status = BAD
    if added_by_pending is not None and any(c.status == BAD for c in checks):
        added = added_by_pending()
        for check in checks:
            if check.status == BAD and ({(check.table.lower(), mapping.column.lower()),
                                         (check.table.lower(), None)} & added):
                check.status, check.null_rows, check.unaccepted = NO_COLUMN, 0, {}
    return ObjectVersionReport(checks)


def version_backfill_migrations(mapping: ReleaseMapping) -> list[DataMigration]:
    """The built-in last data migrations: ``version`` := current version where it is NULL."""
    migrations = []
    for name, table_name in mapping.tables.items():
        latest = mapping.latest(name)
        if latest is None:
            continue
        table = sa.table(table_name, sa.column(mapping.key), sa.column(mapping.column, sa.String))
        migrations.append(DataMigration(
            f"object_version_{table_name}".lower(), table=table, key=mapping.key,
            pending=table.c[mapping.column].is_(None), values={mapping.column: latest}, run_last=True,
            description=f"set {table_name}.{mapping.column} = {latest!r} where it is NULL",
        ))
    return migrations
