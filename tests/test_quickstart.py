"""docs/quickstart.rst, executed as written: every ``:caption: PATH`` code block is written to PATH
(later blocks replace earlier ones, as the reader edits the file), every ``$ command`` of a console
block runs in a shell, in order, in an empty directory, on SQLite; each must exit 0."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap

import sqlalchemy as sa

from .helpers import REPO

QUICKSTART = REPO / "docs" / "quickstart.rst"
_DIRECTIVE = re.compile(r"^\.\. code-block:: (?P<language>\S+)\n(?P<options>(?:   :\w+:.*\n)*)\n(?P<body>(?:(?:   .*)?\n)+)",
                        re.MULTILINE)


def quickstart_steps(text: str) -> list[tuple[str, str]]:
    """("file", path + body) and ("run", command) steps, in document order."""
    steps = []
    for match in _DIRECTIVE.finditer(text):
        body = textwrap.dedent(match.group("body")).strip("\n") + "\n"
        caption = re.search(r":caption: (\S+)", match.group("options"))
        if match.group("language") == "console":
            steps += [("run", line[2:]) for line in body.splitlines() if line.startswith("$ ")]
        elif caption:
            steps.append(("file", caption.group(1) + "\n" + body))
    return steps


def test_the_quickstart_runs_as_written(tmp_path):
    steps = quickstart_steps(QUICKSTART.read_text(encoding="utf-8"))
    commands = [step for kind, step in steps if kind == "run"]
    assert "migrations-policy init migrations" in commands[0] and len(commands) >= 8, commands
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for kind, step in steps:
        if kind == "file":
            path, _, body = step.partition("\n")
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(body, encoding="utf-8")
            continue
        done = subprocess.run(step, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (step, done.stderr)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("nodes")}
        tables = set(sa.inspect(conn).get_table_names())
    engine.dispose()
    assert {"nodes", "ports"} <= tables and columns == {"id", "name"}  # ports created, legacy dropped


def test_steps_are_found_in_document_order():
    text = ".. code-block:: python\n   :caption: a/b.py\n\n   x = 1\n\n.. code-block:: console\n\n   $ echo hi\n   out\n"
    assert quickstart_steps(text) == [("file", "a/b.py\nx = 1\n"), ("run", "echo hi")]
