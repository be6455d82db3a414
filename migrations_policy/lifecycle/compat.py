"""Schema/code compatibility, checked by a service when it starts.

The microversion idea applied to the schema: code knows the revisions it
ships.  A service calls, on boot::

    from migrations_policy import assert_schema_compatible

    assert_schema_compatible(engine, "/etc/myservice/alembic.ini")

and fails fast, with one clear message, when

* the database **lacks expand revisions this code needs** (the new release was
  started before ``dbsync upgrade --expand``), or
* the database **has contract revisions this code does not know** (the code is
  older than the schema: a newer release's contract already removed what this
  code may use).

Expand revisions this code does not know are fine: that is the rolling upgrade
(old code on an expanded schema).  The phase of an unknown revision comes from
``migrations_policy_revisions``, which the env.py hook keeps; an unknown
revision with no recorded phase is treated as contract (refused), because
guessing wrong would let old code run against a contracted schema.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from migrations_policy.core.errors import PolicyError
from migrations_policy.core.revisions import CONTRACT, EXPAND, applied_revisions, current_heads, phase_of
from migrations_policy.core.framework_tables import REVISIONS_TABLE, revisions_table


class SchemaIncompatible(PolicyError):
    """The database schema and this code cannot run together."""

    exit_code = 2


def _script(alembic_ini: str | os.PathLike[str] | None, script_location: str | None) -> ScriptDirectory:
    if script_location is not None:
        return ScriptDirectory(script_location)
    if alembic_ini is None:
        raise ValueError("give alembic_ini or script_location")
    return ScriptDirectory.from_config(AlembicConfig(str(alembic_ini)))


def _recorded_phases(connection: Connection) -> dict[str, str | None]:
    if not sa.inspect(connection).has_table(REVISIONS_TABLE):
        return {}
    return dict(connection.execute(sa.select(revisions_table.c.revision, revisions_table.c.phase)).all())


def schema_problems(connection: Connection, script: ScriptDirectory) -> list[str]:
    """What makes the database and *script*'s code incompatible (empty: compatible)."""
    heads = current_heads(connection)
    recorded = _recorded_phases(connection)
    known = {rev.revision for rev in script.walk_revisions()}
    problems = []
    unknown_contract = sorted(
        {h for h in heads if h not in known and recorded.get(h) != EXPAND}
        | {r for r, phase in recorded.items() if r not in known and phase == CONTRACT}
    )
    if unknown_contract:
        problems.append(
            f"the database has revision(s) {', '.join(unknown_contract)} this code does not know, not recorded "
            "as expand: the code is older than the schema (a newer release's contract ran); deploy the newer code")
    applied = applied_revisions(script, [h for h in heads if h in known]) | (set(recorded) & known)
    missing = [rev.revision for rev in reversed(list(script.walk_revisions()))
               if phase_of(rev) in (EXPAND, None) and rev.revision not in applied]
    if missing:
        problems.append(
            f"the database lacks expand revision(s) {', '.join(missing)} this code needs: "
            "run `dbsync upgrade --expand` before starting this release")
    return problems


def assert_schema_compatible(bind: Engine | Connection, alembic_ini: str | os.PathLike[str] | None = None, *,
                             script_location: str | None = None) -> None:
    """Raise ``SchemaIncompatible`` unless this code (its alembic scripts) can run on *bind*'s schema."""
    script = _script(alembic_ini, script_location)
    if isinstance(bind, Engine):
        with bind.connect() as connection:
            problems = schema_problems(connection, script)
    else:
        problems = schema_problems(bind, script)
    if problems:
        raise SchemaIncompatible("schema incompatible with this code: " + "; ".join(problems))
