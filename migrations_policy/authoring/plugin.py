"""The alembic plugin (entry point group ``alembic.plugins``).

alembic imports this module and calls ``setup(plugin)`` on *every* ``import
alembic``, while alembic itself is still being imported: so this module imports
nothing heavy, and the comparator's real work lives in ``authoring.versioned``,
imported when autogenerate first calls it.  The comparator is opt-in per
environment (``autogenerate_plugins``, set by ``environment.configure_options``).
"""


def compare_object_table(autogen_context, modify_table_ops, schema, tname, conn_table, metadata_table):
    from migrations_policy.authoring.versioned import compare_object_table as compare

    return compare(autogen_context, modify_table_ops, schema, tname, conn_table, metadata_table)


def compare_enums(autogen_context, upgrade_ops, schemas):
    from migrations_policy.authoring.enums import compare_enums as compare

    return compare(autogen_context, upgrade_ops, schemas)


def setup(plugin) -> None:
    plugin.add_autogenerate_comparator(compare_object_table, "table", "object_versions")
    plugin.add_autogenerate_comparator(compare_enums, "schema", "enum_values", qualifier="postgresql")
