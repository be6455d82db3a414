"""A release's life after its upgrade: ``dbsync rollback``, release notes, and the schema
compatibility check a service runs at start-up (``compat``).

May import every feature folder and ``core``; only ``commands`` and ``cli`` import it.
"""
