"""contract branch root

The first revision of the contract branch (label "contract"); it depends on
the expand root, so contract never runs before expand.

Revision ID: ${revision}
Revises:${" " + down_revision if down_revision else ""}
Create Date: ${create_date}
"""

revision = ${repr(revision)}
down_revision = ${repr(down_revision)}
branch_labels = ("contract",)
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
