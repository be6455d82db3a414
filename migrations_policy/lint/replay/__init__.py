"""``lint --replay``: the linted history upgraded from base on a scratch database, and what ran judged.

* ``driver``: ``replay_all``, which orders the scripts as ``alembic upgrade heads`` would and runs them;
* ``worker``: the process (``python -m migrations_policy.lint.replay.worker``) that runs them one by one.
"""
