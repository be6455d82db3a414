"""``migrations_policy.compat``: assert_schema_compatible for services at start-up.

Kept at this path because projects import it from here; the code lives in
``migrations_policy.lifecycle.compat``.
"""

from migrations_policy.lifecycle.compat import SchemaIncompatible, assert_schema_compatible, schema_problems  # noqa: F401

__all__ = ['SchemaIncompatible', 'assert_schema_compatible', 'schema_problems']
