"""The quickstart's list of commands is generated from the parsers (``.. mp-commands::`` in
docs/_ext/mp_cli.py), so a command added to ``cli.DBSYNC_COMMANDS`` or ``DEVELOPER_COMMANDS``
appears without anyone editing the page.  Nothing is built here."""

from __future__ import annotations

import configparser
import importlib
import os
import random
import re
import string
import sys

from migrations_policy import cli

from ..helpers import REPO

DOCS = REPO / "docs"


def _mp_cli():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module("mp_cli")
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def test_the_quickstart_lists_both_tools_from_the_parsers():
    text = (DOCS / "quickstart.rst").read_text(encoding="utf-8")
    assert re.search(r"^\.\. mp-commands:: dbsync$", text, re.MULTILINE), "the dbsync list is not generated"
    assert re.search(r"^\.\. mp-commands:: migrations-policy$", text, re.MULTILINE), \
        "the migrations-policy list is not generated"


def test_every_command_is_listed_with_its_help_and_anchor():
    mp_cli = _mp_cli()
    for tool, specs in (("dbsync", cli.DBSYNC_COMMANDS), ("migrations-policy", cli.DEVELOPER_COMMANDS)):
        rows = mp_cli.command_rows(tool)
        assert [r.name for r in rows] == [s.name for s in specs]
        for row, spec in zip(rows, specs):
            assert row.help == spec.help and row.anchor == f"{tool}-{spec.name}".replace("_", "-")
    names = {r.name for r in mp_cli.command_rows("dbsync")}
    assert {"plan", "rollback", "prune", "revision", "lint"} <= names  # those the old hand-written list lacked


def _spec(rng: random.Random, taken: set[str]) -> cli.CommandSpec:
    while True:
        name = rng.choice(string.ascii_lowercase) + "".join(
            rng.choice(string.ascii_lowercase + "_-") for _ in range(rng.randrange(1, 20)))
        if name not in taken:
            taken.add(name)
            break
    help_text = " ".join("".join(rng.choice(string.ascii_letters + "-.,'()") for _ in range(rng.randrange(1, 9)))
                         for _ in range(rng.randrange(1, 12)))
    aliases = tuple(f"{name}{i}" for i in range(rng.randrange(0, 3)))
    spec = cli.CommandSpec(name, help_text, lambda parser: None, lambda args: None)
    if aliases:  # a command with aliases (another branch may add the field): listed with them
        object.__setattr__(spec, "aliases", aliases)
    return spec


def test_generated_commands_appear_in_the_list(monkeypatch):
    """Commands added to the tables (random names, help texts, aliases) are listed, in order."""
    mp_cli = _mp_cli()
    seed = int(os.environ.get("MP_DOCS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"MP_DOCS_SEED={seed}")
    rng = random.Random(seed)
    for _ in range(20):
        for attribute in ("DBSYNC_COMMANDS", "DEVELOPER_COMMANDS"):
            original = getattr(cli, attribute)
            taken = {s.name for s in original}
            extra = [_spec(rng, taken) for _ in range(rng.randrange(1, 4))]
            specs = list(original)
            for spec in extra:
                specs.insert(rng.randrange(len(specs) + 1), spec)
            monkeypatch.setattr(cli, attribute, specs)
            tool = "dbsync" if attribute == "DBSYNC_COMMANDS" else "migrations-policy"
            rows = mp_cli.command_rows(tool)
            assert [r.name for r in rows] == [s.name for s in specs], seed
            for row, spec in zip(rows, specs):
                assert row.help == spec.help and row.aliases == tuple(getattr(spec, "aliases", ())), seed
            monkeypatch.setattr(cli, attribute, original)


def test_tox_docs_env_installs_the_docs_extra():
    tox = configparser.ConfigParser()
    tox.read(REPO / "tox.ini")
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    deps = {line.strip() for line in tox["testenv:docs"]["deps"].splitlines() if line.strip()}
    extra = {line.strip() for line in setup["options.extras_require"]["docs"].splitlines() if line.strip()}
    assert deps == extra and {d.split(">")[0] for d in deps} == {"sphinx", "furo", "sphinx-copybutton"}
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert 'html_theme = "furo"' in conf and '"sphinx_copybutton"' in conf


def test_copy_buttons_strip_the_prompts_the_pages_use():
    """sphinx-copybutton strips ``copybutton_prompt_text`` (a JS regexp; this one is also Python's)
    from each copied line: every ``$ `` / ``>>> `` line of the pages loses exactly its prompt."""
    import runpy

    conf = runpy.run_path(str(DOCS / "conf.py"))
    assert conf["copybutton_prompt_is_regexp"] and conf["copybutton_remove_prompts"]
    prompt = re.compile(conf["copybutton_prompt_text"])
    prompted = [line.strip() for page in DOCS.rglob("*.rst")
                for line in page.read_text(encoding="utf-8").splitlines()
                if line.strip().startswith(("$ ", ">>> "))]
    assert prompted, "no page shows a prompt"
    for line in prompted:
        match = prompt.match(line)
        assert match and match.group() in ("$ ", ">>> "), line
    for command in ("pip install x", "dbsync upgrade", "import sqlalchemy as sa", "    x = 1"):
        assert not prompt.match(command), command
