"""The developer's commands (``migrations-policy``): init, check-models, lint, notes, rehearse and
trace, and the two of them ``dbsync`` carries too (revision, lint)."""

from __future__ import annotations

import argparse

from migrations_policy.core.config import DEFAULT_ALEMBIC_INI, DIALECTS, PHASES
from migrations_policy.core.errors import UsageError

from migrations_policy.cli.base import (COMMON_EXIT_CODES, CommandSpec, _add_progress_options, _number,
                                        _project, _with_progress, commands, lint_command, rehearsal_command,
                                        trace_command)

DEVELOPER_COMMANDS: list[CommandSpec] = []
DBSYNC_ALSO: list[CommandSpec] = []  # developer commands dbsync carries too


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
    from migrations_policy.commands import authoring

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
    from migrations_policy.commands import authoring

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

DBSYNC_ALSO.append(CommandSpec(
    "revision",
    "autogenerate a revision, split into an expand and a contract script",
    _configure_revision,
    lambda args: commands.revision(_project(args), args.message, rev_id=args.rev_id),
    description="Compare the models with the database (which must be at head) and write "
                "versions/expand/..._MSG.py and versions/contract/..._MSG.py (an empty phase writes no file), "
                "plus a module of data-migration stubs when the change needs one.",
    exit_codes={**COMMON_EXIT_CODES,
                1: "the expand/contract split refuses a change (every reason printed, one a line; nothing written)"},
))


# -- lint (migrations-policy lint, dbsync lint) ----------------------------------
LINT_FORMATS = ("text", "json", "github", "sarif", "junit")
LINT_EXIT_CODES = {0: "no error findings (warnings allowed)", 1: "at least one error finding",
                   2: "usage or settings error (one line: a baseline that is no revision, a bad glob, an unknown "
                      "rule code in the settings or in --select / --ignore, a lint_plugins module that cannot be imported; a --replay database that is not "
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
    parser.add_argument("-j", "--jobs", type=_number(int), metavar="N",
                        help="scripts analysed at once (default: $MIGRATIONS_POLICY_LINT_JOBS, else the CPUs "
                             "this process may use)")
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
                                   scratch_server=args.scratch_server, include_baseline=args.include_baseline,
                                   jobs=args.jobs),
    description=_LINT_DESCRIPTION,
    exit_codes=LINT_EXIT_CODES,
))
DBSYNC_ALSO.append(CommandSpec(
    "lint",
    "lint the project's version scripts (no database needed)",
    _configure_dbsync_lint,
    lambda args: lint_command.lint([], phase=args.phase, dialects=args.dialects, project=_project(args),
                                   include_baseline=args.include_baseline),
    description=_LINT_DESCRIPTION + " Lints every script of the alembic ini's version locations.",
    exit_codes=LINT_EXIT_CODES,
))


def _configure_rule(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", metavar="CODE", help="a rule code, e.g. MP104")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


DEVELOPER_COMMANDS.append(CommandSpec(
    "rule",
    "print a lint rule's page: what it flags, why, an example and what to do instead",
    _configure_rule,
    lambda args: lint_command.rule(args.code),
    description="The page of rule CODE, as docs/rules/CODE.rst is generated from it.",
    exit_codes={0: "the page was printed", 2: "unknown rule code (one line)"},
))


def _configure_notes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("start", metavar="FROM", help="the revision the previous release ended at (or base)")
    parser.add_argument("end", metavar="TO", help="the revision this release ends at (or heads)")
    parser.add_argument("-c", "--config", default=DEFAULT_ALEMBIC_INI, metavar="FILE",
                        help="the alembic ini file (default: %(default)s)")
    parser.add_argument("--format", choices=("markdown", "yaml", "json"), default="markdown",
                        help="a Markdown release-note section, reno's YAML, or JSON (default: markdown)")


def _run_notes(args: argparse.Namespace) -> commands.Result:
    from migrations_policy.lifecycle.notes import notes
    from migrations_policy.core.project import Project

    return notes(Project(args.config), args.start, args.end)


DEVELOPER_COMMANDS.append(CommandSpec(
    "notes",
    "release notes from the findings acknowledged (ignored with a reason) between two revisions",
    _configure_notes,
    _run_notes,
    description="For each revision after FROM up to TO, every '# migrations-policy: ignore[CODE] reason' is "
                "matched with the findings it silences (rule, message naming the table and the lock, "
                "dialects) and exported with its reason, as a Markdown section or reno YAML; so is each "
                "decision a revision records to drop data no migration moves (drops_data).",
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


