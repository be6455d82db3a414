"""The operation object of ``op.require_data_migrations(...)`` (registered with alembic by
``operations.py``, which also implements it; the gate only needs to recognise it)."""

from __future__ import annotations

from alembic.operations import MigrateOperation, Operations


class RequireDataMigrationsOp(MigrateOperation):
    """Declare that this (contract) revision needs the named data migrations complete."""

    def __init__(self, *names: str) -> None:
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError("require_data_migrations() takes one or more data migration names")
        self.names = names

    @classmethod
    def require_data_migrations(cls, operations: Operations, *names: str) -> None:
        """``op.require_data_migrations("nodes_extra_to_meta", ...)``"""
        return operations.invoke(cls(*names))

    def reverse(self) -> "RequireDataMigrationsOp":
        return RequireDataMigrationsOp(*self.names)
