"""Which frames are the project's (``migrations_policy.core.project_code``): a failure raised in a project's
file is named by its file and line, wherever the project lives — a checkout, or installed into
site-packages with its migrations (as OpenStack services are) — and a failure raised by the libraries
alone is not the project's."""

from __future__ import annotations

import json
import os
import random
import sysconfig
import textwrap

import sqlalchemy

import migrations_policy
from migrations_policy.core import project_code


def test_installed_projects_are_the_projects_and_libraries_are_not():
    rng = random.Random()
    name = f"proj{rng.randrange(10**6)}"
    installed = os.path.join(sysconfig.get_paths()["purelib"], name, "db", "migrations", "versions", "0001_x.py")
    assert not project_code._is_library(installed)
    for library_file in (json.__file__, sqlalchemy.__file__, migrations_policy.__file__, os.__file__):
        assert project_code._is_library(library_file), library_file


def test_the_innermost_project_frame_is_named(tmp_path):
    """The project's function calls into the standard library, which calls back into the project,
    which raises: the innermost project frame (the callback's line) is named."""
    rng = random.Random()
    padding = rng.randrange(0, 20)
    script = tmp_path / "0002_hostile.py"
    script.write_text("\n" * padding + textwrap.dedent("""\
        import json
        def hook(pairs):
            raise RuntimeError("boom")
        def upgrade():
            json.loads('{"a": 1}', object_pairs_hook=hook)
        """))
    namespace: dict = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    try:
        namespace["upgrade"]()
    except RuntimeError as exc:
        assert project_code.culprit(exc).endswith(f"0002_hostile.py:{padding + 3}")
        assert project_code.describe(exc).endswith(f"0002_hostile.py:{padding + 3}: RuntimeError: boom")
        assert project_code.stopped_by_project(exc)
    try:
        json.loads("{not json")
    except ValueError as exc:  # the standard library alone: not the project's (a bug keeps its traceback)
        below = exc.with_traceback(exc.__traceback__.tb_next)  # what a catcher in the library sees
        assert project_code.culprit(below) is None and not project_code.stopped_by_project(below)
    assert project_code.what(SystemExit(0)) == "called sys.exit(0)"
