"""``Options``: everything besides a file that changes its findings (part of the cache key).

Kept apart from ``engine`` so that a run answered from the cache imports neither the
engine nor the policy knowledge base: ``context`` (a ``policy.model.Context``) is
built on first use, by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrations_policy.lint.offline.plugins import Plugins


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
    #: The alembic ini whose main options ``context.config`` answers with offline (as ``alembic upgrade --sql``),
    #: and the sha256 of its content (part of the key: a script may read them); "" when there is none.
    alembic_ini: str = ""
    alembic_ini_sha: str = ""
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
                f"|{self.memory_limit}|{self.plugins.key()}|{self.alembic_ini}|{self.alembic_ini_sha}")


def alembic_ini(given: str | None) -> tuple[str, str]:
    """``(absolute path, sha256)`` of the alembic ini scripts see as ``context.config``: *given*, else
    ``alembic.ini`` in the current directory (alembic's default); ``("", "")`` when there is none."""
    import hashlib
    import os

    path = given or "alembic.ini"
    if not str(path).endswith(".ini"):
        return "", ""
    try:
        with open(path, "rb") as fh:
            return os.path.abspath(path), hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return "", ""
