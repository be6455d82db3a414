"""The gate fails closed when a project's env.py is not wired to it.

The gate lives in the step function that ``environment.configure_options``
hands to ``context.configure`` (``runtime._guard``).  An env.py that drops
``**policy.configure_options(context)`` would apply contract revisions ungated.
So this module hooks ``DefaultImpl.start_migrations``, alembic's documented
per-run hook that ``MigrationContext.run_migrations`` calls before it asks for
the steps: when the step function of that run is not the guard, it is wrapped
so that a run that would apply or stamp a revision of a project using
migrations_policy is refused before the first step, with one line naming the
env.py.  It is installed by the alembic plugin (entry point ``alembic.plugins``:
on every ``import alembic``, so every ``alembic`` command) and by the env.py hook.

A project "uses migrations_policy" when dbsync runs it, its alembic ini has a
``[migrations_policy]`` section, its env.py mentions ``migrations_policy``, or a
revision of the run declares required data migrations.  Other alembic projects in
the same Python environment are left alone.

It reads the running ``MigrationContext`` from ``alembic.context`` and replaces
its private ``_migrations_fn``: no public hook sees the steps without env.py's
cooperation.  Tests against real alembic runs cover it.
"""

from __future__ import annotations

import configparser
import os
from typing import Any

_INSTALLED = "_migrations_policy_failsafe"


def install() -> None:
    """Hook ``DefaultImpl.start_migrations`` once per process (alembic's ddl package must be imported)."""
    from alembic.ddl.impl import DefaultImpl

    original = DefaultImpl.start_migrations
    if getattr(original, _INSTALLED, False):
        return

    def start_migrations(self: Any) -> None:
        original(self)
        _check_run_of(self)

    setattr(start_migrations, _INSTALLED, True)
    start_migrations.__doc__ = original.__doc__
    DefaultImpl.start_migrations = start_migrations  # type: ignore[method-assign]


def _check_run_of(impl: Any) -> None:
    """Wrap the step function of the migration run *impl* belongs to, unless it is the guard."""
    from alembic import context as alembic_context

    from migrations_policy.gate.hook.runtime import GUARD_MARK

    environment = getattr(alembic_context, "_proxy", None)
    migration_context = getattr(environment, "_migration_context", None)
    if migration_context is None or migration_context.impl is not impl:
        return  # a MigrationContext used without an env.py: nothing of ours to guard
    fn = getattr(migration_context, "_migrations_fn", None)
    if fn is not None and not getattr(fn, GUARD_MARK, False):
        migration_context._migrations_fn = _refusing_unguarded(fn)


def _refusing_unguarded(fn: Any) -> Any:
    def steps(heads: Any, migration_context: Any) -> list:
        found = list(fn(heads, migration_context))
        if found:
            _refuse_if_policy_project(migration_context, heads, found)
        return found

    return steps


def _env_py(migration_context: Any) -> str:
    script = migration_context.script
    return os.path.join(script.dir, "env.py") if script is not None else "env.py"


def _refuse_if_policy_project(migration_context: Any, heads: Any, steps: list) -> None:
    from migrations_policy.gate.requirements import requirements_of
    from migrations_policy.gate.verdict import NotWired
    from migrations_policy.gate.hook.runtime import REQUIRE_GUARD_ATTRIBUTE, revisions_entering

    script = migration_context.script
    environment = migration_context.environment_context
    config = environment.config if environment is not None else None
    if script is None:
        return
    entering, _ = revisions_entering(script, heads, steps)
    if not entering:
        return
    env_py = _env_py(migration_context)
    required = bool(config is not None and config.attributes.get(REQUIRE_GUARD_ATTRIBUTE))
    if not (required or _configured_for_policy(config) or _mentions_policy(env_py)
            or any(requirements_of(rev).declared for rev in entering)):
        return
    raise NotWired(f"{env_py}: env.py does not pass migrations_policy's configure_options(context) to "
                   f"context.configure(), so the contract gate cannot judge this run; refusing to apply "
                   f"{len(entering)} revision(s) (add **policy.configure_options(context) to every "
                   "context.configure call)")


def _configured_for_policy(config: Any) -> bool:
    path = getattr(config, "config_file_name", None)
    if not path or not os.path.isfile(path):
        return False
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeError):
        return True  # unreadable now but alembic read it: assume the worst
    return parser.has_section("migrations_policy")


def _mentions_policy(env_py: str) -> bool:
    try:
        with open(env_py, encoding="utf-8", errors="replace") as fh:
            return "migrations_policy" in fh.read()
    except OSError:
        return False


def setup(plugin: Any) -> None:
    """alembic plugin entry point (``alembic.plugins``): alembic's runtime is imported by now."""
    install()
