"""Settings for migrations_policy, read from the project's own files.

One dataclass, ``Settings``, holds everything.  It is read, in order of
precedence (later wins), from:

* ``pyproject.toml``: ``[tool.migrations_policy]``
* ``setup.cfg``: ``[migrations_policy]``
* the alembic ini file (``alembic.ini``): ``[migrations_policy]``
* an explicit ``--config FILE`` given to ``migrations-policy lint``

List values in ini files are separated by commas or new lines.  Unknown keys
are an error (a typo must not silently disable a check).
"""

from __future__ import annotations

import configparser
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from migrations_policy.core.errors import ConfigError
from migrations_policy.core.globs import compile_glob

SECTION = "migrations_policy"
DIALECTS = ("postgresql", "mysql", "sqlite")
#: The two schema branches (alembic branch labels) of the expand/contract layout.
EXPAND, CONTRACT = "expand", "contract"
PHASES = (EXPAND, CONTRACT)
DEFAULT_ALEMBIC_INI = "alembic.ini"
SEVERITIES = ("error", "warning", "off")


def _as_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in str(value).replace("\n", ",").split(",") if part.strip()]


#: The largest number a setting takes (a count, MiB, or seconds: 2**31-1 s is 68 years): what the OS calls
#: (setrlimit, alarms, timeouts) can take it; beyond, or not finite, is a configuration error.
_LARGEST = 2**31 - 1


def _as_int(value: Any) -> int:
    number = int(str(value).strip())
    if abs(number) > _LARGEST:
        raise ValueError(f"{number} is out of range (at most {_LARGEST})")
    return number


def _as_float(value: Any) -> float:
    number = float(str(value).strip())
    if not math.isfinite(number) or abs(number) > _LARGEST:
        raise ValueError(f"{str(value).strip()} is not a finite number of at most {_LARGEST}")
    return number


def _as_str(value: Any) -> str:
    return str(value).strip()


def _as_globs(value: Any) -> list[str]:
    globs = _as_list(value)
    for pattern in globs:
        compile_glob(pattern)  # ValueError: one line naming the pattern
    return globs


_CODE = re.compile(r"MP\d{0,3}")


def _as_codes(value: Any, where: str) -> list[str]:
    codes = [code.upper() for code in _as_list(value)]
    for code in codes:
        if not _CODE.fullmatch(code):
            raise ValueError(f"{where}: {code!r} is not a rule code or prefix (MPnnn)")
    if not codes:
        raise ValueError(f"{where}: no rule code")
    return codes


def _as_per_file_ignores(value: Any) -> dict[str, list[str]]:
    """``GLOB: CODE, CODE`` entries (ini: one per line; several on one line when each glob ends with ``:``),
    or a TOML table ``{GLOB = [CODE, ...]}`` → {glob: [codes]}."""
    if isinstance(value, Mapping):
        entries = [(str(glob), codes) for glob, codes in value.items()]
    else:
        entries = []
        for token in str(value).replace("\n", ",").split(","):
            glob, colon, codes = token.rpartition(":")
            if colon and glob.strip():
                entries.append((glob.strip(), [codes]))
            elif token.strip():
                if not entries:
                    raise ValueError(f"expected GLOB: CODE[, CODE...], got {token.strip()!r}")
                entries[-1][1].append(token)
    result: dict[str, list[str]] = {}
    for glob, codes in entries:
        compile_glob(glob)
        result.setdefault(glob, []).extend(_as_codes(codes, glob))
    return result


def _as_severity_map(value: Any) -> dict[str, str]:
    """``MP101 = warning`` lines (ini) or a table (toml) → {code: severity}."""
    if isinstance(value, Mapping):
        items = value.items()
    else:
        items = []
        for entry in _as_list(value):
            code, sep, severity = entry.partition("=")
            if not sep:
                code, sep, severity = entry.partition(":")
            if not sep:
                raise ValueError(f"expected CODE = severity, got {entry!r}")
            items.append((code, severity))
    result = {}
    for code, severity in items:
        severity = str(severity).strip().lower()
        if severity not in SEVERITIES:
            raise ValueError(f"severity for {code.strip()} must be one of {', '.join(SEVERITIES)}")
        result[str(code).strip().upper()] = severity
    return result


@dataclass
class Settings:
    """Every setting the framework reads.  Defaults are safe for production."""

    #: Dialects the linter checks scripts against (a script may run on any of them).
    dialects: list[str] = field(default_factory=lambda: list(DIALECTS))
    #: Major version of the PostgreSQL server (before 11, any ADD COLUMN DEFAULT rewrites).
    postgresql_version: int = 15
    #: Per-rule severity overrides: {"MP101": "warning"}.
    severity: dict[str, str] = field(default_factory=dict)
    #: Paths the linter checks when none are given on the command line.
    paths: list[str] = field(default_factory=list)
    #: Seconds the linter lets one script load and run its ``upgrade()`` before giving up.
    lint_timeout: float = 10.0
    #: Modules that declare online data migrations (imported to register them).
    data_migrations: list[str] = field(default_factory=list)
    #: "package.module:NAME" of the release mapping for object-version checks.
    release_mapping: str = ""
    #: Release whose object versions ``VersionedMixin`` writes during a rolling upgrade ("" = current).
    pin_release_version: str = ""
    #: Seconds a DDL statement may wait for a lock before it gives up and retries (0.001 to 86400;
    #: on PostgreSQL at most half the server's ``deadlock_timeout`` is used).
    lock_timeout: float = 5.0
    #: How many times (0 to 100) a DDL statement that timed out on a lock, or was chosen as a
    #: deadlock victim, is retried.
    lock_retries: int = 5
    #: Default rows per batch for online data migrations (with ``batch_seconds``: the first batch).
    batch_size: int = 5000
    #: Target seconds per data-migration batch; batches are then sized to take about this
    #: long (up to 10x ``batch_size``).  0: every batch has ``batch_size`` rows.  The default
    #: keeps row locks short whatever the table and the load (benchmarks/load.py, backfill.py).
    batch_seconds: float = 0.05
    #: Revisions at adoption (``init --adopt`` writes them): they and their ancestors are linted only on request.
    baseline: list[str] = field(default_factory=list)
    #: Path globs the linter skips (relative to the current directory; ``**`` spans directories).
    exclude: list[str] = field(default_factory=list)
    #: ``GLOB: CODE, CODE`` per line: rule codes (or prefixes such as ``MP1``) not reported for matching paths.
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    #: Modules the linter imports before the scripts run, to register the project's custom operations.
    lint_plugins: list[str] = field(default_factory=list)
    #: MiB of memory one script may allocate while it is linted (0: no limit; MP000 beyond it).
    lint_memory_limit: int = 1024

    def update(self, values: Mapping[str, Any], source: str) -> None:
        """Apply *values* (raw strings or TOML values) read from *source*."""
        for raw_key, raw_value in values.items():
            key = raw_key.strip().replace("-", "_")
            parser = _PARSERS.get(key)
            if parser is None:
                known = ", ".join(sorted(_PARSERS))
                raise ConfigError(f"{source}: unknown setting {raw_key!r} in [{SECTION}] (known: {known})")
            try:
                value = parser(raw_value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{source}: bad value for {raw_key!r}: {exc}") from None
            if key == "severity":
                value = {**self.severity, **value}
            setattr(self, key, value)
            self.__dict__.setdefault("_sources", {})[key] = source
        self._validate(source)

    def source_of(self, key: str) -> str:
        """The file that set *key* last ("default" when none did): for one-line errors found later."""
        return self.__dict__.get("_sources", {}).get(key, "default")

    def _validate(self, source: str) -> None:
        bad = [d for d in self.dialects if d not in DIALECTS]
        if bad:
            raise ConfigError(f"{source}: unknown dialect(s) {', '.join(bad)} (known: {', '.join(DIALECTS)})")
        _check_lock_settings(self.lock_timeout, self.lock_retries, source)
        if self.batch_size <= 0 or self.batch_seconds < 0:
            raise ConfigError(f"{source}: batch_size must be positive, batch_seconds >= 0")
        if self.lint_memory_limit < 0:
            raise ConfigError(f"{source}: lint_memory_limit must be 0 (no limit) or MiB > 0")


#: ``lock_timeout`` bounds (seconds).  PostgreSQL counts it in whole milliseconds and reads
#: ``0ms`` as "wait forever", so anything below one millisecond would disable the timeout.
LOCK_TIMEOUT_MIN, LOCK_TIMEOUT_MAX = 0.001, 86400.0
#: ``lock_retries`` bound: each retry backs off up to 10 s, so 100 retries already wait ~16 minutes.
LOCK_RETRIES_MAX = 100


def _check_lock_settings(lock_timeout: float, lock_retries: int, source: str) -> None:
    """lock_timeout must stay a real, bounded timeout; lock_retries a sane count (one line each)."""
    if not (LOCK_TIMEOUT_MIN <= lock_timeout <= LOCK_TIMEOUT_MAX):  # also false for nan
        raise ConfigError(f"{source}: lock_timeout = {lock_timeout!r} must be positive seconds between "
                          f"{LOCK_TIMEOUT_MIN} (PostgreSQL reads less than 1 ms as no timeout at all) "
                          f"and {LOCK_TIMEOUT_MAX:.0f} (one day)")
    if not 0 <= lock_retries <= LOCK_RETRIES_MAX:
        raise ConfigError(f"{source}: lock_retries = {lock_retries!r} must be between 0 and {LOCK_RETRIES_MAX}")


def read_ini_section(path: str | os.PathLike[str]) -> dict[str, str] | None:
    """The ``[migrations_policy]`` section of an ini file, or None if absent."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{path}: cannot read: {_first_line(exc)}") from None
    if not parser.has_section(SECTION):
        return None
    return dict(parser.items(SECTION))


def read_pyproject(path: str | os.PathLike[str], table: str = SECTION) -> dict[str, Any] | None:
    """The ``[tool.migrations_policy]`` (or ``[tool.TABLE]``) table of a pyproject.toml, or None if absent."""
    if not os.path.exists(path):
        return None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return None
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {_first_line(exc)}") from None
    tool = data.get("tool", {})
    found = tool.get(table) if isinstance(tool, dict) else None
    return dict(found) if isinstance(found, dict) else None


def load_settings(
    root: str | os.PathLike[str] = ".",
    *,
    alembic_ini: str | os.PathLike[str] | None = None,
    extra_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Read settings from the project in *root* (and an alembic ini / extra file)."""
    settings = Settings()
    root = Path(root)
    table = read_pyproject(root / "pyproject.toml")
    if table:
        settings.update(table, str(root / "pyproject.toml"))
    for path in (root / "setup.cfg", alembic_ini):
        if path is None:
            continue
        section = read_ini_section(path)
        if section:
            settings.update(section, str(path))
    if extra_file is not None:
        if not os.path.exists(extra_file):
            raise ConfigError(f"{extra_file}: config file not found")
        if str(extra_file).endswith(".toml"):
            table = read_pyproject(extra_file)
        else:
            table = read_ini_section(extra_file)
        if table is None:
            raise ConfigError(f"{extra_file}: no [{SECTION}] section")
        settings.update(table, str(extra_file))
    return settings


_PARSERS: Mapping[str, Callable[[Any], Any]] = {
    "dialects": _as_list,
    "postgresql_version": _as_int,
    "severity": _as_severity_map,
    "paths": _as_list,
    "lint_timeout": _as_float,
    "data_migrations": _as_list,
    "release_mapping": _as_str,
    "pin_release_version": _as_str,
    "lock_timeout": _as_float,
    "lock_retries": _as_int,
    "batch_size": _as_int,
    "batch_seconds": _as_float,
    "baseline": _as_list,
    "exclude": _as_globs,
    "per_file_ignores": _as_per_file_ignores,
    "lint_plugins": _as_list,
    "lint_memory_limit": _as_int,
}


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, configparser.Error):
        return describe_config_error(exc)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_config_error(exc: "configparser.Error") -> str:
    """One line for an ini file's error that never quotes a value: configparser's own messages
    quote the raw value (an interpolation error quotes everything after a ``%``, the rest of a
    URL's password) or the raw line (a parsing error)."""
    from migrations_policy.core.urls import mask_text

    where = " ".join(part for part in (f"[{exc.section}]" if getattr(exc, "section", None) else "",
                                        getattr(exc, "option", None) or "") if part)
    if isinstance(exc, configparser.InterpolationSyntaxError):
        return (f"{where}: a '%' that is not an interpolation ('%(name)s'): write a literal '%' as '%%' "
                "(in a URL's percent-encoded password too: '%%40' for '@')")
    if isinstance(exc, configparser.InterpolationMissingOptionError):
        return f"{where}: refers to %({exc.reference})s, which is not set"
    if isinstance(exc, configparser.InterpolationDepthError):
        return f"{where}: interpolation nested too deeply (a '%(name)s' loop?)"
    if isinstance(exc, configparser.InterpolationError):
        return f"{where}: bad '%' interpolation"
    if isinstance(exc, configparser.ParsingError):
        lines = ", ".join(str(lineno) for lineno, _ in getattr(exc, "errors", [])[:5])
        return f"line(s) {lines}: not 'name = value' (or a [section] header)"
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno}: an option before the first [section] header"
    text = str(exc).strip()
    return mask_text(text.splitlines()[0] if text else type(exc).__name__)
