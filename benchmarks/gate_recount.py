"""What the contract gate's live recount costs against trusting a remembered completion proof.

    python benchmarks/gate_recount.py [--rows 1000000] [--backend postgresql] [--rounds 4]

The inventory example (``benchmarks/gate.py``'s set-up) with N rows per table, every data
migration complete.  ``pending_migrations`` as ``status``/``check`` call it (a proven completion
trusted: ``remember=True``) and as the gate of an upgrade calls it (recounted live, no proof read),
interleaved A B A B; prints each round and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate as bench  # noqa: E402


def main() -> None:
    from migrations_policy.commands.data import project_registry
    from migrations_policy.data.remaining.pending import pending_migrations
    from migrations_policy.testing import servers

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--backend", default="postgresql")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    server = servers.STARTERS[args.backend]()
    try:
        with bench.inventory(server, args.rows) as (project, engine):
            bench.detach_orphans(engine, args.rows)
            bench.complete(engine)
            registry = project_registry(project)

            def call(remember: bool) -> None:
                with project.connect() as conn:
                    found = pending_migrations(conn, registry, remember=remember)
                    assert not any(p.remaining for p in found), found

            for _ in range(3):
                call(True)  # installs the mark triggers, then proves
            trusted, recounted = [], []
            for _ in range(args.rounds):
                trusted.append(bench.timed(lambda: call(True)))
                recounted.append(bench.timed(lambda: call(False)))
            ratios = [b / a for a, b in zip(trusted, recounted)]
            print(f"{args.backend} {args.rows:,} rows, complete: proof trusted (status/check) ms "
                  f"{[round(a * 1000, 1) for a in trusted]}; recounted (the gate) ms "
                  f"{[round(b * 1000, 1) for b in recounted]}; ratios {[round(r, 1) for r in ratios]}; "
                  f"median {statistics.median(ratios):.1f}x")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
