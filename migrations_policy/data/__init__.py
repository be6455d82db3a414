"""Online data migrations: declare them, run them in batches, read the ledger.

Declaring, finding and object versions live here with the ledger (``ledger``: generated
expand root revisions import it by this path); the runner's walk in ``walk/``, what remains
of each migration in ``remaining/``, ``dbsync prune`` in ``prune/``.

Public API (documented in docs/data_migrations.rst):

* declaring: ``DataMigration``, ``data_migration`` (decorator), ``Batch``, ``differs``
  (NULL-safe comparison), ``FILL_IN`` (a generated stub's placeholder); ``Prune`` (``dbsync prune``);
* running: ``run``, ``RunOptions`` (the runner behind ``dbsync online_data_migrations``);
* finding: ``load_registry``, ``Registry``, ``ENTRY_POINT_GROUP``;
* the gate's view: ``pending_migrations``, ``record_forced``;
* the ledger: ``create_ledger`` / ``drop_ledger`` for the expand root revision;
* object versions: ``ReleaseMapping``, ``check_object_versions``, ``ObjectVersionError``.
"""

from migrations_policy.data.declare import FILL_IN, Batch, DataMigration, Registry, data_migration, differs
from migrations_policy.data.discovery import ENTRY_POINT_GROUP, load_registry, load_release_mapping
from migrations_policy.data.ledger import LEDGER_TABLE, create_ledger, drop_ledger, record_forced
from migrations_policy.data.prune.deletion import Prune
from migrations_policy.data.walk.report import MigrationReport, RunReport
from migrations_policy.data.remaining.pending import PendingMigration, count_pending, pending_migrations
from migrations_policy.data.walk.runner import RunOptions, run
from migrations_policy.data.versions import (ObjectVersionError,
    ObjectVersionReport,
    ReleaseMapping,
    check_object_versions)

__all__ = [
    "Batch", "DataMigration", "FILL_IN", "Registry", "data_migration", "differs",
    "ENTRY_POINT_GROUP", "load_registry", "load_release_mapping",
    "Prune",
    "LEDGER_TABLE", "create_ledger", "drop_ledger", "record_forced",
    "MigrationReport", "RunReport",
    "PendingMigration", "RunOptions", "count_pending", "pending_migrations", "run",
    "ObjectVersionError", "ObjectVersionReport", "ReleaseMapping", "check_object_versions",
]
