"""Reflection helpers shared by the runtime checks."""

from __future__ import annotations

from typing import Any


def column_names(inspector: Any, table: str) -> dict[str, str]:
    """{lower-cased name: name} of *table*'s columns ({} when the table does not exist)."""
    if not inspector.has_table(table):
        return {}
    return {c["name"].lower(): c["name"] for c in inspector.get_columns(table)}
