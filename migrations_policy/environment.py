"""``migrations_policy.environment``: the env.py wiring (configure_options).

Kept at this path because projects import it from here; the code lives in
``migrations_policy.gate.environment``.
"""

from migrations_policy.gate.environment import make_include_object, configure_options  # noqa: F401

__all__ = ['make_include_object', 'configure_options']
