"""``Options``: everything besides a file that changes its findings (part of the cache key).

Kept apart from ``engine`` so that a run answered from the cache imports neither the
engine nor the policy knowledge base: ``context`` (a ``policy.model.Context``) is
built on first use, by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrations_policy.lint.plugins import Plugins


@dataclass(frozen=True)
class Options:
    dialects: tuple[str, ...]
    postgresql_version: int = 15
    timeout: float = 10.0
    url: str | None = None
    #: MiB one script may allocate beyond what the worker holds (0: no limit).
    memory_limit: int = 1024
    #: Modules imported before any script runs (custom operations), configured and found through env.py.
    plugins: Plugins = Plugins()
    _context: list = field(default_factory=list, compare=False, repr=False)

    @property
    def context(self):
        """The policy's ``Context`` for these options (imported and built once)."""
        if not self._context:
            from migrations_policy.policy.model import Context

            self._context.append(Context(postgresql_version=self.postgresql_version))
        return self._context[0]

    def key(self) -> str:
        return (f"{','.join(self.dialects)}|pg{self.postgresql_version}|{self.timeout}|{self.url or ''}"
                f"|{self.memory_limit}|{self.plugins.key()}")
