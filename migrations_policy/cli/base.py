"""What every command of the shell shares: the argument parser whose errors are one line, the
command table's row (``CommandSpec``), and the options several commands take."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from typing import Callable

import importlib

from migrations_policy.core.errors import UsageError


class _LazyModule:
    """A module imported on first use: ``migrations-policy lint`` with a warm cache never imports alembic."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


commands = _LazyModule("migrations_policy.commands")
lint_command = _LazyModule("migrations_policy.commands.lint_command")
rehearsal_command = _LazyModule("migrations_policy.rehearsal.command")
trace_command = _LazyModule("migrations_policy.trace")


COMMON_EXIT_CODES = {
    0: "success",
    2: "usage or configuration error, unreadable input, or database unreachable (one line on stderr)",
}


class _ArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser that raises UsageError (with the command's exit code) instead of exiting."""

    usage_exit_code = 2

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", exit_code=self.usage_exit_code)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """Unknown arguments are a usage error of the command they follow (argparse reports
        them from the top-level parser, which would give its exit code, not the command's)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            spec = getattr(parsed, "_mp_command", None)
            raise UsageError(f"{self.prog}: unrecognized arguments: {' '.join(extras)}",
                             exit_code=spec.usage_exit_code if spec else self.usage_exit_code)
        return parsed


@dataclass(frozen=True)
class CommandSpec:
    """One subcommand: its arguments and the function that runs it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], commands.Result]
    usage_exit_code: int = 2
    description: str = ""
    #: Exit code -> meaning; rendered in the CLI reference (docs/cli.rst).
    exit_codes: dict = field(default_factory=lambda: dict(COMMON_EXIT_CODES))


def _project(args: argparse.Namespace):
    from migrations_policy.core.project import Project

    return Project(args.config, url=getattr(args, "url", None))


def _add_force_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--force", action="store_true",
                        help=f"{what}; recorded in migrations_policy_gate_overrides (who, when, why, what remained)")
    parser.add_argument("--reason", default="", help="why --force was needed (required with --force; "
                                                     "recorded with it)")


def _force_reason(args: argparse.Namespace, command: str) -> str | None:
    """The reason of an override: every --force needs one (--reason TEXT), recorded with it."""
    if args.reason and not args.force:
        raise UsageError("--reason goes with --force")
    if args.force and not args.reason.strip():
        raise UsageError(f"{command} --force needs --reason TEXT (why the override is needed; it is recorded "
                         "with it in migrations_policy_gate_overrides)")
    return args.reason.strip() if args.force else None


def _progress(args: argparse.Namespace, label: str):
    """Progress of a long command on stderr, as --progress and --progress-interval say."""
    from migrations_policy.core.progress import reporting

    return reporting(getattr(args, "progress", "auto"), sys.stderr, getattr(args, "progress_interval", 5.0), label)


def _with_progress(args: argparse.Namespace, label: str, run: Callable[[argparse.Namespace], commands.Result]):
    with _progress(args, label):
        return run(args)


def _add_progress_options(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument("--progress", choices=("auto", "line", "live", "none"),
                        default="auto" if default is None else default,
                        help="progress on stderr: a live line (terminal), a line every few seconds (logs), or "
                             "none (default: auto, live on a terminal)")
    parser.add_argument("--progress-interval", type=_number(float), metavar="SECONDS",
                        default=5.0 if default is None else default,
                        help="seconds between two progress lines in line mode (default: 5)")


def _revision_id(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a revision cannot be empty")
    return text


def _number(kind, allow_zero: bool = False):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
        if value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {'>= 0' if allow_zero else 'positive'}: {text!r}")
        return value
    return parse

