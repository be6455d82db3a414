"""``lock_timeout`` / ``lock_retries`` are checked when settings load: a value that would disable the
timeout (``0.0004`` -> ``0ms``, which PostgreSQL reads as "wait forever"), ``inf``, ``nan``, negative
or absurd values are one-line errors (exit 2), never tracebacks; accepted values render as a real
timeout on the server."""

from __future__ import annotations

import math

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migrations_policy import cli
from migrations_policy.core.config import LOCK_RETRIES_MAX, LOCK_TIMEOUT_MAX, LOCK_TIMEOUT_MIN, load_settings
from migrations_policy.core.errors import ConfigError
from migrations_policy.expand.lock_timeout import set_session_lock_timeout

from ..helpers import copy_example, set_ini_option

#: Floats around and beyond the bounds, and the specials, written the ways people write them.
timeouts = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=0.01),
    st.floats(min_value=LOCK_TIMEOUT_MAX / 2, max_value=LOCK_TIMEOUT_MAX * 2),
    st.sampled_from([0.0, -0.0, 0.0004, 0.0005, 0.001, 0.0014999, 86400.0, 86400.5]),
)
texts = st.sampled_from(["{!r}", "{}", " {} ", "{:e}"])


def _accepted(value: float) -> bool:
    return LOCK_TIMEOUT_MIN <= value <= LOCK_TIMEOUT_MAX


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=timeouts, form=texts)
def test_lock_timeout_accepted_exactly_within_bounds(tmp_path, value, form):
    text = form.format(value)
    (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nlock_timeout = {text}\n")
    parsed = float(text)
    if _accepted(parsed):
        assert load_settings(tmp_path).lock_timeout == parsed
    else:
        with pytest.raises(ConfigError) as exc:
            load_settings(tmp_path)
        message = exc.value.message
        assert "\n" not in message and str(tmp_path / "setup.cfg") in message and "lock_timeout" in message


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.integers(), st.integers(min_value=-3, max_value=LOCK_RETRIES_MAX + 3)))
def test_lock_retries_accepted_exactly_within_bounds(tmp_path, value):
    (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\nlock_retries = {value}\n")
    if 0 <= value <= LOCK_RETRIES_MAX:
        assert load_settings(tmp_path).lock_retries == value
    else:
        with pytest.raises(ConfigError, match="lock_retries") as exc:
            load_settings(tmp_path)
        assert "\n" not in exc.value.message


@pytest.mark.parametrize("key, value", [("lock_timeout", "0.0004"), ("lock_timeout", "inf"),
                                        ("lock_timeout", "nan"), ("lock_timeout", "-1"),
                                        ("lock_timeout", "1e9"), ("lock_retries", "-1"),
                                        ("lock_retries", "100000"), ("lock_retries", "2.5")])
def test_dbsync_refuses_a_bad_lock_setting_in_one_line_exit_2(tmp_path, capsys, key, value):
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", key, value)
    code = cli.dbsync_main(["-c", str(ini), "upgrade", "--expand"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert key in err and str(ini) in err


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.floats(min_value=LOCK_TIMEOUT_MIN, max_value=LOCK_TIMEOUT_MAX))
def test_every_accepted_timeout_is_a_real_timeout_on_postgresql(db_engine, value):
    """Never "0" (no timeout), and never past half of deadlock_timeout (DDL gives up first)."""
    with db_engine.connect() as conn:
        set_session_lock_timeout(conn, value)
        shown = conn.execute(sa.text("SELECT setting::int FROM pg_settings WHERE name = 'lock_timeout'")).scalar()
        deadlock = conn.execute(sa.text("SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'")).scalar()
    assert 1 <= shown <= deadlock // 2
    assert shown == min(round(value * 1000), deadlock // 2) or math.isclose(shown, value * 1000, abs_tol=1)
