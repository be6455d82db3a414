"""alembic environment of the inventory example: the expand_contract template, filled in.

``policy.configure_options(context)`` wires in the autogenerate split into
versions/expand and versions/contract, hides the framework's own tables from
autogenerate and adds the contract gate.  Keep it in every ``configure`` call.

``dbsync`` hands over its own connection (with lock timeouts set) through
``config.attributes["connection"]``; plain ``alembic`` commands open one from
``sqlalchemy.url``.
"""

from alembic import context
from sqlalchemy import engine_from_config, pool

from migrations_policy.gate import environment as policy

from inventory.models import release3

config = context.config

# The inventory's newest models (release 3), for autogenerate.
target_metadata = release3.metadata


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True, dialect_opts={"paramstyle": "named"},
                      **policy.configure_options(context))
    with context.begin_transaction():
        context.run_migrations()


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      **policy.configure_options(context))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = engine_from_config(config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.",
                                poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
