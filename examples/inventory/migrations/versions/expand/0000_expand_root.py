"""expand branch root

Revision ID: expand_root
Revises:
Create Date: 2026-01-05 10:00:00
"""

revision = "expand_root"
down_revision = None
branch_labels = ("expand",)
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
