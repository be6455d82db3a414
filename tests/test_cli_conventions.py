"""CLI conventions (issue 25): one exit code for a usage error on every subcommand of both
shells (2, docs/exit_codes.rst); every subcommand spelled with ``_`` also answers to ``-``;
every override (``--force``) needs a reason (``--reason``); ``dbsync history`` and
``dbsync current`` as alembic's, with each revision's phase."""

from __future__ import annotations

import argparse
import json
import random
import string
import subprocess
import sys

import pytest

from migrations_policy import cli

from .helpers import copy_example, forget_example_modules

SEEDS = [random.randrange(1 << 30) for _ in range(2)]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SHELLS = {"dbsync": (cli.dbsync_main, cli.build_dbsync_parser), "migrations-policy": (cli.main, cli.build_developer_parser)}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _bad_value_options(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommand's options that take a number (a value that is not one is a usage error)."""
    return [a.option_strings[-1] for a in parser._actions
            if a.option_strings and getattr(a.type, "__qualname__", "").startswith("_number")]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_usage_error_is_exit_2_on_every_subcommand(shell, seed, tmp_path, capsys):
    print(f"seed={seed}")
    rng = random.Random(seed)
    main, build = SHELLS[shell]
    for name, sub in sorted(_subcommands(build()).items()):
        unknown = "--" + "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(3, 12)))
        argv = [name, unknown]
        assert main(argv) == 2, argv
        line = _one_line(capsys)  # the unknown option, or a required argument missing before it
        assert unknown in line or "required" in line, line
        for option in _bad_value_options(sub):
            value = rng.choice(["x", "-1", "nan", "inf", "1e400", "", "0x10"])
            argv = [name, option, value]
            assert main(argv) == 2, argv
            assert option in _one_line(capsys)


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_every_underscore_subcommand_answers_to_its_hyphen_spelling(shell, capsys):
    main, build = SHELLS[shell]
    names = _subcommands(build())
    underscored = [name for name in names if "_" in name]
    assert shell == "migrations-policy" or "online_data_migrations" in underscored
    for name in underscored:
        hyphen = name.replace("_", "-")
        assert hyphen in names, (hyphen, sorted(names))
        helps = []
        for spelling in (name, hyphen):
            with pytest.raises(SystemExit) as exc:
                main([spelling, "--help"])
            assert exc.value.code == 0
            helps.append(capsys.readouterr().out.split("\n", 1)[1])  # past "usage: dbsync NAME"
        assert helps[0] == helps[1]


def test_hyphen_spelling_runs_the_command(tmp_path, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "upgrade", "--expand"]) == 0
    capsys.readouterr()
    codes = [cli.dbsync_main(["-c", str(ini), "--url", url, "--format", "json", spelling])
             for spelling in ("online_data_migrations", "online-data-migrations")]
    out = capsys.readouterr().out
    assert codes[0] == codes[1] == 0, out
    assert out.count('"migrations"') == 2


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("command", [["upgrade", "--contract"], ["stamp", "heads"], ["rollback"]])
def test_force_needs_a_reason(command, seed, tmp_path, capsys):
    """--force without --reason (or with a blank one) is a usage error, before anything runs:
    the database is left as it was."""
    print(f"seed={seed}")
    rng = random.Random(seed)
    ini = copy_example(tmp_path)
    forget_example_modules()
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    assert cli.dbsync_main(["-c", str(ini), "--url", url, "upgrade", "--expand"]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    for reason in ([], ["--reason", ""], ["--reason", " " * rng.randrange(1, 5)],
                   ["--reason", rng.choice(["\t", "\n", " \t "])]):
        argv = ["-c", str(ini), "--url", url, *command, "--force", *reason]
        assert cli.dbsync_main(argv) == 2, argv
        assert "--force needs --reason" in _one_line(capsys)
        assert db.read_bytes() == before


def _alembic_history(ini) -> list[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(Config(str(ini)))
    return [rev.revision for rev in script.walk_revisions()]


def test_history_and_current_show_each_revision_with_its_phase(tmp_path, capsys):
    ini = copy_example(tmp_path)
    forget_example_modules()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    base = ["-c", str(ini), "--url", url]
    assert cli.dbsync_main([*base, "current"]) == 0
    assert capsys.readouterr().out.strip() == "(no revision applied)"
    assert cli.dbsync_main([*base, "upgrade", "--expand"]) == 0
    capsys.readouterr()

    assert cli.dbsync_main([*base, "--format", "json", "history"]) == 0
    history = json.loads(capsys.readouterr().out)["revisions"]
    assert [r["revision"] for r in history] == _alembic_history(ini)  # newest first, as alembic's
    phases = {r["revision"]: r["phase"] for r in history}
    assert set(phases.values()) == {"expand", "contract"}
    applied = {r["revision"] for r in history if r["applied"]}
    assert applied and all(phases[rev] == "expand" for rev in applied)
    assert all(r["applied"] for r in history if r["phase"] == "expand")

    assert cli.dbsync_main([*base, "history"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(history)
    for line, rev in zip(lines, history):
        assert rev["revision"] in line and line.endswith(f"[{rev['phase']}]"), line
        assert ("(current)" in line) == rev["current"], line
        assert ("(head)" in line or "(effective head)" in line) == rev["head"], line  # alembic's words

    assert cli.dbsync_main([*base, "--format", "json", "current"]) == 0
    current = json.loads(capsys.readouterr().out)["current"]
    assert current and all(c["phase"] == "expand" and c["head"] for c in current), current
    assert {c["revision"] for c in current} == {r["revision"] for r in history if r["current"]}
    assert cli.dbsync_main([*base, "current"]) == 0
    text = capsys.readouterr().out
    for c in current:
        assert f"{c['revision']} (head) [expand]" in text, text
