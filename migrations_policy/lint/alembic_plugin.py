"""The alembic plugin that registers ``migrations_policy.lint`` as a post_write_hook.

alembic loads it through the ``alembic.plugins`` entry point on *every*
``import alembic``, so it imports nothing of the linter: the hook's body
(``lint.hook.lint_hook``) is imported when alembic first writes a script.
"""

HOOK_NAME = "migrations_policy.lint"


def lint_new_script(filename: str, options: dict) -> None:
    from migrations_policy.lint.hook import lint_hook

    lint_hook(filename, options)


def register() -> None:
    from alembic.script import write_hooks

    if HOOK_NAME not in write_hooks._registry:
        write_hooks.register(HOOK_NAME)(lint_new_script)


def setup(plugin) -> None:
    """alembic plugin entry point."""
    register()
