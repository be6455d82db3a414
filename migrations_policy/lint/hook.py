"""``migrations_policy.lint`` as an alembic post_write_hook, registered by an alembic plugin.

In ``alembic.ini``::

    [post_write_hooks]
    hooks = mplint
    mplint.type = migrations_policy.lint
    # optional: mplint.phase = expand, mplint.dialects = postgresql

Every script ``alembic revision`` writes is linted at once; error findings abort the
command (the file stays, so it can be fixed).  The hook is registered by the light
``migrations_policy.lint.alembic_plugin`` (an ``alembic.plugins`` entry point), which imports
this module only when alembic first writes a script.
"""

from __future__ import annotations

def lint_hook(filename: str, options: dict) -> None:
    from alembic.util import CommandError

    from migrations_policy.lint.linter import run
    from migrations_policy.lint.output.reporters import render
    from migrations_policy.core.config import load_settings

    dialects = [d.strip() for d in options.get("dialects", "").split(",") if d.strip()] or None
    report = run([filename], phase=options.get("phase") or None, dialects=dialects, settings=load_settings("."))
    if report.exit_code:
        raise CommandError(f"migrations-policy lint found problems in the new script:\n{render(report, 'text')}")
