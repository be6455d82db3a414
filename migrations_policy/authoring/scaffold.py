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

from migrations_policy.core.result import Result
from migrations_policy.core.errors import ConfigError, UsageError

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


def init(directory: str, *, template: str = DEFAULT_TEMPLATE, config_file: str = "alembic.ini",
         url: str | None = None, metadata: str | None = None) -> InitResult:
    """Create an expand/contract alembic environment in *directory* (and *config_file*).

    *url* is written as ``sqlalchemy.url`` of a new ini file, *metadata* (``MODULE:ATTRIBUTE``, e.g.
    ``myapp.models:Base.metadata``) as env.py's ``target_metadata``: then autogenerate works at once.
    """
    module, _, attribute = (metadata or "").partition(":")
    if metadata is not None and not (module.strip() and attribute.strip()):
        raise UsageError(f"--metadata {metadata!r}: expected MODULE:ATTRIBUTE, e.g. myapp.models:Base.metadata")
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
    todo = []
    if url is not None and not ini_existed:
        _set_option(Path(config_file), "alembic", "sqlalchemy.url", url.replace("%", "%%"))
    elif not ini_existed:
        todo.append("set sqlalchemy.url in " + config_file)
    if metadata is not None:
        _set_target_metadata(root / "env.py", module.strip(), attribute.strip())
    else:
        todo.append("set target_metadata in " + str(root / "env.py"))
    todo.append("run `dbsync upgrade` (applies the two root revisions; autogenerate needs an up-to-date database)")
    notes = ["next: " + "; ".join(todo)]
    if ini_existed:
        notes.insert(0, f"{config_file} already exists and was left alone: set its script_location to {directory} "
                        "and version_locations to its versions/expand and versions/contract")
    return InitResult(directory=str(root), config_file=config_file, created=created, notes=notes)


def _set_target_metadata(env_py: Path, module: str, attribute: str) -> None:
    """Point env.py's ``target_metadata`` at ``module.attribute`` (the template's placeholder line)."""
    text = env_py.read_text(encoding="utf-8")
    head, dot, rest = attribute.partition(".")
    line = f"from {module} import {head}  # noqa: E402\ntarget_metadata = {head}{dot}{rest}\n"
    if "\ntarget_metadata = None\n" not in text:
        raise UsageError(f"{env_py}: no 'target_metadata = None' line to replace: set target_metadata yourself")
    env_py.write_text(text.replace("\ntarget_metadata = None\n", "\n" + line, 1), encoding="utf-8")


# -- adopt ------------------------------------------------------------------------
_SEPARATORS = {"space": " ", "os": os.pathsep, ":": ":", ";": ";", "newline": "\n"}


def adopt(config_file: str = "alembic.ini", *, template: str = DEFAULT_TEMPLATE) -> InitResult:
    """Start the expand and contract branches at the current head of a single-branch history."""
    from migrations_policy.core.project import _config_path, open_alembic_config

    path = _config_path(Path(config_file))
    config = open_alembic_config(path)
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
    toml = getattr(config, "_toml_file_path", None)
    if toml is not None and config.get_main_option("version_locations") is None:
        _add_toml_version_locations(Path(toml), config, [versions, versions / "expand", versions / "contract"])
        config_file = str(toml)
    else:
        _add_version_locations(path, config, [versions / "expand", versions / "contract"])
    notes = [f"updated version_locations in {config_file}",
             f"both branches start at {head or 'base'}; run `alembic upgrade heads` (or dbsync upgrade) to apply "
             "the two roots"]
    if head is not None:
        settings_file = _write_baseline(Path(config_file).resolve().parent, head)
        notes.append(f"wrote baseline = {head} in {settings_file}: the linter skips it and its ancestors "
                     "(--include-baseline checks them)")
    env_py = Path(script.dir) / "env.py"
    if env_py.is_file() and "configure_options" not in env_py.read_text(encoding="utf-8"):
        notes.append(f"edit {env_py}: pass **migrations_policy.gate.environment.configure_options(context) to every "
                     "context.configure(...) call (see the expand_contract template's env.py)")
    notes.append("copy the expand_contract template's script.py.mako to get requires_data_migrations "
                 "rendered next to depends_on (optional)")
    return InitResult(directory=script.dir, config_file=config_file, created=created, notes=notes)


def _write_baseline(directory: Path, head: str) -> Path:
    """``baseline = HEAD`` in the project's settings in *directory*: ``[tool.migrations_policy]`` of its
    pyproject.toml if there is one, else ``[migrations_policy]`` of its setup.cfg (created when absent; the
    section is added at the end when absent), the rest kept as it is.  Not the alembic ini: a
    ``[migrations_policy]`` section there makes plain alembic refuse to run until env.py is wired
    (``failsafe``), which adopting does not do yet.  Both ``migrations-policy lint`` (in the project's
    directory) and ``dbsync lint`` read these files."""
    config_file = directory / "pyproject.toml"
    if not config_file.is_file():
        config_file = directory / "setup.cfg"
        if not config_file.exists():
            config_file.write_text("", encoding="utf-8")
    toml = config_file.suffix == ".toml"
    section = "tool.migrations_policy" if toml else "migrations_policy"
    line = f'baseline = ["{head}"]' if toml else f"baseline = {head}"
    lines = config_file.read_text(encoding="utf-8").splitlines()
    start = next((i for i, text in enumerate(lines) if text.strip() == f"[{section}]"), None)
    if start is None:
        lines += ["", f"[{section}]", line]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        found = next((i for i in range(start + 1, end) if re.match(r"^\s*baseline\s*[=:]", lines[i])), None)
        if found is None:
            lines.insert(start + 1, line)
        else:
            lines[found] = line
    config_file.write_text("\n".join(lines).lstrip("\n") + "\n", encoding="utf-8")
    return config_file


def _here_relative(locations: list[Path], here: Path) -> list[str]:
    """Each location as ``%(here)s/...`` when it lies under *here* (the config file's directory)."""
    rendered = []
    for location in locations:
        try:
            rendered.append("%(here)s/" + location.resolve().relative_to(here).as_posix())
        except ValueError:
            rendered.append(location.resolve().as_posix())
    return rendered


def _add_version_locations(ini: Path, config: Config, new: list[Path]) -> None:
    """Append *new* to ``version_locations`` in the ini file, keeping the rest of the file as it is."""
    section = config.config_ini_section
    existing = config.get_main_option("version_locations")
    here = ini.resolve().parent
    rendered = _here_relative(new, here)
    separator_name = config.get_main_option("path_separator") or config.get_main_option("version_path_separator")
    separator = _SEPARATORS.get(separator_name or "space", " ")
    raw = _raw_option(ini, section, "version_locations")
    if existing is None or raw is None:
        script_location = _raw_option(ini, section, "script_location") or "%(here)s"
        values = [script_location.rstrip("/") + "/versions"] + rendered
    else:
        values = [raw.strip()] + rendered
    _set_option(ini, section, "version_locations", separator.join(values))


def _add_toml_version_locations(toml: Path, config: Config, locations: list[Path]) -> None:
    """alembic's pyproject template: set ``version_locations`` in ``[tool.alembic]`` (the existing
    locations, if any, first), keeping the rest of the file as it is."""
    import json

    here = toml.resolve().parent
    existing = config.get_version_locations_list() or []
    rendered = _here_relative(locations, here)
    values = existing + [r for r in rendered if r not in existing and r.replace("%(here)s", str(here)) not in existing]
    line = "version_locations = [" + ", ".join(json.dumps(v) for v in values) + "]"
    lines = toml.read_text(encoding="utf-8").splitlines()
    table = next((i for i, text in enumerate(lines) if text.strip() == "[tool.alembic]"), None)
    if table is None:
        raise ConfigError(f"{toml}: no [tool.alembic] table")
    end = next((i for i in range(table + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for index in range(table + 1, end):
        if re.match(r"^\s*version_locations\s*=", lines[index]):
            close = index
            while "]" not in lines[close] and close + 1 < end:
                close += 1
            lines[index:close + 1] = [line]
            break
    else:
        lines.insert(table + 1, line)
    toml.write_text("\n".join(lines) + "\n", encoding="utf-8")


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
