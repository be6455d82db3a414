"""expand branch root: the framework's data-migration ledger

Revision ID: expand_root
Revises:
Create Date: 2026-01-05 10:00:00
"""
from alembic import op

from migrations_policy.data.ledger import create_ledger, drop_ledger

revision = "expand_root"
down_revision = None
branch_labels = ("expand",)
depends_on = None


def upgrade() -> None:
    create_ledger(op)


def downgrade() -> None:
    drop_ledger(op)
