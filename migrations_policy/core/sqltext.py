"""The SQL text of a statement alembic executes, compiled for a connection's dialect.

Shared by ``trace`` (what each statement locked), ``lock_timeout`` (which index a
``CREATE INDEX CONCURRENTLY`` builds) and ``journal`` (which statement of a revision
is done, by the hash of this text).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection


def statement_text(construct: Any, connection: Connection) -> str:
    """The SQL of a DDL construct / text clause / string, compiled for the connection's dialect."""
    if isinstance(construct, str):
        return construct
    try:
        return str(construct.compile(dialect=connection.dialect)).strip()
    except Exception:  # a construct that cannot compile standalone: show what we can
        return str(construct).strip()
