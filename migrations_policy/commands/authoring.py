"""The authoring commands as plain functions (re-exported by ``migrations_policy.commands``).

* ``init`` / ``adopt``: ``migrations-policy init DIR`` / ``init --adopt``;
* ``check_models``: ``migrations-policy check-models MODULE[:NAME]``;
* ``revision``: ``dbsync revision -m MSG``, the autogenerate split run against
  the project's database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from alembic import command as alembic_command
from alembic.util import CommandError

from migrations_policy.core.result import Result
from migrations_policy.core.errors import PolicyError, UsageError
from migrations_policy.authoring.check_models import CheckModelsResult
from migrations_policy.authoring.check_models import check_models as _check_models
from migrations_policy.authoring.scaffold import InitResult, adopt, init

__all__ = ["init", "adopt", "check_models", "revision", "InitResult", "CheckModelsResult", "RevisionResult"]


def check_models(target: str, project: Any = None) -> CheckModelsResult:
    """Object tables of *target* without a version column; uses the project's release mapping if any."""
    mapping = None
    if project is not None and project.settings.release_mapping:
        from migrations_policy.data.discovery import load_release_mapping

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


#: A revision id is part of file names and of Python source: letters, digits and "_".
_REV_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{0,63}$")


def _check_rev_id(project: Any, rev_id: str) -> None:
    """Refuse (one line) an id that would write outside the versions directory or is taken."""
    if not _REV_ID.match(rev_id):
        raise UsageError(f"--rev-id {rev_id!r}: use letters, digits and '_' (at most 64, starting with a "
                         "letter or digit)")
    taken = [ident for ident in (rev_id, f"{rev_id}_contract")
             if any(rev.revision == ident for rev in project.script.walk_revisions())]
    if taken:
        raise UsageError(f"--rev-id {rev_id!r}: revision {taken[0]!r} already exists in {project.alembic_ini}")


def revision(project: Any, message: str, rev_id: str | None = None) -> RevisionResult:
    """``alembic revision --autogenerate -m MESSAGE`` against the project's database, split by phase."""
    if rev_id is not None:
        _check_rev_id(project, rev_id)
    config = project.alembic_config
    with project.connect() as conn:
        config.attributes["connection"] = conn
        try:
            scripts = alembic_command.revision(config, message=message, autogenerate=True, rev_id=rev_id)
        except CommandError as exc:  # the whole message: a refusal's reasons follow its first line
            from migrations_policy.authoring.split import SplitRefused

            raise PolicyError(f"alembic: {str(exc).strip()}",
                              exit_code=1 if isinstance(exc, SplitRefused) else None) from None
        finally:
            config.attributes.pop("connection", None)
            if conn.in_transaction():
                conn.rollback()
    if scripts is None:
        scripts = []
    elif not isinstance(scripts, list):
        scripts = [scripts]
    return RevisionResult(paths=[s.path for s in scripts if s is not None])
