"""Commands as plain functions: each takes a ``Project`` (or a path) and plain arguments and
returns a ``Result``; ``migrations_policy.cli`` only parses arguments and prints results.

A project embeds them as its own commands (``from migrations_policy import commands``).
Names are imported lazily, so ``commands.lint`` needs neither alembic nor SQLAlchemy.

Modules: ``dbsync`` (upgrade, stamp, rollback, and the entry points of the others),
``status_check`` (version, status, check), ``alembic_run`` (an alembic command run on our
connection through the gate, its errors as one line), ``revision_log`` (history, current), ``data`` (online data migrations, prune), ``authoring`` (init, adopt, revision,
check-models), ``lint_command`` (lint; not named ``lint``: a submodule binds its name on the package, over the function), ``state`` (where a database stands, for status and
check).  May import every feature folder; only ``cli``, ``rehearsal`` and ``trace`` import it.
"""

from __future__ import annotations

from migrations_policy.core.lazy import lazy_getattr

_NAMES = {
    **dict.fromkeys(
        ("version", "VersionResult", "status", "StatusResult", "check", "CheckResult", "CHECK_MEANINGS"),
        ".status_check"),
    **dict.fromkeys(
        ("upgrade", "UpgradeResult", "stamp", "rollback", "RollbackResult", "online_data_migrations",
         "DataMigrationsResult", "prune", "PruneResult", "PruneDryRunResult", "plan", "init", "adopt", "check_models", "revision"),
        ".dbsync"),
    **dict.fromkeys(("history", "HistoryResult", "current", "CurrentResult"), ".revision_log"),
    "lint": ".lint_command",
    "LintResult": ".lint_command",
    "Result": "..core.result",
    "EXPAND": "..core.revisions",
    "CONTRACT": "..core.revisions",
}

__all__ = sorted(_NAMES)


__getattr__ = lazy_getattr(__name__, _NAMES)
