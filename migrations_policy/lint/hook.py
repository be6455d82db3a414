"""``migrations_policy.lint`` as an alembic post_write_hook, registered by an alembic plugin.

In ``alembic.ini``::

    [post_write_hooks]
    hooks = mplint
    mplint.type = migrations_policy.lint
    # optional: mplint.phase = expand, mplint.dialects = postgresql

Every script ``alembic revision`` writes is linted at once; error findings abort the
command (the file stays, so it can be fixed).  alembic loads this module through the
``alembic.plugins`` entry point on every ``import alembic``: it imports nothing
heavy until the hook runs.
"""

from __future__ import annotations

HOOK_NAME = "migrations_policy.lint"


def lint_hook(filename: str, options: dict) -> None:
    from alembic.util import CommandError

    from . import run
    from .reporters import render
    from ..config import load_settings

    dialects = [d.strip() for d in options.get("dialects", "").split(",") if d.strip()] or None
    report = run([filename], phase=options.get("phase") or None, dialects=dialects, settings=load_settings("."))
    if report.exit_code:
        raise CommandError(f"migrations-policy lint found problems in the new script:\n{render(report, 'text')}")


def register() -> None:
    from alembic.script import write_hooks

    if HOOK_NAME not in write_hooks._registry:
        write_hooks.register(HOOK_NAME)(lint_hook)


def setup(plugin) -> None:
    """alembic plugin entry point: register the post_write_hook."""
    register()
