"""Operations the offline recording did not see (red-team F4), generated.

* a drop behind ``context.is_offline_mode()`` (the recording runs as ``alembic upgrade --sql``): linted from
  source, every branch, with ``MP001`` saying why;
* what the script sends through alembic's impl (``op.get_context().impl.drop_column / .execute``,
  ``op.get_context().execute``): recorded like ``op.execute``;
* a server default calling a function not known to be stable or immutable: possibly volatile (rewrite);
* an integer primary key column added: ``SERIAL`` / ``AUTO_INCREMENT`` (rewrite).
"""

from __future__ import annotations

import json
import random

import pytest

from migrations_policy import cli

from .conftest import script

GUARDS = [
    "from alembic import context\nif context.is_offline_mode():\n    return\n{drop}",
    "from alembic import context\nif not context.is_offline_mode():\n    {drop}",
    "from alembic import context as c\nonline = not c.is_offline_mode()\nif online:\n    {drop}",
]
IMPL = [
    'op.get_context().impl.execute("ALTER TABLE users DROP COLUMN {column}")',
    'op.get_context().impl.execute(sa.text("ALTER TABLE users DROP COLUMN {column}"))',
    'op.get_context().impl.drop_column("users", sa.Column("{column}", sa.String()))',
    'op.get_context().execute("ALTER TABLE users DROP COLUMN {column}")',
    'ctx = op.get_context()\nimpl = ctx.impl\nimpl.drop_column("users", sa.Column("{column}", sa.Integer()))',
]


def _findings(tmp_path, capsys, version: int = 15) -> dict[str, set[str]]:
    (tmp_path / "setup.cfg").write_text(f"[migrations_policy]\npostgresql_version = {version}\n")
    code = cli.main(["lint", "--format", "json", "--phase", "expand", "--dialect", "postgresql",
                     str(tmp_path / "versions")])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    found: dict[str, set[str]] = {}
    for finding in json.loads(out)["findings"]:
        found.setdefault(finding["path"].rsplit("/", 1)[-1].removesuffix(".py"), set()).add(finding["code"])
    return found


def _write(tmp_path, bodies: dict[str, str]) -> None:
    tree = tmp_path / "versions"
    tree.mkdir()
    for number, (name, body) in enumerate(bodies.items()):
        (tree / f"{name}.py").write_text(script(body, revision=f"r{number}"))


@pytest.mark.parametrize("seed", range(2))
def test_drops_behind_the_mode_check_and_through_the_impl_are_seen(seed, tmp_path, capsys):
    rng = random.Random(seed)
    bodies = {}
    for number, guard in enumerate(GUARDS):
        bodies[f"guard{number}"] = guard.format(drop=f'op.drop_column("users", "c{rng.randrange(999)}")')
    for number, call in enumerate(IMPL):
        bodies[f"impl{number}"] = call.format(column=f"c{rng.randrange(999)}")
    _write(tmp_path, bodies)
    found = _findings(tmp_path, capsys)
    for name in bodies:
        assert "MP101" in found.get(name, set()), (name, found)
    for number in range(len(GUARDS)):
        assert "MP001" in found[f"guard{number}"]


def _function(rng: random.Random) -> str:
    name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(3, 12)))
    return rng.choice([f"{name}()", f'"{name}"()', f'public.{name}(1)', f'"public"."{name}"()', '"random"()',
                       "uuid_generate_v1mc()", f"md5({name}()::text)", f"lower({name}())"])


@pytest.mark.parametrize("seed", range(2))
def test_unknown_default_functions_and_serial_keys_rewrite(seed, tmp_path, capsys):
    rng = random.Random(seed)
    bodies = {}
    for number in range(6):
        default = _function(rng)
        bodies[f"volatile{number}"] = (f'op.add_column("users", sa.Column("v{number}", sa.String(), '
                                       f'server_default=sa.text({default!r})))')
    for number, kind in enumerate(("Integer", "BigInteger", "SmallInteger")):
        bodies[f"serial{number}"] = f'op.add_column("users", sa.Column("s{number}", sa.{kind}(), primary_key=True))'
    quiet = ["now()", "CURRENT_TIMESTAMP", "'x'", "lower('A')", "0", "timezone('utc', now())"]
    for number, default in enumerate(quiet):
        bodies[f"quiet{number}"] = (f'op.add_column("users", sa.Column("q{number}", sa.String(), '
                                    f'server_default=sa.text({default!r})))')
    bodies["not_serial"] = 'op.add_column("users", sa.Column("k", sa.Integer(), primary_key=True, autoincrement=False))'
    _write(tmp_path, bodies)
    found = _findings(tmp_path, capsys)
    for name in bodies:
        rewrites = "MP114" in found.get(name, set())
        assert rewrites == name.startswith(("volatile", "serial")), (name, found.get(name))
