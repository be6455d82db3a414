"""contract branch root

Revision ID: contract_root
Revises:
Create Date: 2026-01-05 10:00:00
"""

revision = "contract_root"
down_revision = None
branch_labels = ("contract",)
depends_on = "expand_root"


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
