<%
    # migrations_policy passes module-level declarations (e.g. the data
    # migrations a contract script requires) along with the imports.
    lines = (imports or "").splitlines()
    import_lines = [l for l in lines if l.startswith(("import ", "from "))]
    declarations = [l for l in lines if not l.startswith(("import ", "from "))]
%>"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""
from alembic import op
import sqlalchemy as sa
${"\n".join(import_lines)}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}
% if declarations:

% for line in declarations:
${line}
% endfor
% endif


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
