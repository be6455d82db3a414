"""A verdict for every script (issue 28): generated trees of scripts that import modules that are not installed,
read the alembic ini's options, guard by dialect and call helpers.  Each script gets a verdict (never MP000), and
that verdict -- the rule findings, not the MP001 warning saying what could not be imported -- is the one the same
script gets when everything it imports is present.

``MP_VERDICT_SEED`` (default: random, printed and in every assertion) draws ``MP_VERDICT_TREES`` trees (default 3).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
SEED = int(os.environ.get("MP_VERDICT_SEED") or random.randrange(10 ** 9))
TREES = int(os.environ.get("MP_VERDICT_TREES") or 3)
SCRIPTS = 6
print(f"test_every_script_a_verdict: MP_VERDICT_SEED={SEED}")
RUNNER = "import sys; from migrations_policy.cli import main; sys.exit(main(sys.argv[1:]))"

#: Operations whose findings differ by dialect and phase; {t} a table, {c} a column, {s} the ini's schema option.
OPS = [
    'op.drop_column("{t}", "{c}")',
    'op.add_column("{t}", sa.Column("{c}", sa.Integer(), nullable=False))',
    'op.add_column("{t}", sa.Column("{c}", sa.String(20), nullable=True))',
    'op.create_index("ix_{t}_{c}", "{t}", ["{c}"])',
    'op.execute("UPDATE {t} SET {c} = 1")',
    'op.alter_column("{t}", "{c}", nullable=False, existing_type=sa.Integer())',
    'op.alter_column("{t}", "{c}", type_=sa.BigInteger(), existing_nullable=False, nullable=False)',
    'op.create_foreign_key("fk_{t}_{c}", "{t}", "parent", ["{c}"], ["id"])',
    'op.drop_table("{t}_old")',
    'op.create_table("{t}_new", sa.Column("id", sa.Integer, primary_key=True))',
]

GUARDS = [  # (guard line(s), indentation of what follows): what follows runs on some dialects only
    ('if op.get_context().dialect.name != "sqlite":\n    return\n', ""),
    ('if op.get_bind().dialect.name == "postgresql":\n', "    "),
    ('bind = op.get_bind()\nif bind.engine.name not in ("mysql", "mariadb"):\n    return\n', ""),
    ('if context.get_context().dialect.name == "sqlite":\n    return\n', ""),
]


def _name(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice("abcdefghij") for _ in range(6))


def _op(rng: random.Random, schema_var: str | None = None) -> str:
    table = _name(rng, "t")
    text = rng.choice(OPS).format(t=table, c=_name(rng, "c"))
    return text


def _tree(rng: random.Random, root: Path) -> tuple[Path, Path, dict]:
    """Scripts in root/versions, their local helper module in root, the missing package in root/site (on the path
    only in the run 'with everything present'); returns (versions, site, ini options)."""
    versions, site = root / "versions", root / "site"
    versions.mkdir()
    missing = _name(rng, "mpmissing_")
    helper = _name(rng, "helpers_")
    option = _name(rng, "opt_")
    prefix = _name(rng, "p")
    (root / "alembic.ini").write_text(f"[alembic]\nscript_location = .\n{option} = {prefix}\n")
    # the third-party package the scripts import (only present in the reference run)
    (site / missing / "sub").mkdir(parents=True)
    (site / missing / "__init__.py").write_text(textwrap.dedent("""
        import logging
        import sqlalchemy as sa
        CONSTANT = 7
        ENV_NAME = "MP_VERDICT_UNSET_VARIABLE"
        DEFAULT = "default"
        JSONType = sa.Text
        class Base:
            pass
        def get_logger():
            return logging.getLogger("mpmissing")
        def decorate(fn):
            return fn
    """))
    (site / missing / "sub" / "__init__.py").write_text("def thing():\n    return 3\nNAME = 'x'\n")
    # the project's own helper module (always present)
    helper_ops = [_op(rng) for _ in range(rng.randint(1, 2))]
    (root / f"{helper}.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n\n\ndef apply(operations=op):\n"
        + "".join(f"    {line.replace('op.', 'operations.', 1)}\n" for line in helper_ops)
        + "\n\ndef is_sqlite():\n    return op.get_bind().dialect.name == 'sqlite'\n")
    # the project's own package whose __init__ needs the missing package (dagster's helpers): importing any of its
    # modules fails without it; its helper's operations are still found, from its source
    package = _name(rng, "proj_")
    (root / package / "migration").mkdir(parents=True)
    (root / package / "__init__.py").write_text(f"from {missing}.sub import thing\nVALUE = thing() + 1\n")
    (root / package / "migration" / "__init__.py").write_text("")
    package_ops = [_op(rng) for _ in range(rng.randint(1, 2))]
    (root / package / "migration" / "utils.py").write_text(
        "from alembic import op\nimport sqlalchemy as sa\n\n\ndef create_things():\n"
        + "".join(f"    {line}\n" for line in package_ops))
    down = None
    for i in range(SCRIPTS):
        rid = f"{i:02d}{_name(rng, '')}"
        head = ['"""generated"""', "from alembic import op, context", "import sqlalchemy as sa"]
        module, body = [], []
        features = rng.sample(["import", "import_from", "module_use", "upgrade_use", "type_use", "decorated_base",
                               "config", "module_config", "guard", "helper", "helper_guard", "ops", "package",
                               "stdlib_use"],
                              rng.randint(2, 6))
        if "import" in features or "upgrade_use" in features or "type_use" in features:
            head.append(f"import {missing}")
        if "import_from" in features or "module_use" in features:
            head.append(f"from {missing}.sub import thing, NAME")
        if "module_use" in features:
            module.append("VALUE = thing() + 1")
        if "decorated_base" in features:
            head.append(f"from {missing} import Base")
            module.append("class Model(Base):\n    __tablename__ = 'model'\n")
        if "stdlib_use" in features:
            # a missing value handed to a function of the standard library that checks its type (zenml's
            # os.getenv(ENV_..., DEFAULT_...)): it raises TypeError without touching the placeholder
            head.append(f"import os\nimport re\nfrom {missing} import ENV_NAME, DEFAULT, CONSTANT")
            body.append(rng.choice(["value = os.getenv(ENV_NAME, DEFAULT)", "value = os.path.join(DEFAULT, 'x')",
                                    "value = re.compile(DEFAULT)", "value = ', '.join([DEFAULT, 'x'])",
                                    "value = int(CONSTANT) + 1", "value = ENV_NAME.upper()"]))
        if "upgrade_use" in features:
            body.append(f"log = {missing}.get_logger()\nlog.info('upgrading')")
        if "type_use" in features:
            body.append(f'op.add_column("{_name(rng, "t")}", sa.Column("{_name(rng, "c")}", {missing}.JSONType(), '
                        f'nullable=True))')
        if "helper" in features or "helper_guard" in features:
            head.append(f"import {helper}")
        if "package" in features:
            head.append(f"from {package}.migration.utils import create_things")
            body.append("create_things()")
        if "module_config" in features:
            module.append(f'PREFIX = context.config.get_main_option("{option}")')
            body.append('op.drop_column(PREFIX + "_users", "legacy")')
        if "config" in features:
            body.append(f'prefix = op.get_context().config.get_main_option("{option}")\n'
                        f'op.create_index("ix_" + prefix, prefix + "_t", ["c"])')
        if "helper" in features:
            body.append(f"{helper}.apply()")
        body.extend(_op(rng) for _ in range(rng.randint(0, 2)))
        if "helper_guard" in features:
            body.append(f"if not {helper}.is_sqlite():\n    return\n{_op(rng)}")
        elif "guard" in features:
            guard, indent = rng.choice(GUARDS)
            body.append(guard + textwrap.indent("\n".join(_op(rng) for _ in range(rng.randint(1, 2))), indent))
        if "ops" in features or not body:
            body.append(_op(rng))
        upgrade = "\n".join(body)
        text = ("\n".join(head) + f"\n\nrevision = {rid!r}\ndown_revision = {down!r}\n"
                f"branch_labels = {('expand',) if down is None else None!r}\n\n" + "\n".join(module)
                + "\n\n\ndef upgrade():\n" + textwrap.indent(upgrade, "    ") + "\n\n\ndef downgrade():\n    pass\n")
        (versions / f"{rid}.py").write_text(text)
        down = rid
    return versions, site, {option: prefix}


def _lint(root: Path, versions: Path, site: Path | None) -> dict:
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": "off",
           "PYTHONPATH": os.pathsep.join([ROOT] + ([str(site)] if site else []))}
    proc = subprocess.run([sys.executable, "-c", RUNNER, "lint", "--format", "json", "--phase", "expand",
                           str(versions)], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 2), (SEED, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def _verdict(report: dict) -> dict[str, set]:
    found: dict[str, set] = {}
    for f in report["findings"]:
        found.setdefault(Path(f["path"]).name, set())
        if f["code"] not in ("MP001", "MP005"):
            found[Path(f["path"]).name].add((f["line"], f["code"], f["dialect"]))
    return found


@pytest.mark.parametrize("tree", range(TREES))
def test_every_script_gets_the_verdict_it_gets_with_everything_present(tree, tmp_path):
    rng = random.Random(f"{SEED}-{tree}")
    versions, site, _ = _tree(rng, tmp_path)
    present = _lint(tmp_path, versions, site)
    absent = _lint(tmp_path, versions, None)
    scripts = sorted(p.name for p in versions.glob("*.py"))
    for report in (present, absent):
        assert report["files"] == SCRIPTS
        unloadable = [(f["path"], f["message"]) for f in report["findings"] if f["code"] == "MP000"]
        assert not unloadable, (SEED, tree, unloadable)
    with_all, without = _verdict(present), _verdict(absent)
    for name in scripts:
        assert with_all.get(name, set()) == without.get(name, set()), (
            SEED, tree, name, (versions / name).read_text(), sorted(with_all.get(name, ())),
            sorted(without.get(name, ())))
    # what could not be imported is said, on the scripts that needed it
    warned = {Path(f["path"]).name for f in absent["findings"] if f["code"] == "MP001" and "mpmissing_" in f["message"]}
    for name in scripts:
        source = (versions / name).read_text()
        if ".get_logger()" in source or ".JSONType()" in source:
            assert name in warned, (SEED, tree, name, absent["findings"])
