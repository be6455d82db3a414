"""Reference docs generated from the code: ``.. mp-cli:: dbsync`` (the argparse parsers),
``.. mp-commands:: dbsync`` (the quickstart's one-line-per-command list) and ``.. mp-settings::``
(the Settings dataclass).

Each subcommand gets a section with its ``--help`` text and its exit codes
(``CommandSpec.exit_codes``), so the reference cannot drift from the code; the quickstart's list
reads the same tables (``cli.DBSYNC_COMMANDS``, ``cli.DEVELOPER_COMMANDS``), so a command added
there is listed without editing a page.
"""

from __future__ import annotations

from typing import NamedTuple

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes

from migrations_policy import cli


def _section(title: str, ident: str) -> nodes.section:
    section = nodes.section(ids=[ident])
    section += nodes.title(text=title)
    return section


def _table(widths: tuple[int, ...], header: tuple[str, ...], rows: list[tuple[str, ...]]) -> nodes.table:
    """A docutils table with one header row."""
    table = nodes.table()
    group = nodes.tgroup(cols=len(widths))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head, body = nodes.thead(), nodes.tbody()
    group += head
    group += body
    for target, cells in [(head, header)] + [(body, row) for row in rows]:
        row_node = nodes.row()
        for cell_text in cells:
            entry = nodes.entry()
            entry += nodes.paragraph(text=cell_text)
            row_node += entry
        target += row_node
    return table


def _exit_code_table(codes: dict[int, str]) -> nodes.table:
    return _table((10, 70), ("exit code", "meaning"), [(str(c), m) for c, m in sorted(codes.items())])


def _help_block(text: str) -> nodes.literal_block:
    """argparse's help as plain text (not highlighted as Python, the default language)."""
    block = nodes.literal_block(text=text)
    block["language"] = "text"
    return block


TOOLS = ("dbsync", "migrations-policy")


def _specs(tool: str):
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}: one of {', '.join(TOOLS)}")
    return cli.DBSYNC_COMMANDS if tool == "dbsync" else cli.DEVELOPER_COMMANDS


def _anchor(tool: str, name: str) -> str:
    """The id of a command's section in the CLI reference (``dbsync-online-data-migrations``)."""
    return f"{tool}-{name}".replace("_", "-")


class CommandRow(NamedTuple):
    name: str
    aliases: tuple[str, ...]
    help: str
    anchor: str


def command_rows(tool: str) -> list[CommandRow]:
    """One row per subcommand of *tool*, in the parser's order, read from the command table when
    called (never copied)."""
    return [CommandRow(spec.name, tuple(getattr(spec, "aliases", ())), spec.help, _anchor(tool, spec.name))
            for spec in _specs(tool)]


class CommandsDirective(Directive):
    """``.. mp-commands:: dbsync`` — a definition list: each command (a link to its section of the
    CLI reference), its aliases, and its one-line help."""

    required_arguments = 1

    def run(self):
        tool = self.arguments[0]
        try:
            rows = command_rows(tool)
        except ValueError as exc:
            raise self.error(str(exc)) from None
        listing = nodes.definition_list(classes=["mp-commands"])
        for row in rows:
            term = nodes.term()
            link = addnodes.pending_xref("", refdomain="std", reftype="ref", reftarget=row.anchor,
                                         refexplicit=True, refwarn=True)
            link += nodes.literal(text=f"{tool} {row.name}")
            term += link
            if row.aliases:
                term += nodes.Text(" (also " + ", ".join(row.aliases) + ")")
            item = nodes.definition_list_item()
            item += term
            definition = nodes.definition()
            definition += nodes.paragraph(text=row.help)
            item += definition
            listing += item
        return [listing]


class CliDirective(Directive):
    required_arguments = 1

    def run(self):
        tool = self.arguments[0]
        if tool == "dbsync":
            parser, specs = cli.build_dbsync_parser(), cli.DBSYNC_COMMANDS
        else:
            parser, specs = cli.build_developer_parser(), cli.DEVELOPER_COMMANDS
        result = [_help_block(parser.format_help())]
        subparsers = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
        for spec in specs:
            section = _section(f"{tool} {spec.name}", _anchor(tool, spec.name))
            # a label (:ref:`dbsync-plan`): the quickstart's list links here, and a command it
            # lists without a section here fails the build (-W)
            section["names"].append(_anchor(tool, spec.name))
            self.state.document.note_explicit_target(section)
            section += nodes.paragraph(text=spec.description or spec.help)
            section += _help_block(subparsers.choices[spec.name].format_help())
            section += _exit_code_table(spec.exit_codes)
            result.append(section)
        return result


class SettingsDirective(Directive):
    """``.. mp-settings::`` — every key of ``config.Settings``: name, default, its ``#:`` comment."""

    def run(self):
        import dataclasses
        import inspect
        import re

        from migrations_policy.core import config

        source = inspect.getsource(config.Settings)
        docs = dict((name, doc) for doc, name in re.findall(r"#: (.+)\n\s+(\w+):", source))
        defaults = config.Settings()
        rows = [(f.name, _default_text(getattr(defaults, f.name)), docs.get(f.name, ""))
                for f in dataclasses.fields(config.Settings)]
        return [_table((20, 25, 55), ("key", "default", "meaning"), rows)]


def _default_text(value) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "(none)"
    if isinstance(value, dict):
        return "(none)" if not value else ", ".join(f"{k} = {v}" for k, v in value.items())
    return str(value) if value != "" else "(none)"


def setup(app):
    app.add_directive("mp-cli", CliDirective)
    app.add_directive("mp-commands", CommandsDirective)
    app.add_directive("mp-settings", SettingsDirective)
    return {"parallel_read_safe": True}
