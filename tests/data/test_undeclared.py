"""A data migration the pending contract needs but no module declares: ``dbsync
online_data_migrations`` must not report success (the gate would refuse contract however
often it ran); it names what is missing and where to declare it."""

from __future__ import annotations

import random
import re
import string

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
            assert re.search(rf"{name}: not declared: .* \(required by r3_drop_extra_name\)", message), message
        assert "data_migrations setting" in message and ini in message
    finally:
        project.dispose()


def test_declared_requirements_run_as_before(example_project):
    commands.upgrade(example_project, phases=("expand",))
    assert commands.online_data_migrations(example_project).exit_code == 0


STUB = '''
import sqlalchemy as sa
from migrations_policy.data import DataMigration

nodes = sa.table("nodes", sa.column("id", sa.Integer), sa.column("extra", sa.Text), sa.column("meta", sa.Text))
{name} = DataMigration("{name}", table=nodes, key="id", pending=nodes.c.meta.is_(None),
                       values={{"meta": nodes.c.extra}})
'''


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(2)])
def test_a_module_not_listed_is_named_by_every_command(tmp_path, db_url, seed, capsys):
    """A data-migration module where ``dbsync revision`` writes them (next to the listed module,
    or in ``<script_location>/data_migrations``), declaring a migration a contract revision
    requires, but not listed in data_migrations: status, check, upgrade and
    online_data_migrations each name the module and say it is not listed, never "its table or
    columns do not exist yet" (which sent the operator to online_data_migrations)."""
    from migrations_policy import cli

    from ..helpers import copy_example, forget_example_modules

    print(f"seed={seed}")
    rng = random.Random(seed)
    ini = copy_example(tmp_path)
    forget_example_modules()
    name = "fill_" + "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(3, 10)))
    stem = "stubs_" + "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(3, 10)))
    beside = rng.random() < 0.5
    if beside:  # next to the listed module: importable as inventory.STEM
        path, module = ini.parent / "inventory" / f"{stem}.py", f"inventory.{stem}"
    else:  # where stubs go without a listed package: a path, or migrations.data_migrations.STEM
        path = ini.parent / "migrations" / "data_migrations" / f"{stem}.py"
        module = None
    path.parent.mkdir(exist_ok=True)
    path.write_text(STUB.format(name=name))
    r3 = next((ini.parent / "migrations" / "versions" / "contract").glob("0003_*.py"))
    r3.write_text(r3.read_text().replace('requires_data_migrations = ("', f'requires_data_migrations = ("{name}", "'))
    base = ["-c", str(ini), "--url", db_url.render_as_string(hide_password=False)]
    assert cli.dbsync_main([*base, "upgrade", "--expand"]) == 0
    capsys.readouterr()

    def said(*argv: str) -> tuple[int, str]:
        code = cli.dbsync_main([*base, *argv])
        out = capsys.readouterr()
        return code, out.out + out.err

    for argv, code_wanted in ((["status"], 0), (["check"], 4), (["upgrade", "--contract"], 4),
                              (["online_data_migrations"], 2), (["online-data-migrations"], 2)):
        code, text = said(*argv)
        assert code == code_wanted, (argv, text)
        assert "do not exist yet" not in text, (argv, text)
        assert f"{name}: not declared: module " in text and "is not listed in the data_migrations setting" in text, \
            (argv, text)
        if module:
            assert f"module {module} declares it" in text, (argv, text)
        else:
            assert str(path) in text or f"data_migrations.{stem}" in text, (argv, text)
