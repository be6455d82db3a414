"""The authoring commands as plain functions (re-exported by ``migrations_policy.commands``).

* ``init`` / ``adopt``: ``migrations-policy init DIR`` / ``init --adopt``;
* ``check_models``: ``migrations-policy check-models MODULE[:NAME]``;
* ``revision``: ``dbsync revision -m MSG``, the autogenerate split run against
  the project's database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alembic import command as alembic_command
from alembic.util import CommandError

from ..result import Result
from ..errors import PolicyError
from .check_models import CheckModelsResult
from .check_models import check_models as _check_models
from .scaffold import InitResult, adopt, init

__all__ = ["init", "adopt", "check_models", "revision", "InitResult", "CheckModelsResult", "RevisionResult"]


def check_models(target: str, project: Any = None) -> CheckModelsResult:
    """Object tables of *target* without a version column; uses the project's release mapping if any."""
    mapping = None
    if project is not None and project.settings.release_mapping:
        from ..data.discovery import load_release_mapping

        mapping = load_release_mapping(project.settings.release_mapping)
    return _check_models(target, mapping)


@dataclass
class RevisionResult(Result):
    paths: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.paths}

    def text(self) -> str:
        if not self.paths:
            return "no schema changes detected; no revision written"
        return "\n".join(f"wrote {path}" for path in self.paths)


def revision(project: Any, message: str, rev_id: str | None = None) -> RevisionResult:
    """``alembic revision --autogenerate -m MESSAGE`` against the project's database, split by phase."""
    config = project.alembic_config
    with project.connect() as conn:
        config.attributes["connection"] = conn
        try:
            scripts = alembic_command.revision(config, message=message, autogenerate=True, rev_id=rev_id)
        except CommandError as exc:
            raise PolicyError(f"alembic: {str(exc).strip().splitlines()[0]}") from None
        finally:
            config.attributes.pop("connection", None)
            if conn.in_transaction():
                conn.rollback()
    if scripts is None:
        scripts = []
    elif not isinstance(scripts, list):
        scripts = [scripts]
    return RevisionResult(paths=[s.path for s in scripts if s is not None])
