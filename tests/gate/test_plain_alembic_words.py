"""Plain ``alembic`` on the expand/contract layout, as an alembic user types it (issue 25):
``alembic upgrade head`` (singular) fails with alembic's generic "Multiple head revisions"
message: it now says what to type instead (``heads``, ``expand@head``, or ``dbsync upgrade``);
a live ``alembic upgrade heads`` prints no "Generating static SQL" (the gate's offline reads
of the scripts are not the operator's business)."""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import pytest

from ..helpers import console_script, copy_example, forget_example_modules

ALEMBIC = console_script("alembic")


def _alembic(ini: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ini.parent)}
    return subprocess.run([ALEMBIC, "-c", str(ini), *args], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ini.parent)


def _with_url_and_info_logs(ini: Path, url: str) -> None:
    """The database to use, and alembic's loggers at INFO as in alembic's own ini templates."""
    lines, section = [], ""
    for line in ini.read_text().splitlines():
        if line.startswith("["):
            section = line
        if line.startswith("sqlalchemy.url"):
            line = "sqlalchemy.url = " + url.replace("%", "%%")
        if section == "[logger_alembic]" and line.startswith("level"):
            line = "level = INFO"
        lines.append(line)
    ini.write_text("\n".join(lines) + "\n")
    env_py = ini.parent / "migrations" / "env.py"  # the example's env.py does not read the ini's loggers
    env_py.write_text("import logging\nlogging.basicConfig(level=logging.INFO)\n" + env_py.read_text())


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(2)])
def test_upgrade_head_says_what_to_type_and_heads_prints_no_static_sql(tmp_path, db_url, seed):
    print(f"seed={seed}")
    rng = random.Random(seed)
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = db_url.render_as_string(hide_password=False)
    _with_url_and_info_logs(ini, url)
    if rng.random() < 0.5:  # at any point of the rolling upgrade
        done = _alembic(ini, url, "upgrade", "expand@head")
        assert done.returncode == 0, done.stderr
    head = _alembic(ini, url, "upgrade", "head")
    said = head.stdout + head.stderr  # alembic prints its FAILED line on stdout
    assert head.returncode != 0
    assert "Multiple head revisions" in said, said
    assert "alembic upgrade heads" in said and re.search(r"dbsync (-c \S+ )?upgrade", said), said
    assert "Traceback" not in said, said
    heads = _alembic(ini, url, "upgrade", "heads")
    assert "Generating static SQL" not in heads.stdout + heads.stderr, heads.stderr
    assert "Running upgrade" in heads.stderr  # alembic's own lines are still there
