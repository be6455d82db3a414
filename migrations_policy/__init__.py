"""Enforced expand / online-data-migration / contract policy for rolling upgrades.

The public API is small and lives here:

* models: ``VersionedMixin``, ``object_table``, ``configure_object_versions``
  (the ``version`` column of object tables and the release pin);
* data migrations: ``DataMigration``, ``data_migration``, ``ReleaseMapping``;
* services: ``assert_schema_compatible`` / ``SchemaIncompatible``.

Contract revisions declare what they need with ``requires_data_migrations = (...)``
or ``op.require_data_migrations(...)``; env.py wires everything in through
``migrations_policy.gate.environment.configure_options``.  Everything else serves the
commands (``migrations_policy.commands``) and the two console scripts
(``migrations-policy`` and ``dbsync``).
"""

from migrations_policy.core.lazy import lazy_getattr

__version__ = "0.1.0"

# Lazy: alembic imports this package on every ``import alembic`` (our plugins), so nothing
# is imported until a name is used.
_PUBLIC = {
    "VersionedMixin": ".authoring.versioned",
    "object_table": ".authoring.versioned",
    "configure_object_versions": ".authoring.versioned",
    "DataMigration": ".data.declare",
    "data_migration": ".data.declare",
    "ReleaseMapping": ".data.versions",
    "assert_schema_compatible": ".compat",
    "SchemaIncompatible": ".compat",
}

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_getattr(__name__, _PUBLIC)
