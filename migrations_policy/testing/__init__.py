"""Test helpers for projects using migrations_policy (and for its own suite).

``servers`` starts throwaway PostgreSQL and MariaDB servers on 127.0.0.1.
``rehearsal`` runs the rolling-upgrade rehearsal from a project's own tests.
"""
