"""A data migration the pending contract needs but no module declares: ``dbsync
online_data_migrations`` must not report success (the gate would refuse contract however
often it ran); it names what is missing and where to declare it."""

from __future__ import annotations

import re

import pytest

from migrations_policy import commands
from migrations_policy.core.errors import ConfigError


def test_undeclared_requirement_fails_naming_it(example_project):
    ini = example_project.alembic_config.config_file_name
    with open(ini, encoding="utf-8") as fh:
        text = fh.read()
    with open(ini, "w", encoding="utf-8") as fh:
        fh.write(text.replace("data_migrations = inventory.data_migrations\n", ""))
    from migrations_policy.core.project import Project

    project = Project(ini, url=example_project.url.render_as_string(hide_password=False))
    try:
        commands.upgrade(project, phases=("expand",))
        with pytest.raises(ConfigError) as info:
            commands.online_data_migrations(project)
        message = info.value.message
        assert "\n" not in message and info.value.exit_code != 0
        for name in ("nodes_extra_to_meta", "nodes_name_to_display_name", "port_node_orphans"):
            assert re.search(rf"{name} \(required by r3_drop_extra_name\)", message), message
        assert "data_migrations setting" in message and ini in message
    finally:
        project.dispose()


def test_declared_requirements_run_as_before(example_project):
    commands.upgrade(example_project, phases=("expand",))
    assert commands.online_data_migrations(example_project).exit_code == 0
