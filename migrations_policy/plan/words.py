"""What ``dbsync plan`` calls each statement, in the operator's words: no class names of ours
(``other CreateSyncTriggerOp on ?``), no table shown as ``?``."""

from __future__ import annotations

import re

from migrations_policy.policy import model as m

#: Statement classes a raw ``op.execute`` may pass, named for the operator.
_SQL_CLASSES = {"TextClause": "SQL statement", "str": "SQL statement"}


def statement_words(operation: m.Operation) -> str:
    """``add column books.note``, ``create sync trigger on nodes``, ``SQL statement``."""
    if operation.kind == m.OTHER:
        name = operation.name or operation.text or ""
        what = _SQL_CLASSES.get(name) or _spaced(name) or "a statement the plan cannot classify"
        return f"{what} on {operation.table}" if operation.table else what
    return operation.describe().replace(" on ?", "").replace(" ?", " (table not known before it runs)")


def _spaced(class_name: str) -> str:
    """``CreateSyncTriggerOp`` -> ``create sync trigger``."""
    base = class_name.removesuffix("Op")
    return " ".join(part.lower() for part in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", base))


def happens_on(operation: m.Operation, dialect: str) -> bool:
    """Whether *operation* takes place on *dialect*: a ``batch_alter_table`` with alembic's
    default ``recreate="auto"`` re-creates its table on SQLite only."""
    return not (operation.kind == m.BATCH_RECREATE and operation.value == "auto" and dialect != "sqlite")
