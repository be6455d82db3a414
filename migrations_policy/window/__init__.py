"""The rolling window: sync triggers keeping an old and a new column in step while two
releases run (``sync_triggers``), kept installed and whole by every revision until the
contract (``sync_keeper``, ``sync_integrity``).

May import ``core``, ``policy``, ``data`` and ``expand``.
"""
