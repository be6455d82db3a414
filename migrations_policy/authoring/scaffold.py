"""``migrations-policy init``: an alembic environment in the expand/contract layout.

``init(DIR)`` renders a template of ``alembic_templates/`` (installed as
``migrations_policy/templates``) with alembic's own ``init``, then creates what
alembic's init cannot: ``versions/expand`` and ``versions/contract`` and the two
root revisions, ``expand_root`` (label ``expand``) and ``contract_root`` (label
``contract``, depending on ``expand_root``).  Their bodies come from the
template's ``roots/*.py.mako``.

``adopt(alembic_ini)`` converts an existing single-branch history: both roots
start at the current head, the two directories are added to
``version_locations``, and env.py is checked for ``configure_options``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from alembic import command as alembic_command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from mako.template import Template

from ..result import Result
from ..errors import ConfigError, UsageError

DEFAULT_TEMPLATE = "expand_contract"
EXPAND_ROOT, CONTRACT_ROOT = "expand_root", "contract_root"


def template_root() -> Path:
    """The installed templates (``migrations_policy/templates``), else the source checkout's."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "templates", package.parent / "alembic_templates"):
        if (candidate / DEFAULT_TEMPLATE).is_dir():
            return candidate
    raise ConfigError(f"migrations_policy templates not found next to {package}")


def list_templates() -> list[str]:
    root = template_root()
    return sorted(p.name for p in root.iterdir() if (p / "README").is_file())


class _TemplateConfig(Config):
    """An alembic Config reading our templates (what Flask-Migrate does too)."""

    def get_template_directory(self) -> str:
        return str(template_root())


@dataclass
class InitResult(Result):
    directory: str = ""
    config_file: str = ""
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"directory": self.directory, "config_file": self.config_file, "created": self.created,
                "notes": self.notes}

    def text(self) -> str:
        lines = [f"created {path}" for path in self.created] + self.notes
        return "\n".join(lines)


def _render_root(template: Path, path: Path, **values: Any) -> None:
    text = Template(filename=str(template)).render(create_date=datetime.now().replace(microsecond=0), **values)
    path.write_text(text, encoding="utf-8")


def _write_roots(template_dir: Path, versions: Path, down_revision: str | None) -> list[str]:
    created = []
    for phase, revision, depends_on in (("expand", EXPAND_ROOT, None), ("contract", CONTRACT_ROOT, EXPAND_ROOT)):
        directory = versions / phase
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"0000_{revision}.py"
        if target.exists():
            raise UsageError(f"{target} already exists")
        _render_root(template_dir / "roots" / f"{revision}.py.mako", target, revision=revision,
                     down_revision=down_revision, depends_on=depends_on)
        created.append(str(target))
    return created


def init(directory: str, *, template: str = DEFAULT_TEMPLATE, config_file: str = "alembic.ini") -> InitResult:
    """Create an expand/contract alembic environment in *directory* (and *config_file*)."""
    if template not in list_templates():
        raise UsageError(f"unknown template {template!r} (available: {', '.join(list_templates())})")
    ini_existed = Path(config_file).exists()
    config = _TemplateConfig(config_file, cmd_opts=argparse.Namespace(quiet=True))
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # alembic's "Generating ..." lines: we list them
            alembic_command.init(config, directory, template=template)
    except CommandError as exc:
        raise UsageError(f"alembic: {exc}") from None
    root = Path(directory)
    created = [str(root / name) for name in sorted(os.listdir(root)) if (root / name).is_file()]
    if not ini_existed:
        created.insert(0, config_file)
    created += _write_roots(template_root() / template, root / "versions", None)
    notes = ["next: set sqlalchemy.url in " + config_file + " and target_metadata in " + str(root / "env.py")]
    if ini_existed:
        notes.insert(0, f"{config_file} already exists and was left alone: set its script_location to {directory} "
                        "and version_locations to its versions/expand and versions/contract")
    return InitResult(directory=str(root), config_file=config_file, created=created, notes=notes)


# -- adopt ------------------------------------------------------------------------
_SEPARATORS = {"space": " ", "os": os.pathsep, ":": ":", ";": ";", "newline": "\n"}


def adopt(config_file: str = "alembic.ini", *, template: str = DEFAULT_TEMPLATE) -> InitResult:
    """Start the expand and contract branches at the current head of a single-branch history."""
    path = Path(config_file)
    if not path.is_file():
        raise ConfigError(f"{config_file}: alembic config file not found (use -c/--config)")
    config = Config(str(path))
    try:
        script = ScriptDirectory.from_config(config)
        heads = script.get_heads()
        labels = {label for rev in script.walk_revisions() for label in (rev.branch_labels or ())}
    except CommandError as exc:
        raise UsageError(f"{config_file}: {exc}") from None
    if {"expand", "contract"} & labels:
        raise UsageError(f"{config_file}: the history already has expand/contract branch labels")
    if len(heads) > 1:
        raise UsageError(f"{config_file}: the history has {len(heads)} heads ({', '.join(heads)}); "
                         "merge them first (alembic merge heads)")
    head = heads[0] if heads else None
    versions = Path(script.dir) / "versions"
    created = _write_roots(template_root() / template, versions, head)
    _add_version_locations(path, config, [versions / "expand", versions / "contract"])
    notes = [f"updated version_locations in {config_file}",
             f"both branches start at {head or 'base'}; run `alembic upgrade heads` (or dbsync upgrade) to apply "
             "the two roots"]
    env_py = Path(script.dir) / "env.py"
    if env_py.is_file() and "configure_options" not in env_py.read_text(encoding="utf-8"):
        notes.append(f"edit {env_py}: pass **migrations_policy.environment.configure_options(context) to every "
                     "context.configure(...) call (see the expand_contract template's env.py)")
    notes.append("copy the expand_contract template's script.py.mako to get requires_data_migrations "
                 "rendered next to depends_on (optional)")
    return InitResult(directory=script.dir, config_file=config_file, created=created, notes=notes)


def _add_version_locations(ini: Path, config: Config, new: list[Path]) -> None:
    """Append *new* to ``version_locations`` in the ini file, keeping the rest of the file as it is."""
    section = config.config_ini_section
    existing = config.get_main_option("version_locations")
    here = ini.resolve().parent
    rendered = []
    for location in new:
        try:
            rendered.append("%(here)s/" + location.resolve().relative_to(here).as_posix())
        except ValueError:
            rendered.append(location.resolve().as_posix())
    separator_name = config.get_main_option("path_separator") or config.get_main_option("version_path_separator")
    separator = _SEPARATORS.get(separator_name or "space", " ")
    raw = _raw_option(ini, section, "version_locations")
    if existing is None or raw is None:
        script_location = _raw_option(ini, section, "script_location") or "%(here)s"
        values = [script_location.rstrip("/") + "/versions"] + rendered
    else:
        values = [raw.strip()] + rendered
    _set_option(ini, section, "version_locations", separator.join(values))


def _raw_option(ini: Path, section: str, key: str) -> str | None:
    current = None
    for line in ini.read_text(encoding="utf-8").splitlines():
        header = re.match(r"^\s*\[(.+)\]\s*$", line)
        if header:
            current = header.group(1).strip()
            continue
        match = re.match(rf"^\s*{re.escape(key)}\s*[=:]\s*(.*)$", line)
        if match and current == section:
            return match.group(1)
    return None


def _set_option(ini: Path, section: str, key: str, value: str) -> None:
    lines = ini.read_text(encoding="utf-8").splitlines()
    current, section_end, done = None, None, False
    for index, line in enumerate(lines):
        header = re.match(r"^\s*\[(.+)\]\s*$", line)
        if header:
            if current == section and section_end is None:
                section_end = index
            current = header.group(1).strip()
            continue
        if current == section and re.match(rf"^\s*{re.escape(key)}\s*[=:]", line):
            lines[index] = f"{key} = {value}"
            done = True
    if not done:
        if current == section and section_end is None:
            section_end = len(lines)
        if section_end is None:
            raise ConfigError(f"{ini}: no [{section}] section")
        lines.insert(section_end, f"{key} = {value}")
    ini.write_text("\n".join(lines) + "\n", encoding="utf-8")
