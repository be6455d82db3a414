"""Building the two parsers from the command tables, and running a parsed command: every user error
is one line on stderr and a documented exit code."""

from __future__ import annotations

import argparse
import configparser
import re
import sys
from typing import Sequence

from migrations_policy import __version__
from migrations_policy.core import project_code
from migrations_policy.core.urls import mask_text
from migrations_policy.core.config import _first_line
from migrations_policy.core.config import DEFAULT_ALEMBIC_INI
from migrations_policy.core.errors import PolicyError, UsageError, interrupt_behind

from migrations_policy.cli.base import (CommandSpec, _ArgumentParser, _add_progress_options, commands)
from migrations_policy.cli.operator import OPERATOR_COMMANDS
from migrations_policy.cli.developer import DEVELOPER_COMMANDS, DBSYNC_ALSO

DBSYNC_COMMANDS = OPERATOR_COMMANDS + DBSYNC_ALSO

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
        hyphen = spec.name.replace("_", "-")  # online-data-migrations: the spelling of every modern CLI
        parser = subparsers.add_parser(
            spec.name, help=spec.help, description=spec.description or spec.help,
            aliases=[hyphen] if hyphen != spec.name else [],
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


def _run_interruptible(spec: CommandSpec, args: argparse.Namespace) -> commands.Result:
    """*spec*'s command; an error raised while an interrupt was being handled (a cleanup step
    failing on the connection the interrupt invalidated) is that interrupt: exit 130, one line."""
    try:
        return spec.run(args)
    except Exception as exc:
        interrupt = interrupt_behind(exc)
        if interrupt is not None:
            raise interrupt from None
        raise


def run_parsed(args: argparse.Namespace, prog: str = "dbsync") -> int:
    """Run a parsed command and return its exit code; user errors become one line on stderr."""
    spec: CommandSpec | None = getattr(args, "_mp_command", None)
    if spec is None:
        print(f"{prog}: error: a command is required (see {prog} --help)", file=sys.stderr)
        return 2
    try:
        result = _run_interruptible(spec, args)
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
        from migrations_policy.core import framework_tables  # (imports SQLAlchemy: only once something failed)

        refusal = framework_tables.refusal(exc) if isinstance(exc, _database_errors()) else None
        if refusal is not None:  # a framework table of another shape: bad input, named
            print(f"{prog}: error: {mask_text(refusal)}", file=sys.stderr)
            return 2
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


def _database_errors() -> tuple[type[BaseException], ...]:
    """SQLAlchemy's error of a statement the database refused, if SQLAlchemy is imported."""
    module = sys.modules.get("sqlalchemy.exc")
    return (module.DBAPIError,) if module is not None else ()


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
