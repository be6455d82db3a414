"""Errors a user can cause, each with the exit code the shell maps it to.

Every error here is printed as one line (no traceback) by ``migrations_policy.cli``.
Exit codes are documented in ``docs/exit_codes.rst`` and are part of the
stable interface.
"""

from __future__ import annotations


class PolicyError(Exception):
    """Base class: an error with a one-line message and an exit code."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


#: dbsync: a migration (a schema revision, or a data migration) failed while it ran.
EXIT_MIGRATION_FAILED = 8


class MigrationFailed(PolicyError):
    """A schema revision failed while it ran (the database refused a statement, a lock wait gave up
    after every retry, the script raised): its own work rolled back with its transaction, or is
    journaled; revisions applied before it stay.  Exit 8, which no other outcome shares: 2 says the
    request was not carried out at all (usage, configuration, unreachable database)."""

    exit_code = EXIT_MIGRATION_FAILED


class UsageError(PolicyError):
    """Bad command-line arguments or configuration."""

    exit_code = 2


class ConfigError(PolicyError):
    """A configuration file or value is missing or malformed."""

    exit_code = 2


class DatabaseError(PolicyError):
    """The database could not be reached or answered with an error."""

    exit_code = 2


def interrupt_behind(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt (Ctrl-C, or the SIGTERM ``dbsync`` turns into one) *exc* is, or was raised
    while handling: a cleanup step that fails on the connection the interrupt invalidated raises
    another error in its place, which a handler of errors must not swallow (the run would go on
    after the operator asked it to stop)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__context__
    return None
