"""``migrations-policy check-models``: object tables without a ``version`` column.

An object table is one marked as such (``VersionedMixin``, ``object_table()``,
``info={"migrations_policy.object_table": True}``) or one the release mapping
names.  Each must have a ``version`` column (String, nullable) so the
object-version checks can read it, and an index starting with it.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

import sqlalchemy as sa

from migrations_policy.core.result import Result
from migrations_policy.core.errors import UsageError
from migrations_policy.authoring.versioned import VERSION_COLUMN, is_object_table

EXIT_FINDINGS = 1


@dataclass
class CheckModelsResult(Result):
    target: str = ""
    tables: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "object_tables": self.tables, "problems": self.problems}

    def text(self) -> str:
        if not self.problems:
            return f"{self.target}: {len(self.tables)} object table(s), each with a version column"
        return "\n".join(self.problems)


def load_metadata(target: str) -> list[sa.MetaData]:
    """``package.module`` or ``package.module:NAME`` → the MetaData objects it holds."""
    module_name, _, attr = target.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, "")  # like alembic's prepend_sys_path = .
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module: any import error is a one-line usage error
        raise UsageError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    if attr:
        try:
            values: Iterable[Any] = [getattr(module, attr)]
        except AttributeError:
            raise UsageError(f"{module_name!r} has no attribute {attr!r}") from None
    else:
        values = vars(module).values()
    found: list[sa.MetaData] = []
    for value in values:
        metadata = value if isinstance(value, sa.MetaData) else getattr(value, "metadata", None)
        if isinstance(metadata, sa.MetaData) and all(metadata is not m for m in found):
            found.append(metadata)
    if not found:
        raise UsageError(f"{target!r}: no SQLAlchemy MetaData found (give module:NAME)")
    return found


def check_models(target: str, release_mapping: Any = None) -> CheckModelsResult:
    """Report object tables of *target*'s models that lack the version column or its index."""
    result = CheckModelsResult(target=target)
    mapped = set(getattr(release_mapping, "tables", {}).values()) if release_mapping is not None else set()
    tables = {t.name: t for metadata in load_metadata(target) for t in metadata.sorted_tables}
    for name in sorted(mapped - set(tables)):
        result.problems.append(f"{name}: named by the release mapping but not in the models")
    for name, table in sorted(tables.items()):
        if not (is_object_table(table) or name in mapped):
            continue
        result.tables.append(name)
        column = table.c.get(VERSION_COLUMN)
        if column is None:
            result.problems.append(f"{name}: object table without a {VERSION_COLUMN!r} column "
                                   "(use VersionedMixin or object_table())")
        elif not isinstance(column.type, sa.String):
            result.problems.append(f"{name}.{VERSION_COLUMN}: must be a String, not {column.type}")
        elif not any(ix.columns and list(ix.columns)[0] is column for ix in table.indexes):
            result.problems.append(f"{name}.{VERSION_COLUMN}: no index starts with it (the version checks "
                                   "scan the table without one)")
    result.exit_code = EXIT_FINDINGS if result.problems else 0
    return result
