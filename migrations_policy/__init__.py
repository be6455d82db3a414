"""Enforced expand / online-data-migration / contract policy for rolling upgrades.

The public API is small and lives here; everything else is an implementation
detail of the commands (``migrations_policy.commands``) and the two console
scripts (``migrations-policy`` and ``dbsync``).
"""

__version__ = "0.1.0"

__all__ = ["assert_schema_compatible", "SchemaIncompatible"]


def __getattr__(name):
    # Lazy: importing the package (e.g. alembic's plugin loading) stays cheap.
    if name in ("assert_schema_compatible", "SchemaIncompatible"):
        from . import compat

        return getattr(compat, name)
    raise AttributeError(name)
