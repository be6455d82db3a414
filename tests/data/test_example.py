"""The inventory example through a rolling upgrade, on every backend: release-1 data, the release-2
expand, online data migrations (with release-1 code still writing), object versions, the contract."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command
from sqlalchemy.orm import Session

from migrations_policy import commands
from migrations_policy.data import ObjectVersionError, check_object_versions, load_release_mapping



def seed_release1(engine, nodes: int = 120, ports: int = 60) -> None:
    from inventory.models import release1

    with Session(engine) as session:
        session.add_all(release1.Node(uuid=f"u{i}", name=f"node-{i}", extra=f'{{"i": {i}}}') for i in range(nodes))
        session.flush()
        # every fifth port points at a node that does not exist
        session.add_all(release1.Port(node_id=(i % nodes) + 1 if i % 5 else 10_000 + i, address=f"p{i}")
                        for i in range(ports))
        session.commit()


def versions(example_project, engine):
    mapping = load_release_mapping(example_project.settings.release_mapping)
    with engine.connect() as conn:
        return check_object_versions(conn, mapping)


def by_name(result):
    return {m.name: m for m in result.report.migrations}


def test_rolling_upgrade_of_the_inventory(example_project, db_engine, backend):
    # Before anything exists, no object table does: nothing to refuse.
    report = versions(example_project, db_engine)
    assert report.ok and {c.status for c in report.checks} == {"absent"}

    alembic_command.upgrade(example_project.alembic_config, "r1_inventory")
    seed_release1(db_engine)
    report = versions(example_project, db_engine)  # release 1 has no version column yet: tolerated
    assert report.ok and {c.status for c in report.checks} == {"no version column"}

    commands.upgrade(example_project, phases=("expand",))
    report = versions(example_project, db_engine)
    assert not report.ok
    assert report.problems() == ["Node (nodes): 120 with NULL version", "Port (ports): 60 with NULL version"]
    with pytest.raises(ObjectVersionError, match="dbsync online_data_migrations"):
        report.raise_for_problems()

    first = commands.online_data_migrations(example_project, batch_size=25, max_count=100)
    assert first.exit_code == 1
    assert by_name(first)["object_version_nodes"].state == "waiting"

    seed_more_release1_rows(db_engine)  # old code keeps writing during the upgrade
    result = commands.online_data_migrations(example_project, batch_size=25)
    found = by_name(result)
    assert result.exit_code == 0, result.text()
    assert {m.state for m in found.values()} == {"complete"}
    assert by_name(first)["port_node_orphans"].migrated + found["port_node_orphans"].migrated == 12
    assert found["object_version_nodes"].migrated == 125 and found["object_version_ports"].migrated == 60

    with db_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM nodes WHERE meta IS NULL OR display_name IS NULL")).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM nodes WHERE meta <> extra OR display_name <> name")).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM ports WHERE node_id >= 10000")).scalar() == 0
    assert versions(example_project, db_engine).ok

    with db_engine.begin() as conn:  # a row written by code from a release the mapping no longer accepts
        conn.execute(sa.text("UPDATE nodes SET version = '0.9' WHERE id = 1"))
    assert versions(example_project, db_engine).problems() == ["Node (nodes): 1 at version '0.9'"]
    with db_engine.begin() as conn:
        conn.execute(sa.text("UPDATE nodes SET version = '1.1' WHERE id = 1"))

    commands.upgrade(example_project, phases=("contract",))
    after = commands.online_data_migrations(example_project)
    states = {m.name: m.state for m in after.report.migrations}
    assert after.exit_code == 0
    assert states["nodes_extra_to_meta"] == "inapplicable"  # nodes.extra is dropped by the contract
    assert states["port_node_orphans"] == "complete" and states["object_version_nodes"] == "complete"


def seed_more_release1_rows(engine) -> None:
    """Release-1 services write rows the way release 1 does (no meta, no version) mid-upgrade."""
    nodes = sa.table("nodes", sa.column("uuid"), sa.column("name"), sa.column("extra"))
    with engine.begin() as conn:
        conn.execute(sa.insert(nodes), [{"uuid": f"late{i}", "name": f"late-{i}", "extra": "{}"} for i in range(5)])
