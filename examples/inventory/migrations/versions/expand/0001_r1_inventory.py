"""release 1: nodes and ports

Revision ID: r1_inventory
Revises: expand_root
Create Date: 2026-01-05 10:01:00
"""
from alembic import op
import sqlalchemy as sa

revision = "r1_inventory"
down_revision = "expand_root"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(64), nullable=True),
        sa.Column("extra", sa.Text(), nullable=True),
        sa.Column("provision_state", sa.String(15), server_default="enroll", nullable=False),
        sa.UniqueConstraint("uuid", name="uq_nodes_uuid"),
    )
    op.create_table(
        "ports",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("address", sa.String(18), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ports")
    op.drop_table("nodes")
