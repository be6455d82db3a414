"""``migrations_policy.errors``: the errors a user can cause, with their exit codes.

Kept at this path because projects import it from here; the code lives in
``migrations_policy.core.errors``.
"""

from migrations_policy.core.errors import ConfigError, DatabaseError, PolicyError, UsageError  # noqa: F401

__all__ = ['ConfigError', 'DatabaseError', 'PolicyError', 'UsageError']
