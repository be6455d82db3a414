"""``migrations_policy.sync_triggers``: op.create_sync_trigger / op.drop_sync_trigger, imported by generated revision scripts.

Kept at this path because projects import it from here; the code lives in
``migrations_policy.window.sync_triggers``.
"""

from migrations_policy.window.sync_triggers import CreateSyncTriggerOp, DropSyncTriggerOp, SyncPair, sync_trigger_name, sync_triggers, stale_sync_triggers  # noqa: F401

__all__ = ['CreateSyncTriggerOp', 'DropSyncTriggerOp', 'SyncPair', 'sync_trigger_name', 'sync_triggers', 'stale_sync_triggers']
