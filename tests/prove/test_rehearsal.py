"""The rolling-upgrade rehearsal on the inventory example, on every backend: release-N code keeps
working through expand and data migrations; and the rehearsal does catch what breaks it."""

from __future__ import annotations

import textwrap

import pytest

from migrations_policy.core.project import Project
from migrations_policy.rehearsal import RehearsalOptions, rehearse

from ..helpers import copy_example, forget_example_modules

OPTIONS = dict(seconds=1.5, threads=3, seed_rows=30, seed=7)
R1, R2 = "r1_inventory", "r2_meta_display_name_version"


@pytest.fixture
def example(tmp_path, db_url):
    ini = copy_example(tmp_path)
    forget_example_modules()
    yield ini, db_url.render_as_string(hide_password=False)
    forget_example_modules()


def run(example, old: str, new: str, from_revision, **kw):
    ini, url = example
    return rehearse(Project(ini, url=url), f"inventory.models.{old}", f"inventory.models.{new}", from_revision,
                    options=RehearsalOptions(**OPTIONS), **kw)


def test_release1_to_release2_old_code_sees_no_error(example):
    result = run(example, "release1", "release2", R1, contract=False)
    assert result.errors("old") == [], result.text()
    assert result.exit_code == 0, result.text()
    expand, rolling = result.phases[1], result.phases[2]
    assert (expand.name, rolling.name) == ("expand", "rolling")
    assert any(step.startswith("upgrade expand: expand: r1_inventory -> " + R2) for step in expand.steps)
    assert any("row(s) migrated" in step for step in expand.steps)
    # The workload really ran, before and after the DDL: every kind of operation, both codes.
    assert min(expand.operations("old")[op] for op in ("insert", "update", "list")) > 10, expand.operations()
    assert min(rolling.operations("new")[op] for op in ("insert", "update", "list")) > 10, rolling.operations()


def test_release2_to_release3_through_contract(example):
    result = run(example, "release2", "release3", R2)
    assert result.exit_code == 0, result.text()
    contract = result.phases[-1]
    assert contract.name == "contract" and any(" -> r3_drop_extra_name" in step
                                               for step in contract.steps), result.text()
    assert sum(contract.operations("new").values()) > 30


def test_contract_while_release2_code_runs_is_caught(example):
    """Release 2 still maps nodes.name and nodes.extra: the release-3 contract breaks it."""
    result = run(example, "release1", "release2", R1)
    assert result.errors("old") == [], result.text()
    new_errors = result.errors("new", phase="contract")
    assert new_errors and all(e["table"] == "nodes" for e in new_errors), result.text()
    assert any("name" in e["error"] or "extra" in e["error"] for e in new_errors)
    assert {"after contract: new: nodes.name: column does not exist",
            "after contract: new: nodes.extra: column does not exist"} <= set(result.incompatible)
    assert result.exit_code == 1


BREAKING_EXPAND = '''
"""an 'expand' that is not one: drops a column release 1 writes, makes another NOT NULL

Revision ID: r2b_breaks_release1
Revises: r2_meta_display_name_version
"""
from alembic import op
import sqlalchemy as sa

revision = "r2b_breaks_release1"
down_revision = "r2_meta_display_name_version"
branch_labels = None
depends_on = None
# let the gate's unmoved-data check pass: what breaks release 1 is the rehearsal's to catch
drops_data = {"nodes.provision_state": "the test: the rehearsal must catch release 1 breaking"}


def upgrade():
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("provision_state")
    with op.batch_alter_table("nodes") as batch:
        batch.alter_column("name", nullable=False, existing_type=sa.String(64))
'''


def test_an_expand_that_breaks_release1_is_caught(example):
    ini, _ = example
    (ini.parent / "migrations" / "versions" / "expand" / "0002b_breaks.py").write_text(textwrap.dedent(BREAKING_EXPAND))
    result = run(example, "release1", "release2", R1, contract=False)
    old_errors = result.errors("old", phase="expand")
    assert any(e["table"] == "nodes" and "provision_state" in e["error"] for e in old_errors), result.text()
    incompatible = "\n".join(result.incompatible)
    assert "old: nodes.provision_state: column does not exist" in incompatible
    assert "old: nodes.name: NOT NULL in the database, this code may write NULL" in incompatible
    assert result.exit_code == 1
