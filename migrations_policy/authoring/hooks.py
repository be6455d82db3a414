"""What ``environment.configure_options`` adds for authoring: the split and the comparators.

Cheap on purpose: env.py runs it for every alembic command, and the split
itself (``authoring.directives``) is imported only when autogenerate calls it.
"""

from __future__ import annotations

from typing import Any, Callable

#: The plugin registered through the ``alembic.plugins`` entry point.
PLUGIN_NAME = "migrations_policy.object_versions"
AUTOGENERATE_PLUGINS = ["alembic.autogenerate.*", PLUGIN_NAME]


def ensure_plugin() -> None:
    """Register the plugin by hand when the entry point is missing (a source checkout)."""
    from alembic.runtime.plugins import Plugin, _all_plugins

    if PLUGIN_NAME not in _all_plugins:
        from migrations_policy.authoring import plugin

        Plugin.setup_plugin_from_module(plugin, PLUGIN_NAME)


def autogenerate_options(context: Any, project_hook: Callable[..., None] | None = None) -> dict[str, Any]:
    ensure_plugin()

    def process_revision_directives(migration_context, revision, directives) -> None:
        if project_hook is not None:
            project_hook(migration_context, revision, directives)
        from migrations_policy.authoring.directives import process_revision_directives as split

        split(migration_context, revision, directives)

    return {
        "process_revision_directives": process_revision_directives,
        "autogenerate_plugins": list(AUTOGENERATE_PLUGINS),
        # a changed server default matters to the release that omits the column: compare it
        "compare_server_default": True,
    }
