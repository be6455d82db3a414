"""Authoring migrations under the expand/contract policy.

* ``split``: the autogenerate split (``directives.process_revision_directives``) writing an
  expand and a contract script, asking the knowledge base (``policy``) where
  each op belongs; ``render`` renders the online forms; ``stubs`` writes
  data-migration stubs;
* ``versioned``: ``VersionedMixin`` / ``object_table`` and the version column's
  autogenerate comparator; ``check_models`` reports object tables without it;
* ``scaffold``: ``migrations-policy init`` (and ``--adopt``);
* ``plugin``: the alembic plugin (``alembic.plugins`` entry point).

This module is imported while alembic itself is being imported (the plugin
lives under it), so it imports nothing eagerly: names resolve on first use.
"""

from __future__ import annotations

from migrations_policy.core.lazy import lazy_getattr

_LAZY = {
    "VersionedMixin": ".versioned",
    "object_table": ".versioned",
    "is_object_table": ".versioned",
    "configure_object_versions": ".versioned",
    "process_revision_directives": ".directives",
}


__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = sorted(_LAZY)
