"""Settings from pyproject.toml, setup.cfg, alembic.ini; URL masking."""

from __future__ import annotations

import pytest

from migrations_policy.core import urls as _urls
from migrations_policy.core.config import load_settings
from migrations_policy.core.errors import ConfigError, UsageError


def test_precedence_pyproject_setupcfg_alembic_ini(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.migrations_policy]\npostgresql_version = 10\nlock_timeout = 2\nseverity = { MP101 = 'warning' }\n"
    )
    (tmp_path / "setup.cfg").write_text("[migrations_policy]\nlock_timeout = 3\ndialects = postgresql, mysql\n")
    ini = tmp_path / "alembic.ini"
    ini.write_text("[alembic]\nscript_location = x\n[migrations_policy]\nlock_timeout = 4\nseverity = MP102=off\n")
    settings = load_settings(tmp_path, alembic_ini=ini)
    assert settings.postgresql_version == 10
    assert settings.lock_timeout == 4.0
    assert settings.dialects == ["postgresql", "mysql"]
    assert settings.severity == {"MP101": "warning", "MP102": "off"}


def test_defaults_without_files(tmp_path):
    settings = load_settings(tmp_path)
    assert settings.dialects == ["postgresql", "mysql", "sqlite"]
    assert settings.lock_timeout > 0 and settings.batch_size > 0


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("lock_timout = 3", "unknown setting 'lock_timout'"),
        ("dialects = oracle", "unknown dialect(s) oracle"),
        ("postgresql_version = fifteen", "bad value for 'postgresql_version'"),
        ("severity = MP101=fatal", "severity for MP101 must be one of"),
        ("lock_timeout = -1", "must be positive"),
    ],
)
def test_bad_settings_name_file_and_key(tmp_path, body, fragment):
    (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\n{body}\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(tmp_path)
    assert str(tmp_path / "setup.cfg") in exc.value.message
    assert fragment in exc.value.message


def test_unreadable_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.migrations_policy\n")
    with pytest.raises(ConfigError, match="pyproject.toml: cannot read"):
        load_settings(tmp_path)


@pytest.mark.parametrize(
    "url, expected",
    [
        ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
        ("mysql+pymysql://root:p%40ss@127.0.0.1:3306/x?charset=utf8mb4", "mysql+pymysql://root:***@127.0.0.1:3306/x?charset=utf8mb4"),
        ("sqlite:///tmp/x.db", "sqlite:///tmp/x.db"),
    ],
)
def test_mask_url(url, expected):
    assert _urls.mask_url(url) == expected


def test_mask_text_in_driver_messages():
    text = 'connection to "postgresql://app:hunter2@db:5432/x" failed'
    assert "hunter2" not in _urls.mask_text(text)


def test_parse_url_error_never_echoes_password():
    with pytest.raises(UsageError) as exc:
        _urls.parse_url("::nonsense://u:topsecret@")
    assert "topsecret" not in exc.value.message
