"""Benchmark ``migrations-policy lint`` (issue 7): N generated revisions of ~10 ops each.

    python benchmarks/lint_speed.py [-n 1000] [--dialect postgresql ...]

Times, each in a fresh process (``migrations-policy lint`` as CI runs it), best
of ``--repeat`` runs: cold (empty cache), warm (every file cached), one changed
file (rest cached), the bare imports a changed script needs (Python, alembic,
SQLAlchemy), and -- only when ``squawk`` is on PATH -- squawk on the same
statements as SQL.
Also times the warm run in-process through ``migrations_policy.lint.run`` and
reports whether it imported alembic.  Prints files/s and the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS = [
    'op.add_column("t{i}", sa.Column("c{j}", sa.String(50)))',
    'op.create_index("ix_{i}_{j}", "t{i}", ["c{j}"])',
    'op.drop_column("t{i}", "old{j}")',
    'op.alter_column("t{i}", "n{j}", nullable=True, existing_type=sa.Integer())',
    'op.execute("UPDATE t{i} SET c{j} = 1")',
    'op.create_table("n{i}_{j}", sa.Column("id", sa.Integer, primary_key=True))',
    'op.create_foreign_key("fk{i}_{j}", "t{i}", "p", ["p_id"], ["id"], postgresql_not_valid=True)',
    'op.add_column("t{i}", sa.Column("d{j}", sa.Integer, nullable=False, server_default="0"))',
    'op.execute("ALTER TABLE t{i} ADD COLUMN e{j} integer")',
    'op.create_unique_constraint("uq{i}_{j}", "t{i}", ["c{j}"])',
]
SQL = [
    "ALTER TABLE t{i} ADD COLUMN c{j} varchar(50);",
    "CREATE INDEX ix_{i}_{j} ON t{i} (c{j});",
    "ALTER TABLE t{i} DROP COLUMN old{j};",
    "ALTER TABLE t{i} ALTER COLUMN n{j} DROP NOT NULL;",
    "UPDATE t{i} SET c{j} = 1;",
    "CREATE TABLE n{i}_{j} (id integer PRIMARY KEY);",
    "ALTER TABLE t{i} ADD CONSTRAINT fk{i}_{j} FOREIGN KEY (p_id) REFERENCES p (id) NOT VALID;",
    "ALTER TABLE t{i} ADD COLUMN d{j} integer NOT NULL DEFAULT 0;",
    "ALTER TABLE t{i} ADD COLUMN e{j} integer;",
    "ALTER TABLE t{i} ADD CONSTRAINT uq{i}_{j} UNIQUE (c{j});",
]


def revision(i: int, salt: str = "") -> str:
    body = "\n".join("    " + OPS[k].format(i=i, j=k) for k in range(10))
    return (f'"""rev {i}{salt}"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = "r{i:05d}"\n'
            f'down_revision = {repr(f"r{i - 1:05d}") if i else None}\nbranch_labels = {("expand",) if not i else None}\n\n'
            f"def upgrade():\n{body}\n\n\ndef downgrade():\n    pass\n")


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr.strip()[:500]}")
    return elapsed, proc.returncode


def in_process_warm(versions: Path, dialects: list[str], env: dict, cwd: Path) -> str:
    code = ("import sys, time; t = time.perf_counter(); from migrations_policy.lint import run; "
            f"r = run([{str(versions)!r}], dialects={dialects!r}); "
            "print(f'{time.perf_counter() - t:.3f} {len(r.findings)} {\"alembic\" in sys.modules}')")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="number of revisions (default 1000)")
    parser.add_argument("--dialect", action="append", dest="dialects", help="dialect(s) (default: all three)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="measure each figure this many times; print the best and the spread (default 3)")
    args = parser.parse_args()
    dialects = args.dialects or ["postgresql", "mysql", "sqlite"]
    root = Path(tempfile.mkdtemp(prefix="mp-lint-bench-"))
    try:
        versions = root / "versions" / "expand"
        versions.mkdir(parents=True)
        for i in range(args.n):
            (versions / f"r{i:05d}.py").write_text(revision(i))
        env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": str(root / "cache")}
        cmd = ["migrations-policy", "lint", *[a for d in dialects for a in ("--dialect", d)], str(root / "versions")]
        load_before = os.getloadavg()[0]
        runs: dict[str, list[float]] = {"cold": [], "warm": [], "one": [], "startup": [], "imports": []}
        for _ in range(max(1, args.repeat)):
            shutil.rmtree(root / "cache", ignore_errors=True)
            (versions / "r00007.py").write_text(revision(7))
            runs["cold"].append(timed(cmd, env, root)[0])
            runs["warm"].append(timed(cmd, env, root)[0])
            (versions / "r00007.py").write_text(revision(7, salt=" changed"))
            runs["one"].append(timed(cmd, env, root)[0])
            runs["startup"].append(timed([sys.executable, "-c", "import migrations_policy.cli"], env, root)[0])
            runs["imports"].append(timed([sys.executable, "-c", "import alembic.op, sqlalchemy"], env, root)[0])
        inproc = in_process_warm(root / "versions", dialects, env, root)
        cold, warm, one = min(runs["cold"]), min(runs["warm"]), min(runs["one"])
        n = args.n

        def spread(name: str) -> str:
            values = runs[name]
            return f"(of {len(values)}: {min(values):.3f}-{max(values):.3f}, median {statistics.median(values):.3f})"

        print(f"lint of {n} revisions x 10 ops, dialects {','.join(dialects)} (each a fresh process, best "
              f"of {args.repeat}; {os.cpu_count()} CPUs, load average {load_before:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after)")
        print(f"  cold (empty cache)   {cold:7.3f} s  {n / cold:8.0f} files/s  {spread('cold')}")
        print(f"  warm (all cached)    {warm:7.3f} s  {n / warm:8.0f} files/s  {spread('warm')}")
        print(f"  one file changed     {one:7.3f} s  {spread('one')}")
        print(f"  python + import migrations_policy.cli alone: {min(runs['startup']):.3f} s")
        print(f"  python + import alembic.op, sqlalchemy alone (what a changed script needs first): "
              f"{min(runs['imports']):.3f} s")
        seconds, findings, imported = inproc.split()
        print(f"  warm, in process (migrations_policy.lint.run): {float(seconds):.3f} s, "
              f"{findings} findings, alembic imported: {imported}")
        # The binary itself, not a version manager's shim script in front of it (pyenv adds ~0.2 s).
        beside_python = Path(sys.executable).with_name("squawk")
        squawk = str(beside_python) if beside_python.exists() else shutil.which("squawk")
        if squawk:
            sql_dir = root / "sql"
            sql_dir.mkdir()
            for i in range(n):
                (sql_dir / f"r{i:05d}.sql").write_text("\n".join(s.format(i=i, j=k) for k, s in enumerate(SQL)))
            squawk_time, _ = timed([squawk, *sorted(map(str, sql_dir.glob("*.sql")))], env, root)
            print(f"  squawk ({n * 10} statements) {squawk_time:7.3f} s  {n / squawk_time:8.0f} files/s")
            print(f"  ratio cold/squawk {cold / squawk_time:.1f}x, warm/squawk {warm / squawk_time:.1f}x")
        else:
            print("  squawk not on PATH: no comparison")
        print(f"  ratio cold/warm {cold / warm:.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
