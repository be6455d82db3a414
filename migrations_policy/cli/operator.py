"""The operator's commands (``dbsync``): upgrade, stamp, status, check, rollback, plan, online data
migrations and prune."""

from __future__ import annotations

import argparse
import sys

from migrations_policy.cli.base import (COMMON_EXIT_CODES, CommandSpec, _add_force_options, _force_reason, _number,
                                        _progress, _project, _revision_id, commands)
from migrations_policy.core.config import CONTRACT, EXPAND


def _no_args(parser: argparse.ArgumentParser) -> None:
    pass


def _configure_upgrade(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--expand", action="store_true", help="apply only the expand heads")
    group.add_argument("--contract", action="store_true", help="apply only the contract heads (through the gate)")
    _add_force_options(parser, "apply contract even though the gate refuses")


def _run_upgrade(args: argparse.Namespace) -> commands.Result:
    phases = (EXPAND,) if args.expand else (CONTRACT,) if args.contract else (EXPAND, CONTRACT)
    with _progress(args, "upgrade"):
        return commands.upgrade(_project(args), phases=phases, force=_force_reason(args, "upgrade"))


def _configure_stamp(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("revisions", nargs="+", type=_revision_id, metavar="REVISION",
                        help="revision(s) to record as applied")
    parser.add_argument("--purge", action="store_true", help="empty the version table first")
    _add_force_options(parser, "stamp a revision whose data migrations are not complete")


def _configure_rollback(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the plan (revisions, drops, rows at risk) "
                                                               "and change nothing")
    parser.add_argument("--to", type=_revision_id, metavar="REV", default=None,
                        help="revert every revision applied above REV instead of the last release (never past a "
                             "contract that ran, never to the root)")
    _add_force_options(parser, "drop even the rows whose only copy is in a dropped column or table")


#: Exit 8 of the commands that run schema revisions.
MIGRATION_FAILED = ("a revision failed while it ran (the database refused a statement, a lock wait gave up after "
                    "every retry, or the script raised): its own statements rolled back or are journaled (the "
                    "rerun resumes), the revisions before it stay applied; one line names the revision")


OPERATOR_COMMANDS: list[CommandSpec] = [
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
                       "what is gone",
                    8: MIGRATION_FAILED},
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
        "current",
        "the revisions the database records, each with its phase (like alembic current)",
        _no_args,
        lambda args: commands.current(_project(args)),
        description="The revisions alembic's version table records, as alembic current prints them, each "
                    "followed by its phase: [expand] or [contract]; (head) marks a branch's head.",
    ),
    CommandSpec(
        "history",
        "every revision, newest first, with its phase (like alembic history)",
        lambda parser: parser.add_argument(
            "--offline", action="store_true",
            help="do not read the database (no applied / current marks)"),
        lambda args: commands.history(_project(args), offline=args.offline),
        description="Every revision script, newest first, as alembic history prints it (down -> revision "
                    "(head), message), followed by its phase: [expand] or [contract]. (current) marks "
                    "the revisions the database records; the JSON also says which are applied.",
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
        "revert the last release's expand revisions (before its contract runs)",
        _configure_rollback,
        lambda args: commands.rollback(_project(args), dry_run=args.dry_run, force=_force_reason(args, "rollback"),
                                       to=args.to),
        description="Undoes the last upgrade: reverts, newest first, the expand revisions of the last release "
                    "recorded in migrations_policy_releases whose contract has not run (--to REV: every revision "
                    "above REV), through env.py with the same lock timeouts and retries as upgrade, then forgets "
                    "the ledger entries of the data migrations whose table or columns went with them. Never past "
                    "a contract that ran, never to the root. Each statement that destroys rows (alembic "
                    "operations and raw SQL alike) counts the rows whose only copy it holds under its table's "
                    "lock, as it runs, and is refused unless --force.",
        exit_codes={**COMMON_EXIT_CODES,
                    4: "refused: the release's contract has run, the release installed the schema, no release is "
                       "recorded (use --to), or rows would be lost (use --force), "
                       "or an expand revision is partly applied (finish it with upgrade --expand), "
                       "or env.py is not wired to the gate",
                    8: MIGRATION_FAILED},
    ),
]


def _configure_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-lock-seconds", type=_number(float, allow_zero=True), metavar="SECONDS",
                        help="exit 6 if any statement would hold a blocking lock longer than this (estimated), "
                             "or for a time that cannot be estimated")


OPERATOR_COMMANDS.append(CommandSpec(
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
    from migrations_policy.data.walk.report import choose_progress

    progress = choose_progress(getattr(args, "progress", "auto"), sys.stderr, getattr(args, "progress_interval", 5.0))
    return commands.online_data_migrations(
        _project(args), batch_size=args.batch_size, batch_seconds=args.batch_seconds, max_count=args.max_count, sleep=args.sleep,
        workers=args.workers, migrations=args.migration, options=args.option, progress=progress,
        exact=args.exact,
    )


OPERATOR_COMMANDS.append(CommandSpec(
    "online_data_migrations",
    "migrate data in batches while the old release keeps running",
    _configure_online_data_migrations,
    _run_online_data_migrations,
    description="Run the declared online data migrations in batches, one transaction per batch, "
                "and print what each did and what remains (counted live). Safe to rerun, to interrupt, "
                "and to run twice at once.",
    exit_codes={
        0: "every data migration is complete",
        1: "work remains: a walk stopped before its end (--max-count): run again",
        2: "invalid arguments (unknown option, bad value), a configuration error, or an unreachable database "
           "(one line on stderr): nothing runs",
        3: "caught up: every walk reached its end, but rows written behind it meanwhile remain (code of the "
           "previous release still running); stop that code, then a final run exits 0",
        8: "a data migration failed or left stuck rows (the others still ran; the summary names it)",
        130: "interrupted (Ctrl-C or SIGTERM): the batch in progress rolled back, the ledger says interrupted",
    },
))


def _configure_prune(parser: argparse.ArgumentParser) -> None:
    _configure_online_data_migrations(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="count, per prune, the rows a run would delete now and those it would keep "
                             "(referenced); delete nothing, lock no row (a count as of the read)")


def _run_prune(args: argparse.Namespace) -> commands.Result:
    from migrations_policy.data.walk.report import choose_progress

    if args.dry_run:
        return commands.prune(_project(args), dry_run=True, migrations=args.migration)

    progress = choose_progress(getattr(args, "progress", "auto"), sys.stderr, getattr(args, "progress_interval", 5.0),
                               label="prune")
    return commands.prune(
        _project(args), batch_size=args.batch_size, batch_seconds=args.batch_seconds, max_count=args.max_count,
        sleep=args.sleep, workers=args.workers, migrations=args.migration, options=args.option, progress=progress,
        exact=args.exact,
    )


OPERATOR_COMMANDS.append(CommandSpec(
    "prune",
    "delete the rows the project declares prunable, in batches, children first",
    _configure_prune,
    _run_prune,
    description="Delete the rows of each Prune declared in the data_migrations modules (soft-deleted before a "
                "date, say), optionally copying them to a shadow table first, on the data-migration runner: "
                "the same batches, throttling, ledger, report and exit codes; --migration selects prunes by "
                "name. Rows another table still references are kept and reported.",
    exit_codes={
        0: "every prune is complete (--dry-run: counted)",
        1: "--max-count reached and rows remain: run again",
        2: "invalid arguments, a configuration error, or an unreachable database (one line on stderr): "
           "nothing runs",
        3: "caught up: every walk reached its end, but rows became prunable behind it meanwhile: run again later",
        8: "a prune failed (the others still ran; the summary names it)",
        130: "interrupted (Ctrl-C or SIGTERM): the batch in progress rolled back, the ledger says interrupted",
    },
))


#: Commands of the developer / CI tool (``migrations-policy``).
