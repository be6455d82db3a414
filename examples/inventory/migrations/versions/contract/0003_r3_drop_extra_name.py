"""release 3: drop nodes.extra and nodes.name, validate the ports -> nodes FK

Needs the release-2 data migrations to be complete: every node's ``meta`` and
``display_name`` copied, and no port pointing at a missing node.

Revision ID: r3_drop_extra_name
Revises: contract_root
Create Date: 2026-06-01 09:00:00
"""
from alembic import op
import sqlalchemy as sa

import migrations_policy.window.sync_triggers  # noqa: F401  (registers op.drop_sync_trigger)

revision = "r3_drop_extra_name"
down_revision = "contract_root"
branch_labels = None
depends_on = "r2_meta_display_name_version"

# The contract gate refuses this revision until these are complete (live count 0).
requires_data_migrations = ("nodes_extra_to_meta", "nodes_name_to_display_name", "port_node_orphans")


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(sa.text("ALTER TABLE ports VALIDATE CONSTRAINT fk_ports_node_id_nodes"))
    op.drop_sync_trigger("nodes", old="extra", new="meta")  # before the columns they use go
    op.drop_sync_trigger("nodes", old="name", new="display_name")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("extra")
        batch.drop_column("name")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("name", sa.String(64), nullable=True))
        batch.add_column(sa.Column("extra", sa.Text(), nullable=True))
    op.create_sync_trigger("nodes", old="extra", new="meta", new_has_default=False)
    op.create_sync_trigger("nodes", old="name", new="display_name",
                           down=sa.func.substr(sa.column("display_name", sa.String), 1, 64), new_has_default=False)
