"""The result every command returns: an exit code, text for people, a dict for JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from migrations_policy.core.errors import UsageError


@dataclass
class Result:
    """Base result: exit code 0 and nothing to say."""

    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {}

    def text(self) -> str:
        return ""

    def render(self, fmt: str) -> str:
        """The output for ``--format fmt``: text or JSON (subclasses may know more formats)."""
        if fmt == "json":
            return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)
        if fmt != "text":
            raise UsageError(f"this command has no {fmt!r} output format")
        return self.text()
