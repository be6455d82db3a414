"""The contract gate and what runs inside a migration: the verdict (``verdict``; what a revision
requires: ``requirements``; live sync triggers: ``sync_trigger_checks``; ``--force`` records:
``overrides``), the drop guard and its raw-driver paths, data preconditions, the env.py hook (``runtime``,
``environment``), the fail-safe alembic plugin, offline ``--sql`` self-checks and
``op.require_data_migrations``.

May import ``core``, ``policy``, ``data``, ``expand`` and ``window``; nothing above it.
"""
