"""``migrations-policy rehearse``: arguments in, a ``RehearsalResult`` out."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..project import DEFAULT_ALEMBIC_INI, Project
from .models import _import
from .result import RehearsalResult
from .run import RehearsalOptions, rehearse

def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", default=DEFAULT_ALEMBIC_INI, metavar="FILE",
                        help=f"alembic ini file of the project (default: {DEFAULT_ALEMBIC_INI})")
    parser.add_argument("--url", help="scratch database URL (127.0.0.1 or a SQLite file; must be empty)")
    parser.add_argument("--old-models", required=True, metavar="MODULE[:NAME]",
                        help="release N's models: a module of mapped classes, or its MetaData / declarative base")
    parser.add_argument("--new-models", required=True, metavar="MODULE[:NAME]", help="release N+1's models")
    parser.add_argument("--from-revision", action="append", required=True, metavar="REV",
                        help="revision the release-N schema is at (repeatable, e.g. one per branch)")
    parser.add_argument("--expand-to", metavar="REV", help="expand target (default: the expand heads)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--contract-to", metavar="REV", help="contract target (default: the contract heads)")
    group.add_argument("--no-contract", action="store_true", help="stop after the rolling phase")
    parser.add_argument("--seconds", type=_positive(float), default=5.0, help="length of each phase (default: 5)")
    parser.add_argument("--threads", type=_positive(int), default=4, help="threads per release's code (default: 4)")
    parser.add_argument("--max-operations", type=_positive(int), default=20_000, metavar="N",
                        help="operations per code and phase at most (default: 20000)")
    parser.add_argument("--seed-rows", type=_positive(int), default=50, metavar="N",
                        help="rows release-N code writes per table before expand (default: 50)")
    parser.add_argument("--batch-size", type=_positive(int), default=200, metavar="N",
                        help="data-migration batch size (default: 200)")
    parser.add_argument("--seed", type=int, help="random seed of the workload (default: random, printed)")
    parser.add_argument("--workload", metavar="MODULE:FUNCTION",
                        help="the project's own operation: FUNCTION(session, models, rng), mixed with the generic ones")
    parser.add_argument("--value", action="append", default=[], metavar="TABLE.COLUMN=VALUE",
                        help="a value the workload always writes to this column (repeatable)")
    parser.add_argument("--no-retry", action="store_true",
                        help="report deadlocks and lock waits as errors instead of retrying them like an application")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


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
