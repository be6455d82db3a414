"""Migration sessions on MariaDB/MySQL run with a strict ``sql_mode``.

Under a non-strict mode (``sql_mode=''``, the server's or the session's) MariaDB
truncates or coerces a value that does not fit a column's new type with a warning,
and the statement succeeds: ``ALTER TABLE nodes MODIFY extra VARCHAR(9)`` cut 201 of
300 unmigrated values and exited 0.  ``STRICT_ALL_TABLES`` is added to the session's
own mode (nothing else of it changes), so such a statement is an error and the
database rolls it back (an ``ALTER TABLE`` copies into a new table and keeps the old
one on error).  Other dialects: nothing to do (PostgreSQL and SQLite never truncate
silently on a type change: PostgreSQL refuses, SQLite keeps the value).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

STRICT = "STRICT_ALL_TABLES"


def make_strict(connection: Connection) -> None:
    """Add ``STRICT_ALL_TABLES`` to this MariaDB/MySQL session's ``sql_mode``."""
    if connection.dialect.name not in ("mysql", "mariadb"):
        return
    connection.execute(sa.text("SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), :strict)"),
                       {"strict": STRICT})
    if connection.in_transaction():
        connection.commit()


def session_mode(connection: Connection) -> str:
    return str(connection.execute(sa.text("SELECT @@SESSION.sql_mode")).scalar() or "")
