"""SQLite: a revision is one transaction, its DDL included.

Python's ``sqlite3`` module (its default, legacy transaction control, which SQLAlchemy's
pysqlite dialect uses) opens a transaction only before ``INSERT``/``UPDATE``/``DELETE``/
``REPLACE``: DDL runs in autocommit, each statement committed on its own, whatever
SQLAlchemy's ``begin()`` says.  A revision stopped half way (a kill, an error in its third
statement) would leave its first statements applied or reverted while the version table
says otherwise, and SQLite keeps no statement journal to resume from (``journal.py``).

So the env.py hook makes every transaction on the migration connection begin with an
explicit ``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe for pysqlite); ``sqlite3`` then
leaves the transaction alone until alembic commits it after the version-table update: the
revision's statements and the version move commit, or roll back, together.  ``IMMEDIATE``
takes the write lock at once (waiting out the application's writers with the busy timeout):
a deferred transaction that read first would have to upgrade its read lock later, and SQLite
answers "database is locked" at once when a writer of the application holds the lock it needs.
"""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Connection


def _begin(connection: Connection) -> None:
    driver = connection.connection.driver_connection
    if not getattr(driver, "in_transaction", True):  # sqlite3 has not begun one itself (before DML)
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_transactional(connection: Connection) -> None:
    """On a SQLite connection of the ``sqlite3`` driver: each SQLAlchemy transaction is a real one."""
    if connection.dialect.name != "sqlite" or not hasattr(connection.connection.driver_connection,
                                                              "in_transaction"):
        return
    if not event.contains(connection, "begin", _begin):
        event.listen(connection, "begin", _begin)
