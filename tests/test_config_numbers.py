"""Numeric settings are finite and in range, or a one-line configuration error (red-team F9).

``lint_timeout = inf`` once ended ``lint`` with an internal error (OverflowError, exit 3), ``nan`` silently
disabled the time limit, and a huge ``lint_memory_limit`` blamed every script (setrlimit overflow).  Every numeric
key of the settings table is given generated non-finite and out-of-range values (as TOML would parse them and as
ini text), and random in-range ones.
"""

from __future__ import annotations

import math
import os
import random

import pytest

from migrations_policy.core.config import _PARSERS, Settings, _as_float, _as_int
from migrations_policy.core.errors import ConfigError

SEED = int(os.environ.get("MP_FUZZ_SEED", random.randrange(1 << 30)))
NUMERIC = sorted(key for key, parser in _PARSERS.items() if parser in (_as_int, _as_float))


def _bad(r: random.Random, parser) -> list:
    huge = [10 ** r.randrange(10, 400), -(10 ** r.randrange(10, 60)), 2 ** 31, str(10 ** r.randrange(20, 40))]
    if parser is _as_int:
        return huge
    return huge + [math.inf, -math.inf, math.nan, "inf", "-Infinity", "nan", "NaN", f"1e{r.randrange(309, 999)}",
                   f"{r.randrange(3, 9)}e{r.randrange(10, 300)}"]


@pytest.mark.parametrize("key", NUMERIC)
def test_non_finite_and_huge_values_are_config_errors(key):
    r = random.Random(SEED)
    for value in _bad(r, _PARSERS[key]):
        with pytest.raises(ConfigError) as exc:
            Settings().update({key: value}, "pyproject.toml")
        message = str(exc.value)
        assert "\n" not in message and "pyproject.toml" in message and key in message, (SEED, value, message)


@pytest.mark.parametrize("key", NUMERIC)
def test_in_range_values_are_accepted(key):
    r = random.Random(SEED)
    top = {"lock_timeout": 86400, "lock_retries": 100}.get(key, 2 ** 31 - 1)  # keys with bounds of their own
    for _ in range(20):
        value = r.randrange(1, top)
        if _PARSERS[key] is _as_float:
            value = r.choice([value, value / 7, str(value)])
        Settings().update({key: value}, "pyproject.toml")
