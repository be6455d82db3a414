"""``Options``: everything besides a file that changes its findings (part of the cache key).

Kept apart from ``engine`` so that a run answered from the cache imports neither the
engine nor the policy knowledge base: ``context`` (a ``policy.model.Context``) is
built on first use, by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    dialects: tuple[str, ...]
    postgresql_version: int = 15
    timeout: float = 10.0
    url: str | None = None
    _context: list = field(default_factory=list, compare=False, repr=False)

    @property
    def context(self):
        """The policy's ``Context`` for these options (imported and built once)."""
        if not self._context:
            from ..policy.model import Context

            self._context.append(Context(postgresql_version=self.postgresql_version))
        return self._context[0]

    def key(self) -> str:
        return f"{','.join(self.dialects)}|pg{self.postgresql_version}|{self.timeout}|{self.url or ''}"
