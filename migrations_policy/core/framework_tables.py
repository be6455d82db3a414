"""The framework's own tables, all named ``migrations_policy_*`` (hidden from autogenerate).

* ``migrations_policy_data_migrations``: the data-migration ledger (its columns: ``data/ledger.py``);
* ``migrations_policy_revisions``: the phase of each applied revision (``compat.py`` reads it);
* ``migrations_policy_gate_overrides``: every ``--force`` past the contract gate, one row per
  forced migration (or per forced run when only an expand revision was missing), never overwritten;
* ``migrations_policy_revision_history``: every revision applied, reverted or stamped, in order
  (``dbsync rollback`` finds the expand revisions applied since the last contract in it);
* ``migrations_policy_statements``: the statement journal of a revision being applied
  (``journal.py``): which of its statements are done, so an interrupted one resumes;
* ``migrations_policy_releases``: one row per upgrade run: who, when, from which heads to
  which, the expand and contract revisions it applied, whether it installed the schema
  (``gate/releases.py``; ``dbsync rollback`` reverts the last release whose contract has not run);
* ``migrations_policy_data_claims``: the key ranges data-migration runners are migrating
  right now (``data/walk/claim_table.py``), so several runners work on one migration at once;
* ``migrations_policy_data_dirty`` and ``migrations_policy_data_proofs``: the marks that
  triggers leave on every write to a table a pending predicate reads, and the completions
  proven since (``data/remaining/completion.py``), so a completion is proven once, not on every call.

The revision tables and the journal are created on demand by the env.py hook
(``runtime.py``), the claims by the first data-migration run that can use them (the
marks and proofs by the first ``status``, ``check`` or run that can install them), so a
project adopting migrations_policy needs no revision for them.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

TABLE_PREFIX = "migrations_policy_"


def is_framework_table(name: str | None) -> bool:
    return bool(name) and name.startswith(TABLE_PREFIX)


_NAMED = re.compile(rf"\b{TABLE_PREFIX}[A-Za-z_]+")


def refusal(exc: BaseException) -> str | None:
    """What to say of a statement on a framework table that the database refused (*exc*, SQLAlchemy's
    ``DBAPIError``): the table is not of the shape this version writes (made by hand, by another tool or version,
    restored in part).  None when the statement names no framework table."""
    statement = str(getattr(exc, "statement", "") or "")
    from migrations_policy.core.config import _first_line

    said = _first_line(getattr(exc, "orig", None) or exc)
    named = list(dict.fromkeys(_NAMED.findall(said) + _NAMED.findall(statement)))
    if not named:
        return None
    return (f"{named[0]}: the database refused a statement on it ({said}): the table is not of the shape this "
            f"version of migrations_policy reads and writes (created by hand, by another version, or restored in "
            f"part?): restore it, or rename it away if it is not dbsync's (dbsync then creates its own)")


metadata = sa.MetaData()

REVISIONS_TABLE = f"{TABLE_PREFIX}revisions"
revisions_table = sa.Table(
    REVISIONS_TABLE, metadata,
    sa.Column("revision", sa.String(255), primary_key=True),
    sa.Column("phase", sa.String(16), nullable=True),
)

GATE_OVERRIDES_TABLE = f"{TABLE_PREFIX}gate_overrides"
gate_overrides_table = sa.Table(
    GATE_OVERRIDES_TABLE, metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("forced_at", sa.DateTime, nullable=False),
    sa.Column("forced_by", sa.String(255), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("command", sa.String(16), nullable=False),  # "upgrade" or "stamp"
    sa.Column("revisions", sa.Text, nullable=False),  # the gated revisions the run applied, comma-separated
    sa.Column("migration", sa.String(128), nullable=True),  # None: no migration pending, an expand was missing
    sa.Column("remaining", sa.BigInteger, nullable=True),
)

REVISION_HISTORY_TABLE = f"{TABLE_PREFIX}revision_history"
revision_history_table = sa.Table(
    REVISION_HISTORY_TABLE, metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("revision", sa.String(255), nullable=False),
    sa.Column("phase", sa.String(16), nullable=True),
    sa.Column("action", sa.String(16), nullable=False),  # "upgrade", "downgrade" or "stamp"
    sa.Column("at", sa.DateTime, nullable=False),
    sa.Column("run", sa.String(32), nullable=False),  # one alembic run (one env.py invocation)
    sa.Column("from_base", sa.Boolean, nullable=False),  # that run started on an empty version table
)

JOURNAL_TABLE = f"{TABLE_PREFIX}statements"
journal_table = sa.Table(
    JOURNAL_TABLE, metadata,
    sa.Column("revision", sa.String(255), primary_key=True),
    sa.Column("ordinal", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("sql_hash", sa.String(64), nullable=False),  # SHA-256 of the statement's SQL text
    sa.Column("description", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # "running" or "done"
)

CLAIMS_TABLE = f"{TABLE_PREFIX}data_claims"
claims_table = sa.Table(
    CLAIMS_TABLE, metadata,
    sa.Column("migration", sa.String(128), primary_key=True),
    # the claimed keys: low_key < key <= high_key (no lower bound when low_key is NULL)
    sa.Column("high_key", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("low_key", sa.BigInteger, nullable=True),
    sa.Column("holder", sa.BigInteger, nullable=False),  # the runner session's token (data/walk/claim_table.py)
    sa.Column("claimed_at", sa.DateTime, nullable=False),
)

RELEASES_TABLE = f"{TABLE_PREFIX}releases"
#: One row per upgrade run the env.py hook lets through (``gate/releases.py``): the release boundaries
#: ``dbsync rollback`` reverts to are this state, never inferred.
releases_table = sa.Table(
    RELEASES_TABLE, metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run", sa.String(32), nullable=False),  # the env.py invocation (revision_history.run)
    sa.Column("started_by", sa.String(255), nullable=False),  # user@host
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("from_heads", sa.Text, nullable=False),  # comma-separated; "" = base
    sa.Column("to_heads", sa.Text, nullable=False),  # as each revision of the run is applied
    sa.Column("expand_applied", sa.Text, nullable=False),  # the expand revisions this run applied
    sa.Column("contract_applied", sa.Text, nullable=False),  # the contract revisions this run applied
    sa.Column("install", sa.Boolean, nullable=False),  # started on a schema with no application table
    sa.Column("planned", sa.Text, nullable=False),  # the revisions the run set out to apply (done: all applied)
)
