"""Enforced expand / online-data-migration / contract policy for rolling upgrades.

The public API is small and lives here; everything else is an implementation
detail of the commands (``migrations_policy.commands``) and the two console
scripts (``migrations-policy`` and ``dbsync``).
"""

__version__ = "0.1.0"
