"""``.. mp-cli:: dbsync`` — the command-line reference, generated from the argparse parsers.

Each subcommand gets a section with its ``--help`` text and its exit codes
(``CommandSpec.exit_codes``), so the reference cannot drift from the code.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive

from migrations_policy import cli


def _section(title: str, ident: str) -> nodes.section:
    section = nodes.section(ids=[ident])
    section += nodes.title(text=title)
    return section


def _exit_code_table(codes: dict[int, str]) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=2)
    table += group
    group += nodes.colspec(colwidth=10)
    group += nodes.colspec(colwidth=70)
    head, body = nodes.thead(), nodes.tbody()
    group += head
    group += body
    for target, cells in ((head, ("exit code", "meaning")),) + tuple(
        (body, (str(code), meaning)) for code, meaning in sorted(codes.items())
    ):
        row = nodes.row()
        for cell_text in cells:
            entry = nodes.entry()
            entry += nodes.paragraph(text=cell_text)
            row += entry
        target += row
    return table


class CliDirective(Directive):
    required_arguments = 1

    def run(self):
        tool = self.arguments[0]
        if tool == "dbsync":
            parser, specs = cli.build_dbsync_parser(), cli.DBSYNC_COMMANDS
        else:
            parser, specs = cli.build_developer_parser(), cli.DEVELOPER_COMMANDS
        result = [nodes.literal_block(text=parser.format_help())]
        subparsers = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
        for spec in specs:
            section = _section(f"{tool} {spec.name}", f"{tool}-{spec.name}".replace("_", "-"))
            section += nodes.paragraph(text=spec.description or spec.help)
            section += nodes.literal_block(text=subparsers.choices[spec.name].format_help())
            section += _exit_code_table(spec.exit_codes)
            result.append(section)
        return result


def setup(app):
    app.add_directive("mp-cli", CliDirective)
    return {"parallel_read_safe": True}
