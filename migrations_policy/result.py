"""``migrations_policy.result``: Result, what every command returns.

Kept at this path because projects import it from here; the code lives in
``migrations_policy.core.result``.
"""

from migrations_policy.core.result import Result  # noqa: F401

__all__ = ['Result']
