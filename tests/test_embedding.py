"""The embedding snippets of docs/quickstart.rst, run as written: a project's ``myproject-dbsync``
(``dbsync_main(prog=...)``) and ``myproject-manage`` (the commands mounted in its own argparse tree).
Hints name the embedding program, argument errors are one line, ``--format`` goes on either side."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from .helpers import REPO, copy_example

QUICKSTART = REPO / "docs" / "quickstart.rst"


def snippets() -> dict[str, str]:
    """The two literal blocks of the "Embedding dbsync" section, by the program they create."""
    section = QUICKSTART.read_text(encoding="utf-8").split("Embedding dbsync in your project's CLI")[1]
    blocks = re.findall(r"::\n\n((?:(?:    .*)?\n)+)", section)
    found = {}
    for block in blocks:
        code = textwrap.dedent(block)
        program = re.search(r'prog="([^"]+)"', code).group(1)
        found[program] = code
    assert set(found) == {"myproject-dbsync", "myproject-manage"}, found
    return found


@pytest.fixture
def programs(tmp_path):
    """Each snippet as a runnable program: the dbsync_main one gets its ``main()`` called."""
    runners = {}
    for program, code in snippets().items():
        path = tmp_path / f"{program.replace('-', '_')}.py"
        if "def main" in code:
            code += "\n\nif __name__ == '__main__':\n    import sys\n    sys.exit(main())\n"
        path.write_text(code, encoding="utf-8")
        runners[program] = path
    return runners


def run(path, *argv):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("program", ["myproject-dbsync", "myproject-manage"])
def test_embedded_program_names_itself(programs, program, tmp_path):
    ini = str(copy_example(tmp_path))
    path = programs[program]
    done = run(path, "check", "-c", ini)  # a new database: expand pending
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == f"expand pending: run {program} upgrade --expand", done.stdout
    for argv in (["status", "-c", ini, "--format", "json"], ["status", "--format", "json", "-c", ini]):
        done = run(path, *argv)
        assert done.returncode == 0 and "expand" in json.loads(done.stdout), (argv, done.stderr)
    done = run(path, "upgrade", "--expand", "--contract", "-c", ini)  # the subcommand parser refuses
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(program), done.stderr


def test_dbsync_takes_the_global_options_on_either_side(tmp_path):
    ini = str(copy_example(tmp_path))
    from migrations_policy import cli

    parser = cli.build_dbsync_parser()
    before = parser.parse_args(["--format", "json", "-c", ini, "status"])
    after = parser.parse_args(["status", "--format", "json", "-c", ini])
    neither = parser.parse_args(["status"])
    assert (before.format, before.config) == (after.format, after.config) == ("json", ini)
    assert (neither.format, neither.config, neither.url) == ("text", "alembic.ini", None)
    assert parser.parse_args(["--format", "json", "status", "--format", "text"]).format == "text"
