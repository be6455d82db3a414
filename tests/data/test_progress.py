"""Progress for logs: ``dbsync online_data_migrations`` and ``dbsync upgrade`` with stderr a pipe
(CI, a Kubernetes Job, systemd) print lines while they work: per migration the rows done of its
total, rows/s and ETA with thousands separators; per revision what runs and how long it took.
Shapes only, no timing assertions (a tiny --progress-interval makes the lines come)."""

from __future__ import annotations

import os
import random
import re
import subprocess

import pytest

from ..helpers import REPO, copy_example
from .support import create_schema, dbsync_argv

DATA_LINE = re.compile(r"^online_data_migrations: copy_items: (?P<done>[\d,]+) of (?P<total>[\d,]+) rows "
                       r"\(\d+\.\d%\), [\d,]+ rows/s, ETA (?:[\d,]+ s|\?)$")


def run(argv, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*(str(p) for p in cwd or []), str(REPO)])}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("mode", [[], ["--progress", "line"]], ids=["auto-on-a-pipe", "line"])
def test_data_migrations_print_lines_when_piped(project_dir, db_url, db_engine, mode):
    create_schema(db_engine, rows=2500)
    done = run(dbsync_argv(project_dir, db_url, *mode, "--progress-interval", "0.01", "online_data_migrations",
                           "--migration", "copy_items", "--batch-size", "100", "--sleep", "0.02"), [project_dir])
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("online_data_migrations:")]
    assert len(lines) >= 2, done.stderr
    for line in lines:
        match = DATA_LINE.match(line)
        assert match, line
        assert match["total"] == "2,500"
    counts = [int(DATA_LINE.match(line)["done"].replace(",", "")) for line in lines]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert "\r" not in done.stderr  # no terminal control characters in logs


def test_progress_none_is_silent(project_dir, db_url, db_engine):
    create_schema(db_engine, rows=500)
    done = run(dbsync_argv(project_dir, db_url, "--progress", "none", "--progress-interval", "0.01",
                           "online_data_migrations", "--migration", "copy_items", "--batch-size", "50"), [project_dir])
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_upgrade_names_each_revision_and_its_time(tmp_path):
    ini = copy_example(tmp_path)
    code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"
    import sys

    done = run([sys.executable, "-c", code, "-c", str(ini), "upgrade", "--expand", "--progress-interval", "0.01"])
    assert done.returncode == 0, done.stderr
    started = re.findall(r"^upgrade: running (?:\S+ )?-> (\S+), .*$", done.stderr, re.MULTILINE)
    finished = re.findall(r"^upgrade: ran (?:\S+ )?-> (\S+), .* in [\d,]+\.\d\d s \([\d,]+ statement\(s\)\)$",
                          done.stderr, re.MULTILINE)
    assert started == finished == ["expand_root", "r1_inventory", "r2_meta_display_name_version"], done.stderr
    still = re.findall(r"^upgrade: still running (?:\S+ )?-> (\S+), .* \([\d,]+\.\d s(?:; statement [\d,]+\.\d s: .+)?\)$",
                       done.stderr, re.MULTILINE)
    assert set(still) <= set(started)


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(2)])
def test_a_revision_that_fails_is_reported_as_stopped_not_ran(tmp_path, seed):
    """A revision whose upgrade() fails after a drawn number of statements (a table created per
    statement, then one the database rejects) is reported as stopped, never as "ran"; the ones
    before it as ran."""
    import sys

    rng = random.Random(seed)
    ini = copy_example(tmp_path)
    creates = "\n".join(f'    op.create_table("t{n}", sa.Column("id", sa.Integer, primary_key=True))'
                        for n in range(rng.randrange(0, 6)))
    (ini.parent / "migrations" / "versions" / "expand" / "0003_r3_fails.py").write_text(
        '"""release 3: fails"""\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
        'revision = "r3_fails"\ndown_revision = "r2_meta_display_name_version"\nbranch_labels = None\n'
        "depends_on = None\n\n\ndef upgrade() -> None:\n"
        f"{creates}\n    op.execute(sa.select(sa.table('no_such_table_{seed}', sa.column('id'))))\n\n\n"
        "def downgrade() -> None:\n    pass\n")
    code = "import sys; from migrations_policy.cli import dbsync_main; sys.exit(dbsync_main())"
    done = run([sys.executable, "-c", code, "-c", str(ini), "upgrade", "--expand", "--progress", "line"])
    assert done.returncode not in (0, None), (seed, done.stderr)
    finished = re.findall(r"^upgrade: ran (?:\S+ )?-> (\S+), .* in [\d,]+\.\d\d s", done.stderr, re.MULTILINE)
    stopped = re.findall(r"^upgrade: stopped with an error in (?:\S+ )?-> (\S+), .* after [\d,]+\.\d\d s "
                         r"\([\d,]+ statement\(s\)\)$", done.stderr, re.MULTILINE)
    assert finished == ["expand_root", "r1_inventory", "r2_meta_display_name_version"], (seed, done.stderr)
    assert stopped == ["r3_fails"], (seed, done.stderr)
    assert "Traceback" not in done.stderr
