"""What runs inside a project's env.py when alembic migrates: the gate's hook for upgrades and
downgrades (``runtime``, ``downgrades``) and the offline ``--sql`` self-checks
(``offline_guard``)."""
