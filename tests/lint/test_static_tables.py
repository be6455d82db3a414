"""``lint.static.names``'s tables say what the installed alembic and SQLAlchemy do: an upgrade that changes a
signature, a type class, a default or a function's name fails here, never a verdict.

Each type of ``TYPES`` is built by SQLAlchemy with drawn arguments of the kinds the table lists (``MP_STATIC_SEED``),
positional and by keyword, and ``policy.alembic_ops.type_facts`` of the real object must equal the facts
``lint.static`` derives from the same arguments; so must its ``Integer`` affinity."""

from __future__ import annotations

import importlib
import inspect
import os
import random
import sys
import typing

import pytest
import sqlalchemy as sa
from alembic.operations import BatchOperations, Operations

from migrations_policy.lint.static import names, reader as static
from migrations_policy.policy.alembic_ops import type_facts

SEED = int(os.environ.get("MP_STATIC_SEED") or random.randrange(10 ** 9))
print(f"test_static_tables: MP_STATIC_SEED={SEED}", file=sys.stderr)


def _signature(function) -> names.Signature:
    parameters = list(inspect.signature(function).parameters.values())[1:]  # self
    positional = [p for p in parameters if p.kind == p.POSITIONAL_OR_KEYWORD]
    return names.Signature(tuple(p.name for p in positional),
                           sum(1 for p in positional if p.default is p.empty),
                           frozenset(p.name for p in parameters if p.kind == p.KEYWORD_ONLY),
                           any(p.kind == p.VAR_KEYWORD for p in parameters),
                           any(p.kind == p.VAR_POSITIONAL for p in parameters))


@pytest.mark.parametrize("table,cls", [(names.OPERATIONS, Operations), (names.BATCH_OPERATIONS, BatchOperations)])
def test_operation_signatures_are_alembics(table, cls):
    for name, signature in table.items():
        assert _signature(getattr(cls, name)) == signature, name


def _draw(kind: str, rng: random.Random):
    if kind == names.INT:
        return rng.randint(1, 500)
    if kind == names.OPT_INT:
        return rng.choice([None, rng.randint(1, 500)])
    if kind == names.BOOL:
        return rng.choice([True, False])
    if kind in (names.STR, names.OPT_STR):
        return rng.choice(["utf8mb4_bin", "latin1_swedish_ci", "utf8mb4", "x"] + ([None] if kind == names.OPT_STR else []))
    raise AssertionError(kind)


@pytest.mark.parametrize("key", sorted(names.TYPES))
def test_type_table_matches_sqlalchemy(key):
    module, name = key
    spec = names.TYPES[key]
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, sa.types.TypeEngine)
    if not spec.required:
        assert type_facts(cls) == static._Type(spec, None, None).facts()  # the class itself, not called
    rng = random.Random(f"{SEED}:{module}:{name}")
    for _ in range(6):
        members = tuple(rng.sample(["a", "b", "c", "d"], rng.randint(0, 3))) if spec.members else None
        arguments = {}
        for parameter, kind in spec.keywords.items():
            if rng.random() < 0.6 or parameter in spec.positional[:spec.required]:
                arguments[parameter] = sa.String(rng.randint(1, 9)) if kind == names.TYPE else _draw(kind, rng)
        if spec.kind != "other" and spec.keywords.get("length") and rng.random() < 0.5:
            arguments["length"] = rng.randint(1, 500)  # (type(True) is not int: never a bool)
        by_position = [p for p in spec.positional if p in arguments]
        positional = spec.positional[:len(by_position)] == tuple(by_position) and rng.random() < 0.5
        args = list(members or ()) + ([arguments[p] for p in by_position] if positional else [])
        kwargs = {k: v for k, v in arguments.items() if not (positional and k in by_position)}
        real = cls(*args, **kwargs)
        ours = {k: (static._Type(names.TYPES[("sqlalchemy", "String")], {"length": v.length}, None)
                    if isinstance(v, sa.types.TypeEngine) else v) for k, v in arguments.items()}
        assert type_facts(real) == static._Type(spec, ours, members).facts(), (key, args, kwargs)
        assert issubclass(real._type_affinity, sa.Integer) == spec.integer, key


def test_functions_render_as_their_names():
    for name in names.FUNCTIONS:
        assert getattr(sa.func, name)().name == name


def test_schema_names_and_typing_names_exist():
    for name in names.SCHEMA:
        assert hasattr(sa, name), name
    for name in names.TYPING:
        assert hasattr(typing, name), name
    for module in names.DIALECT_MODULES:
        importlib.import_module(module)
