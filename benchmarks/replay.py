"""Benchmark ``migrations-policy lint --replay`` against offline ``lint`` of the same tree.

    python benchmarks/replay.py [-n 100] [--repeat 1] [--backend sqlite --backend postgresql]

A linear history of N scripts that apply on a real database (each creates a table, adds
two columns and an index, drops a column of the previous table, and every fifth one
reflects the previous table with ``sa.inspect(op.get_bind())`` and acts on what it finds).
Each run is a fresh ``migrations-policy lint`` process, as CI runs it, best of ``--repeat``:

* offline, cold cache, on the backend's dialect;
* ``--replay`` on SQLite (a temporary file the linter creates and removes);
* ``--scratch-server`` on a PostgreSQL 15 started here (``migrations_policy.testing.servers``:
  a throwaway database created and dropped by the linter).

Prints scripts/s, the total, and each replay's ratio to the offline run measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def script(i: int) -> str:
    ops = [f'op.create_table("t{i}", sa.Column("id", sa.Integer, primary_key=True), sa.Column("old", sa.Integer))',
           f'op.add_column("t{i}", sa.Column("a", sa.String(50)))',
           f'op.add_column("t{i}", sa.Column("b", sa.Integer, nullable=False, server_default="0"))',
           f'op.create_index("ix_t{i}_a", "t{i}", ["a"])']
    if i and i % 5 == 0:
        ops += [f'columns = [c["name"] for c in sa.inspect(op.get_bind()).get_columns("t{i - 1}")]',
                'if "old" in columns:', f'    op.drop_column("t{i - 1}", "old")']
    elif i:
        ops.append(f'op.drop_column("t{i - 1}", "old")')
    body = "\n".join("    " + op for op in ops)
    down = repr(f"r{i - 1:05d}") if i else None
    return (f'"""rev {i}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = "r{i:05d}"\n'
            f"down_revision = {down}\nbranch_labels = None\n\n\ndef upgrade():\n{body}\n\n\n"
            "def downgrade():\n    pass\n")


def timed(args: list[str], cwd: Path, repeat: int) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    best, code, out = float("inf"), 0, ""
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            env["MIGRATIONS_POLICY_CACHE_DIR"] = cache  # cold: nothing cached
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "migrations_policy.cli", "lint", *args], cwd=cwd, env=env,
                                  capture_output=True, text=True)
            best = min(best, time.perf_counter() - start)
            code, out = proc.returncode, proc.stdout.strip().splitlines()[-1:] or [proc.stderr.strip()]
    return best, code, out[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="scripts in the history (default 100)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement, best kept (default 1)")
    parser.add_argument("--backend", action="append", choices=("sqlite", "postgresql"),
                        help="backends (repeatable; default both)")
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    with tempfile.TemporaryDirectory() as work:
        cwd = Path(work)
        versions = cwd / "versions"
        versions.mkdir()
        for i in range(args.n):
            (versions / f"r{i:05d}.py").write_text(script(i))
        print(f"{args.n} scripts, one chain; {os.cpu_count()} CPU(s); best of {args.repeat}; fresh process each")
        for backend in backends:
            server = None
            if backend == "postgresql":
                from migrations_policy.testing.servers import start_postgresql

                server = start_postgresql()
            try:
                offline, code, last = timed(["--dialect", backend, "versions"], cwd, args.repeat)
                print(f"{backend:<10} offline : {offline:7.2f} s  {args.n / offline:7.1f} scripts/s  "
                      f"(exit {code}: {last})")
                target = ["--replay"] if server is None else [
                    "--scratch-server", server.url.render_as_string(hide_password=False)]
                replay, code, last = timed([*target, "versions"], cwd, args.repeat)
                print(f"{backend:<10} replay  : {replay:7.2f} s  {args.n / replay:7.1f} scripts/s  "
                      f"(exit {code}: {last})")
                print(f"{backend:<10} replay / offline = {replay / offline:.2f}x")
            finally:
                if server is not None:
                    server.stop()


if __name__ == "__main__":
    main()
