"""The inventory's online data migrations (release 2).

Release 2 code writes both the old and the new columns; these copy what
release 1 wrote, and keep copying whatever release-1 services still write
during the rolling upgrade: a copy is pending while the new column IS DISTINCT
FROM the old one, so a row release 1 updates again after it was copied is
pending again, and the next ``dbsync online_data_migrations`` picks it up.  The
release-3 contract requires all three to be complete.

The tables are lightweight ``sa.table`` declarations naming only the columns a
migration uses, not the release models: a migration must keep meaning the
same thing after the models move on.
"""

import sqlalchemy as sa

from migrations_policy.data import DataMigration, data_migration, differs

nodes = sa.table(
    "nodes", sa.column("id", sa.Integer), sa.column("extra", sa.Text), sa.column("meta", sa.Text),
    sa.column("name", sa.String), sa.column("display_name", sa.String),
)
ports = sa.table("ports", sa.column("id", sa.Integer), sa.column("node_id", sa.Integer))

nodes_extra_to_meta = DataMigration(
    "nodes_extra_to_meta",
    table=nodes,
    key="id",
    values={"meta": nodes.c.extra},
    description="copy nodes.extra to nodes.meta",
)

nodes_name_to_display_name = DataMigration(
    "nodes_name_to_display_name",
    table=nodes,
    key="id",
    values={"display_name": nodes.c.name},
    # Release 2 writes display_name and name = display_name[:64]: such a row is not
    # pending (copying name back would truncate display_name); one whose name release 1
    # changed since is.
    pending=differs(nodes.c.name, sa.func.substr(nodes.c.display_name, 1, 64)),
    description="copy nodes.name to nodes.display_name",
)


_node_exists = sa.exists().where(nodes.c.id == ports.c.node_id)


@data_migration(
    "port_node_orphans",
    table=ports,
    key="id",
    pending=sa.and_(ports.c.node_id.is_not(None), ~_node_exists),
)
def port_node_orphans(connection, batch):
    """Detach ports whose node no longer exists, so the ports -> nodes foreign key holds.

    The foreign key was added without checking existing rows (NOT VALID on
    PostgreSQL, foreign_key_checks=0 on MariaDB); this makes it honest before
    the release-3 contract validates it.
    """
    orphans = connection.execute(sa.select(ports.c.id).where(batch.where)).scalars().all()
    if orphans:
        connection.execute(sa.update(ports).where(ports.c.id.in_(orphans)).values(node_id=None))
    return len(orphans)
