"""The contract gate and what runs inside a migration: the verdict (``verdict``; what a revision
requires: ``requirements``; ``--force`` records: ``overrides``; release boundaries:
``releases``), data preconditions (``preconditions``), what env.py wires in (``environment``),
the fail-safe alembic plugin (``failsafe``) and ``op.require_data_migrations`` (``operations``).
Two folders: ``hook/`` (the env.py hook for upgrades and downgrades, offline ``--sql``
self-checks) and ``drops/`` (what a revision may destroy: the drop guard, the downgrade's
at-risk judgement, live sync triggers).

May import ``core``, ``policy``, ``data``, ``expand`` and ``window``; nothing above it.
"""
