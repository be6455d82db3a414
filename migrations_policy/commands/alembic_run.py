"""Running an alembic command on our connection, through the gate: env.py takes the connection
from ``config.attributes`` and must hand the run to the gate (``gate.runtime``), or nothing is
applied; every error of the run becomes one ``PolicyError`` line with its exit code (a gate
refusal: 4; a revision that failed while it ran: 8, ``MigrationFailed``), and only a bug of the
libraries keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from alembic.util import CommandError
from sqlalchemy import exc as sa_exc

from migrations_policy.core import framework_tables, project_code
from migrations_policy.core.errors import MigrationFailed, PolicyError
from migrations_policy.core.progress import watch
from migrations_policy.core.project import Project, _one_line
from migrations_policy.expand.lock_timeout import is_retryable
from migrations_policy.gate.hook.runtime import GUARD_RAN_ATTRIBUTE, REQUIRE_GUARD_ATTRIBUTE
from migrations_policy.gate.verdict import DataDestroyed, GateRefused, NotWired
from migrations_policy.window.sync_keeper import SyncTriggerRefused


def _alembic(fn, *args, **kwargs) -> None:
    """Run an alembic command; its errors become PolicyErrors (gate refusal: exit 4)."""
    with watch() as running:
        _alembic_watched(running, fn, *args, **kwargs)


def _alembic_watched(running, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except NotImplementedError as exc:  # an op this dialect cannot run (SQLite: ALTER of constraints)
        _failed(running, _one_line(exc))
    except (GateRefused, NotWired, DataDestroyed, SyncTriggerRefused) as exc:
        raise PolicyError(str(exc), exit_code=exc.exit_code) from None
    except CommandError as exc:  # journal.py's refusals carry their own exit code
        raise PolicyError(f"alembic: {_one_line(exc)}", exit_code=getattr(exc, "exit_code", None)) from None
    except (ImportError, OSError) as exc:  # env.py missing, or the project's env.py cannot import its code
        if running.describe():  # no: a revision's upgrade() imported or opened something
            _failed(running, project_code.describe(exc))
        if project_code.culprit(exc) is not None:  # env.py or a revision script, loading
            raise PolicyError(f"alembic: cannot load the project's code: {project_code.describe(exc)}") from None
        raise PolicyError(f"alembic: cannot load the environment's env.py: {_one_line(exc)}") from None
    except sa_exc.DBAPIError as exc:
        if is_retryable(exc):
            raise MigrationFailed("gave up waiting for a lock after every retry: another transaction holds a lock "
                                  f"on the table ({_one_line(exc)}); the revision stopped before that statement "
                                  "(statements that committed before it are journaled: `dbsync status` shows "
                                  "them), rerun when that transaction has finished: the rerun resumes") from None
        said = framework_tables.refusal(exc) or _one_line(exc)  # a framework table of another shape: named
        _failed(running, said)
    except (KeyboardInterrupt, PolicyError):  # ours (env.py's hook raised it): already one line
        raise
    except BaseException as exc:
        if _is_driver_error(exc):  # a revision that used the DB-API connection itself (op.get_bind().connection...)
            _failed(running, _one_line(exc))
        if not project_code.stopped_by_project(exc):
            raise  # raised by the libraries alone (ours included): a bug, with its traceback
        # the script, env.py or the project's code raised, or called sys.exit(): what ran of the
        # revision rolled back with its transaction (or is journaled), and the version did not move
        _failed(running, project_code.describe(exc))


def _failed(running: Any, why: str) -> NoReturn:
    """One line for a failure: a revision's (exit 8, ``MigrationFailed``) while one was running;
    before any ran (env.py could not connect, the database refused its first query) the request
    was not carried out at all (exit 2)."""
    if running.describe():
        raise MigrationFailed(f"migration failed: {running.describe()}: {why}") from None
    raise PolicyError(f"migration failed before any revision ran: {why}") from None


def _is_driver_error(exc: BaseException) -> bool:
    """A PEP 249 driver's own error (sqlite3, psycopg, PyMySQL ...), not wrapped by SQLAlchemy."""
    return any(k.__name__ in ("DatabaseError", "InterfaceError") and k.__module__ != __name__
               for k in type(exc).__mro__)


def run_alembic_on(project: Project, conn, fn, *args, **kwargs) -> None:
    """Run alembic command *fn* on our connection (env.py takes it from ``config.attributes``).

    The connection is handed over with no transaction open, so that env.py's
    ``begin_transaction()`` owns the transactions (per migration) and
    ``autocommit_block()`` works.
    """
    if conn.in_transaction():
        conn.commit()
    attributes = project.alembic_config.attributes
    attributes.update({"connection": conn, REQUIRE_GUARD_ATTRIBUTE: True, GUARD_RAN_ATTRIBUTE: False})
    try:
        _alembic(fn, project.alembic_config, *args, **kwargs)
    except BaseException:
        if conn.in_transaction():
            conn.rollback()
        raise
    else:
        if conn.in_transaction():
            conn.commit()
        if not attributes.get(GUARD_RAN_ATTRIBUTE):
            env_py = Path(project.script.dir, "env.py")
            raise PolicyError(f"{env_py}: env.py did not run the migrations through migrations_policy's gate "
                              "(it must call context.configure(..., **policy.configure_options(context)) and "
                              "context.run_migrations()); nothing was applied", exit_code=NotWired.exit_code)
    finally:
        for key in ("connection", REQUIRE_GUARD_ATTRIBUTE, GUARD_RAN_ATTRIBUTE):
            attributes.pop(key, None)
