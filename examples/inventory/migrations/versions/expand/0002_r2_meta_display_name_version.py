"""release 2: nodes.meta, nodes.display_name, version columns, ports -> nodes FK

Every change is additive and online: nullable columns with no default, indexes
(ports.node_id, and the version columns the object-version checks read) built
CONCURRENTLY on PostgreSQL (online INPLACE on MariaDB), and the foreign
key added without validating existing rows (NOT VALID on PostgreSQL;
foreign_key_checks=0 on MariaDB, where a checked ADD FOREIGN KEY copies the
table).  Existing rows are checked by the ``port_node_orphans`` data migration
and the constraint validated in the release-3 contract.  SQLite cannot add a
constraint to an existing table without rebuilding it, so it gets none.

Sync triggers keep ``extra``/``meta`` and ``name``/``display_name`` in step until
the release-3 contract: what release 1 writes to the old columns reaches the new
ones at once, and what release 3 (which maps only the new ones) writes reaches
the old ones, so the data migrations only copy rows written before this script.

Revision ID: r2_meta_display_name_version
Revises: r1_inventory
Create Date: 2026-03-02 09:00:00
"""
from alembic import op
import sqlalchemy as sa

import migrations_policy.window.sync_triggers  # noqa: F401  (registers op.create_sync_trigger)

revision = "r2_meta_display_name_version"
down_revision = "r1_inventory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("meta", sa.Text(), nullable=True))
    op.add_column("nodes", sa.Column("display_name", sa.String(255), nullable=True))
    op.add_column("nodes", sa.Column("version", sa.String(15), nullable=True))
    op.add_column("ports", sa.Column("version", sa.String(15), nullable=True))
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        with op.get_context().autocommit_block():
            op.create_index("ix_ports_node_id", "ports", ["node_id"], postgresql_concurrently=True)
            op.create_index("ix_nodes_version", "nodes", ["version"], postgresql_concurrently=True)
            op.create_index("ix_ports_version", "ports", ["version"], postgresql_concurrently=True)
        op.create_foreign_key("fk_ports_node_id_nodes", "ports", "nodes", ["node_id"], ["id"],
                              postgresql_not_valid=True)
    else:
        op.create_index("ix_ports_node_id", "ports", ["node_id"])
        op.create_index("ix_nodes_version", "nodes", ["version"])
        op.create_index("ix_ports_version", "ports", ["version"])
    if dialect == "mysql":
        op.execute("SET foreign_key_checks = 0")
        # migrations-policy: ignore[MP142] existing rows are checked by the port_node_orphans data migration
        op.create_foreign_key("fk_ports_node_id_nodes", "ports", "nodes", ["node_id"], ["id"])
        op.execute("SET foreign_key_checks = 1")
    op.create_sync_trigger("nodes", old="extra", new="meta", new_has_default=False)
    # release 3 may write a display_name longer than name's 64 characters: name gets its start
    op.create_sync_trigger("nodes", old="name", new="display_name",
                           down=sa.func.substr(sa.column("display_name", sa.String), 1, 64), new_has_default=False)


def downgrade() -> None:
    op.drop_sync_trigger("nodes", old="name", new="display_name")
    op.drop_sync_trigger("nodes", old="extra", new="meta")
    dialect = op.get_context().dialect.name
    if dialect in ("postgresql", "mysql"):
        op.drop_constraint("fk_ports_node_id_nodes", "ports", type_="foreignkey")
    op.drop_index("ix_ports_version", "ports")
    op.drop_index("ix_nodes_version", "nodes")
    op.drop_index("ix_ports_node_id", "ports")
    op.drop_column("ports", "version")
    op.drop_column("nodes", "version")
    op.drop_column("nodes", "display_name")
    op.drop_column("nodes", "meta")
