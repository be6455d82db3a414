"""``migrations-policy rehearse``: parsed arguments in (``cli._configure_rehearse``), a ``RehearsalResult`` out."""

from __future__ import annotations

import argparse

from migrations_policy.core.errors import UsageError
from migrations_policy.core.project import Project
from migrations_policy.rehearsal.models import _import
from migrations_policy.rehearsal.result import RehearsalResult
from migrations_policy.rehearsal.run import RehearsalOptions, rehearse


def _values(pairs: list[str]) -> dict[str, str]:
    values = {}
    for pair in pairs:
        target, sep, value = pair.partition("=")
        table, dot, column = target.partition(".")
        if not sep or not dot or not table.strip() or not column.strip():
            raise UsageError(f"--value {pair!r}: expected TABLE.COLUMN=VALUE")
        values[f"{table.strip()}.{column.strip()}"] = value
    return values


def run(args: argparse.Namespace) -> RehearsalResult:
    project = Project(args.config, url=args.url)
    workload = None
    if args.workload:
        if ":" not in args.workload:
            raise UsageError(f"--workload {args.workload!r}: expected MODULE:FUNCTION")
        workload = _import(args.workload, "--workload")
        if not callable(workload):
            raise UsageError(f"--workload {args.workload!r} is not a function")
    options = RehearsalOptions(seconds=args.seconds, threads=args.threads, max_operations=args.max_operations,
                               seed_rows=args.seed_rows, batch_size=args.batch_size, seed=args.seed,
                               workload=workload, values=_values(args.value), retry_transient=not args.no_retry)
    return rehearse(project, args.old_models, args.new_models, args.from_revision, expand_to=args.expand_to,
                    contract_to=args.contract_to, contract=not args.no_contract, options=options)
