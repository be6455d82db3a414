"""Applying DDL safely: bounded lock waits with retries (``lock_timeout``, ``lock_holders``),
the statement journal that lets an interrupted revision resume (``journal``,
``journal_state``, ``journal_match``), and SQLite's transactional DDL.

May import ``core`` and ``policy`` only.
"""
