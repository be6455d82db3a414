"""Online data migrations: declare them, run them in batches, read the ledger.

Public API (documented in docs/data_migrations.rst):

* declaring: ``DataMigration``, ``data_migration`` (decorator), ``Batch``; ``Prune`` (``dbsync prune``);
* running: ``run``, ``RunOptions`` (the runner behind ``dbsync online_data_migrations``);
* finding: ``load_registry``, ``Registry``, ``ENTRY_POINT_GROUP``;
* the gate's view: ``pending_migrations``, ``record_forced``;
* the ledger: ``create_ledger`` / ``drop_ledger`` for the expand root revision;
* object versions: ``ReleaseMapping``, ``check_object_versions``, ``ObjectVersionError``.
"""

from .declare import Batch, DataMigration, Registry, data_migration
from .discovery import ENTRY_POINT_GROUP, load_registry, load_release_mapping
from .ledger import LEDGER_TABLE, create_ledger, drop_ledger, record_forced
from .prune import Prune
from .report import MigrationReport, RunReport
from .runner import PendingMigration, RunOptions, count_pending, pending_migrations, run
from .versions import ObjectVersionError, ObjectVersionReport, ReleaseMapping, check_object_versions

__all__ = [
    "Batch", "DataMigration", "Registry", "data_migration",
    "ENTRY_POINT_GROUP", "load_registry", "load_release_mapping",
    "Prune",
    "LEDGER_TABLE", "create_ledger", "drop_ledger", "record_forced",
    "MigrationReport", "RunReport",
    "PendingMigration", "RunOptions", "count_pending", "pending_migrations", "run",
    "ObjectVersionError", "ObjectVersionReport", "ReleaseMapping", "check_object_versions",
]
