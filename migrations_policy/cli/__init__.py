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

from migrations_policy.cli.base import CommandSpec
from migrations_policy.cli.shell import (DBSYNC_COMMANDS, DEVELOPER_COMMANDS, ArgumentParser, add_commands,
                                         add_dbsync_commands, build_dbsync_parser, build_developer_parser,
                                         dbsync_main, main, run, run_parsed)

__all__ = ["ArgumentParser", "CommandSpec", "DBSYNC_COMMANDS", "DEVELOPER_COMMANDS", "add_commands",
           "add_dbsync_commands", "build_dbsync_parser", "build_developer_parser", "dbsync_main", "main", "run",
           "run_parsed"]
