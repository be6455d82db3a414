"""The rolling-upgrade demo: the inventory example from release 1 to release 3 on SQLite.

    python examples/demo.py [--rows 100000] [--keep DIR]

It copies the example app to a scratch directory, builds the release-1 schema,
fills it with realistic rows, and then walks the upgrade with the real commands,
printing each command line before running it: lint the new scripts, expand,
online data migrations in batches, contract refused while work is pending,
contract.  The commands are the ones installed beside this interpreter
(``.venv/bin/dbsync`` when run as ``.venv/bin/python examples/demo.py``), so the
virtual environment need not be activated.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
APP = HERE / "inventory"


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _installed(command: str) -> str:
    """*command* as installed beside this interpreter, else as found on PATH."""
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.exists() else command


def run(cmd: list[str], cwd: Path, expect: tuple[int, ...] = (0,)) -> int:
    print(f"$ {shlex.join(cmd)}", flush=True)
    proc = subprocess.run([_installed(cmd[0]), *cmd[1:]], cwd=cwd)
    if proc.returncode not in expect:
        print(f"demo: unexpected exit code {proc.returncode} (expected {' or '.join(map(str, expect))})",
              file=sys.stderr)
        sys.exit(1)
    print(f"(exit code {proc.returncode})", flush=True)
    return proc.returncode


def seed_release1(url: str, rows: int) -> None:
    """Fill the release-1 schema the way release-1 code writes it."""
    sys.path.insert(0, str(APP))
    from inventory.models import release1

    engine = sa.create_engine(url)
    nodes, ports = release1.Node.__table__, release1.Port.__table__
    started = time.perf_counter()
    chunk = 10_000
    with engine.begin() as conn:
        for start in range(0, rows, chunk):
            ids = range(start + 1, min(start + chunk, rows) + 1)
            conn.execute(nodes.insert(), [
                {"id": i, "uuid": str(uuid.UUID(int=i)), "name": f"node-{i:07d}",
                 "extra": f'{{"rack": "r{i % 40}", "slot": {i % 48}}}' if i % 10 else None,
                 "provision_state": "active"} for i in ids])
            # Most ports point at a node; one in 500 at a node that was deleted (an orphan).
            conn.execute(ports.insert(), [
                {"id": i, "node_id": i if i % 500 else rows + i, "address": f"52:54:00:{i % 256:02x}:{i // 256 % 256:02x}:01"}
                for i in ids])
    engine.dispose()
    print(f"seeded {rows:,} nodes and {rows:,} ports in {time.perf_counter() - started:.1f} s")


def release1_code_writes(url: str, first_id: int, count: int) -> None:
    """Release-1 code (its own ORM models) keeps serving writes on the expanded schema."""
    from sqlalchemy.orm import Session

    from inventory.models import release1

    engine = sa.create_engine(url)
    with Session(engine) as session:
        session.add_all(release1.Node(id=i, uuid=str(uuid.uuid4()), name=f"late-{i}", extra='{"late": true}')
                        for i in range(first_id, first_id + count))
        session.commit()
        total = session.scalar(sa.select(sa.func.count()).select_from(release1.Node))
    engine.dispose()
    print(f"release-1 code wrote {count:,} nodes the old way (extra, name) and reads all {total:,}: it still works")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="nodes (and ports) to create (default 100000)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary directory)")
    args = parser.parse_args(argv)

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mp-demo-"))
    app = work / "inventory"
    if app.exists():
        shutil.rmtree(app)
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__", "*.db"))
    ini = app / "alembic.ini"
    url = f"sqlite:///{app / 'inventory.db'}"
    dbsync = ["dbsync", "-c", str(ini)]
    try:
        banner("Release 1 is in production: create its schema (expand up to r1_inventory) and data")
        run(["alembic", "-c", str(ini), "upgrade", "r1_inventory"], app)
        seed_release1(url, args.rows)

        banner("CI: lint the release-2 and release-3 migration scripts")
        run(["migrations-policy", "lint", str(app / "migrations" / "versions")], app)

        banner("Operator: where do we stand?")
        run(dbsync + ["status"], app)

        banner("Expand: additive, online schema changes; release-1 code keeps working")
        run(dbsync + ["upgrade", "--expand"], app)
        release1_code_writes(url, args.rows + 1, 1_000)
        run(dbsync + ["check"], app, expect=(4,))

        banner("Contract is refused while data migrations are pending")
        run(dbsync + ["upgrade", "--contract"], app, expect=(4,))

        banner("Online data migrations, in batches, while traffic continues")
        run(dbsync + ["online_data_migrations", "--max-count", str(max(1, args.rows // 2))], app, expect=(1,))
        run(dbsync + ["online_data_migrations"], app)
        run(dbsync + ["check"], app, expect=(5,))

        banner("Contract: drop what release 3 no longer uses")
        run(dbsync + ["upgrade", "--contract"], app)
        run(dbsync + ["status"], app)
        run(dbsync + ["check"], app)
        banner("Done: the inventory runs release 3 (dbsync check exits 0)")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
