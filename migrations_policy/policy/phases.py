"""Which phase an operation belongs to, and the dialect-independent safe alternative.

The phase is about compatibility with the *code* that runs during a rolling
upgrade (old and new code side by side after expand; only new code after
contract).  What an operation does to the *database* (locks, rewrites) is in
the per-dialect modules.
"""

from __future__ import annotations

from pathlib import PurePath

from migrations_policy.policy import model as m

_PHASE = {
    m.CREATE_TABLE: m.EXPAND, m.ADD_COLUMN: m.EXPAND, m.CREATE_INDEX: m.EXPAND, m.ENUM_ADD_VALUE: m.EXPAND,
    # both releases' values fit the wider column; what it costs is per dialect (rewrite or not)
    m.WIDEN_VARCHAR: m.EXPAND,
    m.SET_NOT_NULL: m.CONTRACT,
    # the previous release's inserts may leave the column to its default (NOT NULL: they fail without it)
    m.DROP_DEFAULT: m.CONTRACT,
    m.INSERT: m.DATA, m.UPDATE: m.DATA, m.DELETE: m.DATA, m.TRUNCATE: m.DATA,
    **{kind: m.CONTRACT for kind in m.DROPS},
    **{kind: m.MULTI_STEP for kind in m.RENAMES | m.TYPE_CHANGES},
}

_ALTERNATIVE = {
    m.DROP_TABLE: "drop it in a contract script, once no running code uses it",
    m.DROP_COLUMN: "stop using the column in code, then drop it in a contract script",
    m.DROP_INDEX: "drop it in a contract script",
    m.DROP_CONSTRAINT: "drop it in a contract script",
    m.DROP_OTHER: "drop it in a contract script",
    m.RENAME_TABLE: "create the new table in expand, copy rows in an online data migration, drop the old one in contract",
    m.RENAME_COLUMN: "add the new column in expand, copy values in an online data migration, drop the old one in contract",
    m.WIDEN_VARCHAR: "add a new column of the new length in expand, copy values online, drop the old column in "
                     "contract (or widen where the dialect does it in place)",
    m.ALTER_TYPE: "add a new column of the new type in expand, migrate values online, drop the old column in contract",
    m.CONVERT_CHARSET: "add new columns with the new character set, migrate values online, drop the old ones in contract",
    m.SET_NOT_NULL: "backfill online, then set NOT NULL in contract (PostgreSQL: after a validated CHECK (col IS NOT NULL))",
    m.DROP_DEFAULT: "drop it in a contract script: the previous release's inserts may rely on it",
    m.ADD_COLUMN: "add it nullable or with a constant server_default; backfill in an online data migration",
    m.UPDATE: "move the data change into an online data migration (batched, resumable)",
    m.DELETE: "move the data change into an online data migration (batched, resumable)",
    m.TRUNCATE: "empty the table in an online data migration, or drop it in contract",
    m.CREATE_TABLE: "create it in an expand script",
    m.CREATE_INDEX: "create it in an expand script",
}


def phase_of(op: m.Operation) -> str:
    """The phase *op* belongs to (model.EXPAND, CONTRACT, DATA, ANY or MULTI_STEP)."""
    if op.new_table and op.kind not in (m.CREATE_TABLE, m.DROP_TABLE):
        return m.EXPAND  # nobody uses a table created in the same script yet
    if op.kind in m.CONSTRAINTS:
        return m.EXPAND if (op.not_valid or op.using_index) else m.CONTRACT
    return _PHASE.get(op.kind, m.ANY)


def alternative(op: m.Operation) -> str:
    """A dialect-independent safe way to reach the same end."""
    return _ALTERNATIVE.get(op.kind, "")


# -- the phase of a whole revision ----------------------------------------------------
# Three things say which phase a revision belongs to: alembic's branch (its own or
# inherited branch label: what ``alembic upgrade expand@head`` applies), the directory
# its file sits in (``versions/expand`` / ``versions/contract``: what a reviewer sees),
# and its content (declaring required data migrations is what a contract revision
# does).  The linter reports a disagreement and the gate refuses to apply the revision:
# both ask this one function.

def directory_phase(path: str | None) -> str | None:
    """``expand`` or ``contract`` when the file at *path* sits directly in a directory so named."""
    if not path:
        return None
    parent = PurePath(path).parent.name
    return parent if parent in (m.EXPAND, m.CONTRACT) else None


def revision_phase_disagreement(branch: str | None, path: str | None, requires_data: bool) -> str | None:
    """Why a revision's phase is ambiguous, in a few words, or None when branch, directory and content agree.

    *branch* is the phase of alembic's branch the revision sits on (None: unlabelled),
    *path* its file, *requires_data* whether it declares required data migrations.
    """
    directory = directory_phase(path)
    if directory is not None and directory != branch:
        on = f"alembic's {branch} branch" if branch else "no expand/contract branch"
        return f"its file is in {directory}/ but it sits on {on} (check its down_revision and branch_labels)"
    if requires_data and branch != m.CONTRACT:
        on = f"alembic's {branch} branch" if branch else "no expand/contract branch"
        return (f"it declares required data migrations but sits on {on}; "
                "only a contract revision may depend on data migrations")
    return None
