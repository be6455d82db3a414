"""``migrations_policy.project``: Project, the project a command works on.

Kept at this path because projects import it from here; the code lives in
``migrations_policy.core.project``.
"""

from migrations_policy.core.project import Project, open_alembic_config  # noqa: F401

__all__ = ['Project', 'open_alembic_config']
