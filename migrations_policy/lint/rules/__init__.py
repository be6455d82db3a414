"""The rule registry: one rule per module in this package (``mpNNN_name.py``, ``RULE = ...``).

``all_rules()`` returns them sorted by code; ``get(code)`` finds one.  To add a rule,
drop a module here: its docstring-bearing ``Rule`` subclass instance in ``RULE``
is picked up by the linter, the docs generator (``docs/_generate_rules.py``) and
the SARIF reporter.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from migrations_policy.lint.rules.base import Rule


@lru_cache(maxsize=1)
def _registry() -> dict[str, Rule]:
    rules = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("mp"):
            continue
        rule = importlib.import_module(f"{__name__}.{info.name}").RULE
        if rule.code in rules:
            raise RuntimeError(f"duplicate rule code {rule.code} in {info.name}")
        rules[rule.code] = rule
    return rules


def all_rules() -> list[Rule]:
    return [rule for _, rule in sorted(_registry().items())]


def get(code: str) -> Rule:
    return _registry()[code]


def codes() -> list[str]:
    return sorted(_registry())


__all__ = ["Rule", "all_rules", "get", "codes"]
