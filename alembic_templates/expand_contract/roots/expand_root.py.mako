"""expand branch root

The first revision of the expand branch (label "expand").  migrations_policy
creates its own tables here: the data-migration ledger (hidden from autogenerate).

Revision ID: ${revision}
Revises:${" " + down_revision if down_revision else ""}
Create Date: ${create_date}
"""
from alembic import op

from migrations_policy.data.ledger import create_ledger, drop_ledger

revision = ${repr(revision)}
down_revision = ${repr(down_revision)}
branch_labels = ("expand",)
depends_on = None


def upgrade() -> None:
    create_ledger(op)


def downgrade() -> None:
    drop_ledger(op)
