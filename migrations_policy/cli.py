"""The thin argparse shell for ``migrations-policy`` and ``dbsync``.

Both console scripts are built from one table of commands.  A project embeds
the operator commands in its own CLI with a few lines::

    # myproject/cmd/dbsync.py
    from migrations_policy.cli import dbsync_main

    def main():
        return dbsync_main(prog="myproject-dbsync", default_config="/etc/myproject/alembic.ini")

or, inside an existing argparse tree::

    from migrations_policy import cli
    sub = parser.add_subparsers(dest="command", parser_class=cli.ArgumentParser)
    cli.add_dbsync_commands(sub)          # adds upgrade, status, check, ...
    sys.exit(cli.run(parser))             # hints name parser.prog, errors are one line

Every user error is one line on stderr (``PROG: error: ...``) and a documented
exit code; a traceback means a bug in migrations_policy.
"""

from __future__ import annotations

import argparse
import configparser
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import importlib

from . import __version__, project_code
from ._urls import mask_text
from .config import _first_line
from .config import CONTRACT, DEFAULT_ALEMBIC_INI, DIALECTS, EXPAND, PHASES
from .errors import PolicyError, UsageError


class _LazyModule:
    """A module imported on first use: ``migrations-policy lint`` with a warm cache never imports alembic."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


commands = _LazyModule("migrations_policy.commands")
lint_command = _LazyModule("migrations_policy.lint.command")
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
    from .project import Project

    return Project(args.config, url=getattr(args, "url", None))


# -- dbsync commands -----------------------------------------------------------
def _no_args(parser: argparse.ArgumentParser) -> None:
    pass


def _configure_upgrade(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--expand", action="store_true", help="apply only the expand heads")
    group.add_argument("--contract", action="store_true", help="apply only the contract heads (through the gate)")
    _add_force_options(parser, "apply contract even though the gate refuses")


def _add_force_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--force", action="store_true",
                        help=f"{what}; recorded in migrations_policy_gate_overrides (who, when, why, what remained)")
    parser.add_argument("--reason", default="", help="why --force was needed (recorded with it)")


def _force_reason(args: argparse.Namespace, command: str) -> str | None:
    if args.reason and not args.force:
        raise UsageError("--reason goes with --force")
    return (args.reason or f"dbsync {command} --force") if args.force else None


def _run_upgrade(args: argparse.Namespace) -> commands.Result:
    phases = (EXPAND,) if args.expand else (CONTRACT,) if args.contract else (EXPAND, CONTRACT)
    with _progress(args, "upgrade"):
        return commands.upgrade(_project(args), phases=phases, force=_force_reason(args, "upgrade"))


def _progress(args: argparse.Namespace, label: str):
    """Progress of a long command on stderr, as --progress and --progress-interval say."""
    from .progress import reporting

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


def _configure_stamp(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("revisions", nargs="+", type=_revision_id, metavar="REVISION",
                        help="revision(s) to record as applied")
    parser.add_argument("--purge", action="store_true", help="empty the version table first")
    _add_force_options(parser, "stamp a revision whose data migrations are not complete")


def _configure_rollback(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the plan (revisions, drops, rows at risk) "
                                                               "and change nothing")
    _add_force_options(parser, "drop even the rows whose only copy is in a dropped column or table")


DBSYNC_COMMANDS: list[CommandSpec] = [
    CommandSpec(
        "upgrade",
        "apply pending schema revisions (expand, then contract)",
        _configure_upgrade,
        _run_upgrade,
        description="Apply the expand heads, then the contract heads if the contract gate allows. "
                    "--expand or --contract limits it to one phase. Every DDL statement runs with a bounded "
                    "lock timeout (lock_timeout setting) and is retried with backoff (lock_retries).",
        exit_codes={**COMMON_EXIT_CODES,
                    4: "the contract gate refused: data migrations pending, expand missing, or existing rows "
                       "that violate a constraint the contract adds (the message says which, how many rows, a "
                       "few of their keys, and what finishes them; --force does not override violating rows); "
                       "with no flag, expand was applied and contract was not; or a revision would remove a "
                       "live sync trigger while release N may still write its old column (one line naming the "
                       "revision, table and trigger; --force does not override it)",
                    7: "a revision destroyed a table or column an unfinished data migration reads, by a path no "
                       "check saw before the database acted (a driver's private call), and its DDL had committed "
                       "(MariaDB/MySQL; SQLite after executescript): it is not recorded as applied; the one line names "
                       "what is gone"},
    ),
    CommandSpec(
        "status",
        "show each branch's current revision, head and pending revisions",
        lambda parser: parser.add_argument(
            "--exact", action="store_true",
            help="count every data migration's remaining rows (a full scan each); by default a pending row is "
                 "found with LIMIT 1 and the rest is the planner's estimate, marked as such"),
        lambda args: commands.status(_project(args), exact=args.exact),
        description="Per branch (expand, contract): the revisions applied, the head and what is pending; each "
                    "data migration's remaining rows and ledger state; whether the contract gate allows contract. "
                    "Remaining rows are estimates (marked ~) unless --exact; 0 is always verified.",
    ),
    CommandSpec(
        "check",
        "exit code says the next upgrade step (for automation)",
        _no_args,
        lambda args: commands.check(_project(args)),
        description="Report what the next step of the rolling upgrade is, as an exit code (glance's "
                    "convention). Refuses (exit 2) when expand is pending but object rows still carry NULL or "
                    "unaccepted versions (the previous upgrade's data migrations are not finished). It reads only "
                    "what decides the code: the first pending row of the first unfinished data migration (its "
                    "JSON leaves out the rest: gate null); dbsync status shows everything.",
        exit_codes={
            0: "nothing to do: schema at head, data migrations complete",
            2: "error: unreachable database, bad configuration, or unfinished object versions (one line); "
               "or a pending revision cannot be applied as it stands, or a revision is partly reverted (an "
               "interrupted rollback), or a sync trigger is left behind after its contract (each named)",
            3: "expand revisions pending",
            4: "data migrations pending, or contract pending but refused by the gate (also when existing "
               "rows violate a constraint it adds: each such constraint is listed with its count and keys)",
            5: "contract revisions pending and allowed by the gate",
        },
    ),
    CommandSpec(
        "version",
        "print the revisions recorded in the database",
        _no_args,
        lambda args: commands.version(_project(args)),
    ),
    CommandSpec(
        "stamp",
        "record revisions as applied without running them",
        _configure_stamp,
        lambda args: commands.stamp(_project(args), args.revisions, purge=args.purge,
                                    force=_force_reason(args, "stamp")),
        exit_codes={**COMMON_EXIT_CODES, 4: "refused by the gate: a stamped revision's data migrations are not "
                                            "complete (--force records it), or env.py is not wired to the gate"},
    ),
    CommandSpec(
        "rollback",
        "revert the expand revisions applied since the last contract (before the release's contract runs)",
        _configure_rollback,
        lambda args: commands.rollback(_project(args), dry_run=args.dry_run, force=_force_reason(args, "rollback")),
        description="Returns the database to the last completed release: reverts, newest first, the expand "
                    "revisions applied since the last contract (their downgrade() through env.py, with the "
                    "same lock timeouts and retries as upgrade), then forgets the ledger entries of the data "
                    "migrations whose table or columns went with them. Before dropping anything it counts the "
                    "rows whose only copy is in a dropped column or table and refuses unless --force.",
        exit_codes={**COMMON_EXIT_CODES,
                    4: "refused: the release's contract has run, or rows would be lost (use --force), "
                       "or an expand revision is partly applied (finish it with upgrade --expand), "
                       "or env.py is not wired to the gate"},
    ),
]


def _configure_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-lock-seconds", type=_number(float, allow_zero=True), metavar="SECONDS",
                        help="exit 6 if any statement would hold a blocking lock longer than this (estimated), "
                             "or for a time that cannot be estimated")


DBSYNC_COMMANDS.append(CommandSpec(
    "plan",
    "before expand: each pending statement's table and live size, lock, rewrite or scan, and estimated duration",
    _configure_plan,
    lambda args: commands.plan(_project(args), max_lock_seconds=args.max_lock_seconds),
    description="For each revision dbsync upgrade would apply (expand, then contract) and each statement in "
                "it: the table it touches with its live size (PostgreSQL: the planner's rows from pg_class, "
                "pg_total_relation_size; MariaDB: information_schema.TABLES; SQLite: a count and dbstat), the "
                "lock it takes and whether it rewrites or scans (the policy knowledge base the linter uses), "
                "and how long a blocking statement would hold its lock, estimated from a read rate measured on "
                "this server (a timed sequential read of a sample of the table). Runs nothing, locks nothing.",
    exit_codes={**COMMON_EXIT_CODES,
                6: "--max-lock-seconds: a statement would hold a blocking lock longer than that (estimated), "
                   "or for a time that cannot be estimated (unknown table, a revision unreadable offline)"},
))


# -- online data migrations (migrations_policy.data) ----------------------------
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


def _configure_online_data_migrations(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=_number(int), metavar="N",
                        help="rows per batch transaction (default: batch_size setting, 5000); "
                             "with --batch-seconds, the first batch's size")
    parser.add_argument("--batch-seconds", type=_number(float, allow_zero=True), metavar="SECONDS",
                        help="size batches to take about this long, up to 10x --batch-size "
                             "(default: batch_seconds setting; 0: fixed --batch-size)")
    parser.add_argument("--max-count", type=_number(int), metavar="N",
                        help="stop after about N rows in all, shared fairly between the migrations")
    parser.add_argument("--sleep", type=_number(float, allow_zero=True), default=0.0, metavar="SECONDS",
                        help="pause after each batch")
    parser.add_argument("--workers", type=_number(int), default=1, metavar="N",
                        help="migrations run in parallel (default: 1)")
    parser.add_argument("--migration", action="append", default=[], metavar="NAME",
                        help="run only this migration (repeatable)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME.key=value",
                        help="pass an option to a migration (repeatable)")
    parser.add_argument("--exact", action="store_true",
                        help="count the rows pending before the walk (a full scan of a big table; "
                             "default: the planner's estimate, marked ~)")


def _run_online_data_migrations(args: argparse.Namespace) -> commands.Result:
    from .data.report import choose_progress

    progress = choose_progress(getattr(args, "progress", "auto"), sys.stderr, getattr(args, "progress_interval", 5.0))
    return commands.online_data_migrations(
        _project(args), batch_size=args.batch_size, batch_seconds=args.batch_seconds, max_count=args.max_count, sleep=args.sleep,
        workers=args.workers, migrations=args.migration, options=args.option, progress=progress,
        exact=args.exact,
    )


DBSYNC_COMMANDS.append(CommandSpec(
    "online_data_migrations",
    "migrate data in batches while the old release keeps running",
    _configure_online_data_migrations,
    _run_online_data_migrations,
    usage_exit_code=127,
    description="Run the declared online data migrations in batches, one transaction per batch, "
                "and print what each did and what remains (counted live). Safe to rerun, to interrupt, "
                "and to run twice at once.",
    exit_codes={
        0: "every data migration is complete",
        1: "work remains: a walk stopped before its end (--max-count): run again",
        2: "a migration failed or left stuck rows (the others still ran), or a configuration "
           "or database error (one line on stderr)",
        3: "caught up: every walk reached its end, but rows written behind it meanwhile remain (code of the "
           "previous release still running); stop that code, then a final run exits 0",
        127: "invalid arguments (unknown option, bad value)",
        130: "interrupted (Ctrl-C or SIGTERM): the batch in progress rolled back, the ledger says interrupted",
    },
))


def _run_prune(args: argparse.Namespace) -> commands.Result:
    from .data.report import choose_progress

    progress = choose_progress(getattr(args, "progress", "auto"), sys.stderr, getattr(args, "progress_interval", 5.0),
                               label="prune")
    return commands.prune(
        _project(args), batch_size=args.batch_size, batch_seconds=args.batch_seconds, max_count=args.max_count,
        sleep=args.sleep, workers=args.workers, migrations=args.migration, options=args.option, progress=progress,
        exact=args.exact,
    )


DBSYNC_COMMANDS.append(CommandSpec(
    "prune",
    "delete the rows the project declares prunable, in batches, children first",
    _configure_online_data_migrations,
    _run_prune,
    usage_exit_code=127,
    description="Delete the rows of each Prune declared in the data_migrations modules (soft-deleted before a "
                "date, say), optionally copying them to a shadow table first, on the data-migration runner: "
                "the same batches, throttling, ledger, report and exit codes; --migration selects prunes by "
                "name. Rows another table still references are kept and reported.",
    exit_codes={
        0: "every prune is complete",
        1: "--max-count reached and rows remain: run again",
        2: "a prune failed (the others still ran), or a configuration or database error (one line on stderr)",
        3: "caught up: every walk reached its end, but rows became prunable behind it meanwhile: run again later",
        127: "invalid arguments (unknown option, bad value)",
        130: "interrupted (Ctrl-C or SIGTERM): the batch in progress rolled back, the ledger says interrupted",
    },
))


#: Commands of the developer / CI tool (``migrations-policy``).
DEVELOPER_COMMANDS: list[CommandSpec] = []


# -- authoring: init, check-models (migrations-policy), revision (dbsync) ---------
def _configure_init(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", metavar="DIR", help="where to create the environment (not with --adopt)")
    parser.add_argument("-c", "--config", default=DEFAULT_ALEMBIC_INI, metavar="FILE",
                        help=f"alembic ini file to write, or to adopt (default: {DEFAULT_ALEMBIC_INI})")
    parser.add_argument("-t", "--template", default="expand_contract", help="template (default: expand_contract)")
    parser.add_argument("--adopt", action="store_true",
                        help="convert the existing single-branch history of -c FILE: both branches start at its head")
    parser.add_argument("--url", help="database URL to write as sqlalchemy.url of the new ini file")
    parser.add_argument("--metadata", metavar="MODULE:ATTRIBUTE",
                        help="your models' MetaData for autogenerate, written as env.py's target_metadata "
                             "(e.g. myapp.models:Base.metadata)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def _run_init(args: argparse.Namespace) -> commands.Result:
    from .authoring import commands as authoring

    if args.adopt:
        if args.directory:
            raise UsageError("init --adopt takes no DIR: it reads script_location from -c/--config")
        return authoring.adopt(args.config, template=args.template)
    if not args.directory:
        raise UsageError("init: DIR is required (or --adopt)")
    return authoring.init(args.directory, template=args.template, config_file=args.config, url=args.url,
                          metadata=args.metadata)


def _configure_check_models(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE[:NAME]", help="module holding the models' MetaData (or NAME in it)")
    parser.add_argument("-c", "--config", default=None, metavar="FILE",
                        help="alembic ini file, for the release_mapping setting (optional)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def _run_check_models(args: argparse.Namespace) -> commands.Result:
    from .authoring import commands as authoring

    return authoring.check_models(args.target, _project(args) if args.config else None)


def _configure_revision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--message", required=True, help="what the change does (the scripts' slug)")
    parser.add_argument("--rev-id", help="revision id of the expand script (contract: ID_contract)")


DEVELOPER_COMMANDS.extend([
    CommandSpec(
        "init",
        "create an alembic environment in the expand/contract layout (or --adopt an existing one)",
        _configure_init,
        _run_init,
        description="Render the expand_contract template into DIR with versions/expand, versions/contract and "
                    "the two root revisions (labels expand and contract).  --adopt converts the single-branch "
                    "history of -c FILE: both branches start at its current head.",
    ),
    CommandSpec(
        "check-models",
        "report object tables without a version column",
        _configure_check_models,
        _run_check_models,
        description="Import MODULE[:NAME] and report object tables (VersionedMixin, object_table(), or named by "
                    "the release mapping) without a String 'version' column and an index on it.",
        exit_codes={**COMMON_EXIT_CODES, 1: "an object table lacks the version column or its index"},
    ),
])

DBSYNC_COMMANDS.append(CommandSpec(
    "revision",
    "autogenerate a revision, split into an expand and a contract script",
    _configure_revision,
    lambda args: commands.revision(_project(args), args.message, rev_id=args.rev_id),
    description="Compare the models with the database (which must be at head) and write "
                "versions/expand/..._MSG.py and versions/contract/..._MSG.py (an empty phase writes no file), "
                "plus a module of data-migration stubs when the change needs one.",
))


# -- lint (migrations-policy lint, dbsync lint) ----------------------------------
LINT_FORMATS = ("text", "json", "github", "sarif", "junit")
LINT_EXIT_CODES = {0: "no error findings (warnings allowed)", 1: "at least one error finding",
                   2: "usage or settings error (one line: a baseline that is no revision, a bad glob, an unknown "
                      "rule code, a lint_plugins module that cannot be imported; a --replay database that is not "
                      "empty), or an input that cannot be read, loaded or replayed (reported as MP000)",
                   3: "internal error of the linter (a bug: one line on stderr; --debug prints the traceback)"}


def _configure_lint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="revision scripts or version directories (default: the 'paths' setting)")
    parser.add_argument("--phase", choices=PHASES, help="phase of every script (default: from branch labels / directory)")
    parser.add_argument("--dialect", action="append", choices=DIALECTS, dest="dialects",
                        help="dialect to check against (repeatable; default: the 'dialects' setting, all three)")
    parser.add_argument("--format", choices=LINT_FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--config", metavar="FILE", help="extra settings file ([migrations_policy] ini or pyproject.toml)")
    parser.add_argument("--url", help="scratch database: scripts that cannot run offline run there, rolled back "
                                      "(with --replay: an empty database the history is upgraded on)")
    parser.add_argument("--replay", action="store_true",
                        help="upgrade the history from base on a scratch database (--url, --scratch-server, "
                             "else a temporary SQLite file) and lint what each script really executed")
    parser.add_argument("--scratch-server", metavar="URL",
                        help="with --replay (implied): a PostgreSQL or MySQL/MariaDB server URL on which a "
                             "throwaway database is created for the replay and dropped afterwards")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an internal error")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="report only these codes or prefixes (comma-separated, repeatable; MP000 always)")
    parser.add_argument("--ignore", action="append", metavar="CODES", help="do not report these codes or prefixes")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (3 stays 3)")
    parser.add_argument("--statistics", action="store_true", help="print the number of findings per code instead")
    _add_include_baseline(parser)


def _add_include_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include-baseline", action="store_true",
                        help="also check the revisions at or before the 'baseline' setting (skipped by default)")


def _configure_dbsync_lint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", choices=PHASES, help="phase of every script (default: each script's branch)")
    parser.add_argument("--dialect", action="append", choices=DIALECTS, dest="dialects",
                        help="dialect to check against (repeatable; default: the 'dialects' setting)")
    _add_include_baseline(parser)


_LINT_DESCRIPTION = ("Check migration scripts against the expand/contract policy, per dialect, without a database. "
                     "Inline ignore: '# migrations-policy: ignore[CODE] reason' on the line or the line above.")

DEVELOPER_COMMANDS.append(CommandSpec(
    "lint",
    "check migration scripts against the expand/contract policy",
    _configure_lint,
    lambda args: lint_command.lint(args.paths, phase=args.phase, dialects=args.dialects, config_file=args.config,
                                   url=args.url, debug=args.debug, select=args.select, ignore=args.ignore,
                                   exit_zero=args.exit_zero, statistics=args.statistics, replay=args.replay,
                                   scratch_server=args.scratch_server, include_baseline=args.include_baseline),
    description=_LINT_DESCRIPTION,
    exit_codes=LINT_EXIT_CODES,
))
DBSYNC_COMMANDS.append(CommandSpec(
    "lint",
    "lint the project's version scripts (no database needed)",
    _configure_dbsync_lint,
    lambda args: lint_command.lint([], phase=args.phase, dialects=args.dialects, project=_project(args),
                                   include_baseline=args.include_baseline),
    description=_LINT_DESCRIPTION + " Lints every script of the alembic ini's version locations.",
    exit_codes=LINT_EXIT_CODES,
))


def _configure_notes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("start", metavar="FROM", help="the revision the previous release ended at (or base)")
    parser.add_argument("end", metavar="TO", help="the revision this release ends at (or heads)")
    parser.add_argument("-c", "--config", default=DEFAULT_ALEMBIC_INI, metavar="FILE",
                        help="the alembic ini file (default: %(default)s)")
    parser.add_argument("--format", choices=("markdown", "yaml", "json"), default="markdown",
                        help="a Markdown release-note section, reno's YAML, or JSON (default: markdown)")


def _run_notes(args: argparse.Namespace) -> commands.Result:
    from .notes import notes
    from .project import Project

    return notes(Project(args.config), args.start, args.end)


DEVELOPER_COMMANDS.append(CommandSpec(
    "notes",
    "release notes from the findings acknowledged (ignored with a reason) between two revisions",
    _configure_notes,
    _run_notes,
    description="For each revision after FROM up to TO, every '# migrations-policy: ignore[CODE] reason' is "
                "matched with the findings it silences (rule, message naming the table and the lock, "
                "dialects) and exported with its reason, as a Markdown section or reno YAML.",
))


# -- proving: rehearse, trace (migrations_policy.rehearsal, migrations_policy.trace) --------------
def _configure_rehearse(parser: argparse.ArgumentParser) -> None:
    positive_int, positive_float = _number(int), _number(float)
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
    parser.add_argument("--seconds", type=positive_float, default=5.0, help="length of each phase (default: 5)")
    parser.add_argument("--threads", type=positive_int, default=4, help="threads per release's code (default: 4)")
    parser.add_argument("--max-operations", type=positive_int, default=20_000, metavar="N",
                        help="operations per code and phase at most (default: 20000)")
    parser.add_argument("--seed-rows", type=positive_int, default=50, metavar="N",
                        help="rows release-N code writes per table before expand (default: 50)")
    parser.add_argument("--batch-size", type=positive_int, default=200, metavar="N",
                        help="data-migration batch size (default: 200)")
    parser.add_argument("--seed", type=int, help="random seed of the workload (default: random, printed)")
    parser.add_argument("--workload", metavar="MODULE:FUNCTION",
                        help="the project's own operation: FUNCTION(session, models, rng), mixed with the generic ones")
    parser.add_argument("--value", action="append", default=[], metavar="TABLE.COLUMN=VALUE",
                        help="a value the workload always writes to this column (repeatable)")
    parser.add_argument("--no-retry", action="store_true",
                        help="report deadlocks and lock waits as errors instead of retrying them like an application")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    _add_progress_options(parser)


def _configure_trace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", default=DEFAULT_ALEMBIC_INI, metavar="FILE",
                        help=f"alembic ini file of the project (default: {DEFAULT_ALEMBIC_INI})")
    parser.add_argument("--url", help="database URL (PostgreSQL or MariaDB), overrides sqlalchemy.url")
    parser.add_argument("--revision", action="append", default=[], metavar="REV",
                        help="trace these revisions instead of the pending expand ones (repeatable)")
    parser.add_argument("--contract", action="store_true",
                        help="also trace the pending contract revisions (after expand, same transaction)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


DEVELOPER_COMMANDS.extend([
    CommandSpec(
        "rehearse",
        "rehearse a rolling upgrade: release-N code runs while expand, data migrations and contract run",
        _configure_rehearse,
        lambda args: _with_progress(args, "rehearse", rehearsal_command.run),
        description="On an empty scratch database of 127.0.0.1 (or a SQLite file): build the release-N schema "
                    "(--from-revision), run release-N code (the mapped classes of --old-models, several threads: "
                    "inserts, updates, reads, each checked) while the expand revisions and the online data "
                    "migrations run, then both releases' code side by side, then contract under release-N+1 "
                    "code; report every error either code saw and every mapped column the upgrade made "
                    "incompatible.",
        exit_codes={0: "no code saw an error, nothing became incompatible",
                    1: "errors seen by release-N or release-N+1 code, a failed step, or an incompatibility",
                    2: "usage or configuration error, database unreachable, or not an empty scratch database"},
    ),
    CommandSpec(
        "trace",
        "run the pending expand revisions against a live database and report the locks and rewrites they take",
        _configure_trace,
        lambda args: trace_command.run(args),
        description="PostgreSQL: run each pending expand revision inside one transaction, statement by "
                    "statement, report the locks each took (pg_locks), the tables it rewrote (relfilenode) and "
                    "the rows it scanned, then roll back; CONCURRENTLY statements (autocommit blocks) are "
                    "reported as not run.  MariaDB: run them on a structural copy, each ALTER first with "
                    "ALGORITHM=INSTANT, then INPLACE, LOCK=NONE, and report which the server refused.  Each "
                    "statement is cross-checked with the policy knowledge base.",
        exit_codes={0: "every traced statement did what the policy says",
                    1: "a finding: a statement rewrote, scanned or locked more than the policy says",
                    2: "usage or configuration error, database unreachable, or SQLite (one line)"},
    ),
])


# -- parser construction -----------------------------------------------------
def _add_global_options(parser: argparse.ArgumentParser, default_config: str, default: object = None) -> None:
    """-c/--url/--format; *default* ``argparse.SUPPRESS`` repeats them after a subcommand's name
    without overriding what was given before it."""
    def chosen(value):
        return value if default is None else default

    parser.add_argument(
        "-c", "--config", default=chosen(default_config), metavar="FILE",
        help=f"alembic ini file of the project (default: {default_config})",
    )
    parser.add_argument("--url", default=chosen(None), help="database URL, overrides sqlalchemy.url of the ini file")
    parser.add_argument(
        "--format", choices=("text", "json"), default=chosen("text"), help="output format (default: text)"
    )
    _add_progress_options(parser, default)


def add_commands(subparsers, specs: Sequence[CommandSpec], global_options: str | None = None,
                 repeated: bool = True) -> None:
    """Add *specs* as subcommands of an argparse ``subparsers`` object.

    With *global_options* (the default config file), each subcommand also accepts ``-c/--url/--format``
    after its name; *repeated*: the main parser has them too (``dbsync --format json status`` and
    ``dbsync status --format json``; given after the name, they win).
    """
    for spec in specs:
        parser = subparsers.add_parser(
            spec.name, help=spec.help, description=spec.description or spec.help
        )
        if isinstance(parser, _ArgumentParser):
            parser.usage_exit_code = spec.usage_exit_code
        if global_options is not None:
            _add_global_options(parser, global_options, default=argparse.SUPPRESS if repeated else None)
        spec.configure(parser)
        parser.set_defaults(_mp_command=spec)


def add_dbsync_commands(subparsers, default_config: str = DEFAULT_ALEMBIC_INI) -> None:
    """Mount the dbsync subcommands (and their -c/--url/--format options) in another CLI."""
    add_commands(subparsers, DBSYNC_COMMANDS, global_options=default_config, repeated=False)


def build_dbsync_parser(prog: str = "dbsync", default_config: str = DEFAULT_ALEMBIC_INI) -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=prog,
        description="Operator commands for rolling upgrades: expand, online data migrations, contract.",
    )
    _add_global_options(parser, default_config)
    parser.add_argument("--version", action="version", version=f"%(prog)s (migrations_policy {__version__})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    add_commands(sub, DBSYNC_COMMANDS, global_options=default_config)
    return parser


def build_developer_parser(prog: str = "migrations-policy") -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=prog,
        description="Developer and CI commands: lint migration scripts, set up an expand/contract environment.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    add_commands(sub, DEVELOPER_COMMANDS)
    return parser


# -- running -----------------------------------------------------------------
#: A command line a message suggests: "dbsync -c FILE online_data_migrations", "dbsync upgrade --contract".
_SUGGESTED_COMMAND = re.compile(r"(?<![\w.-])dbsync(?= (?:-c |--config |upgrade|online_data_migrations|status|"
                                r"check|stamp|version|revision|lint)\b)")


def _for_reader(text: str, prog: str) -> str:
    """What a person reads: passwords masked, and the commands it suggests named as this program
    (``myproject-dbsync upgrade --contract`` when embedded), wherever the text was written."""
    text = mask_text(text)
    return text if prog in ("dbsync", "migrations-policy") else _SUGGESTED_COMMAND.sub(prog, text)


def _print_result(result: commands.Result, fmt: str, prog: str = "dbsync") -> None:
    output = result.render(fmt)
    if output:
        print(_for_reader(output, prog))
        sys.stdout.flush()


def _stdout_closed() -> None:
    """The reader of stdout went away (``dbsync status | head``): nothing left to say, no traceback.
    stdout is pointed at /dev/null so that the interpreter's final flush does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (embedded, tests)
        pass


def run_parsed(args: argparse.Namespace, prog: str = "dbsync") -> int:
    """Run a parsed command and return its exit code; user errors become one line on stderr."""
    spec: CommandSpec | None = getattr(args, "_mp_command", None)
    if spec is None:
        print(f"{prog}: error: a command is required (see {prog} --help)", file=sys.stderr)
        return 2
    try:
        result = spec.run(args)
    except PolicyError as exc:
        print(f"{prog}: error: {_for_reader(exc.message, prog)}", file=sys.stderr)
        return exc.exit_code
    except configparser.Error as exc:  # only the user's own ini files get here (e.g. bad %(...)s)
        print(f"{prog}: error: {getattr(args, 'config', None) or 'config'}: {mask_text(_first_line(exc))}",
              file=sys.stderr)
        return 2
    except _alembic_errors() as exc:  # alembic's own user errors (its CLI prints them as one line too)
        print(f"{prog}: error: alembic: {mask_text(_first_line(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:
        # the project's own code (a script at import, a data-migration module or function, a
        # model module) raised or called sys.exit(): one line; sys.exit(0) is never "success"
        if not project_code.stopped_by_project(exc):
            raise  # raised by the libraries alone (ours included): a bug, with its traceback
        print(f"{prog}: error: {_for_reader(project_code.describe(exc), prog)} (the project's code stopped "
              f"`{prog} {spec.name}`)", file=sys.stderr)
        return 2
    try:
        _print_result(result, getattr(args, "format", "text"), prog)
    except BrokenPipeError:
        _stdout_closed()
    return result.exit_code


def _alembic_errors() -> tuple[type[BaseException], ...]:
    """alembic's CommandError if alembic is imported (``lint`` never imports it)."""
    module = sys.modules.get("alembic.util.exc")
    return (module.CommandError,) if module is not None else ()


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        message = mask_text(exc.message.removeprefix(parser.prog + ": "))
        print(f"{parser.prog}: error: {message} (see {parser.prog} --help)", file=sys.stderr)
        return exc.exit_code
    return run_parsed(args, prog=parser.prog)


#: The parser class of the commands' subparsers (argument errors become one-line UsageErrors).
ArgumentParser = _ArgumentParser


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse *argv* with *parser* (a project's own CLI in which ``add_dbsync_commands`` mounted the
    commands) and run the command: one line and an exit code for every user error."""
    return _main(parser, argv)


def dbsync_main(
    argv: Sequence[str] | None = None, prog: str = "dbsync", default_config: str = DEFAULT_ALEMBIC_INI
) -> int:
    """Entry point of ``dbsync`` (and of a project's own ``myproject-dbsync``)."""
    return _main(build_dbsync_parser(prog, default_config), argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``migrations-policy``."""
    return _main(build_developer_parser(), argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
