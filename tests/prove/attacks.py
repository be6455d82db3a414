"""What the attack suites share: the expanded inventory app, the routes that apply an attack,
drawing attacks from a printed seed, and the loop that runs each on a fresh database.

``test_gate_attacks`` and ``test_drop_attacks`` each describe their attacks and what must hold
after one; :func:`run_attacks` runs them (a fresh database per attack, disposed and dropped
after) and fails once, listing every failed attack with the seed that replays the draw.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import pytest
import sqlalchemy as sa
from alembic import command as alembic_command

from ..gate.conftest import App
from ..helpers import copy_example, forget_example_modules, set_ini_option

#: The inventory example's expand head (release 2).
EXPAND_HEAD = "r2_meta_display_name_version"

Attack = TypeVar("Attack")


def expanded_app(tmp_path: Path, db_url) -> App:
    """A copy of the inventory example at release 2: expanded, its data migrations not run."""
    forget_example_modules()
    ini = copy_example(tmp_path)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, db_url)
    app.alembic_upgrade("r1_inventory")
    app.seed_release1()
    assert app.dbsync("upgrade", "--expand") == 0
    return app


def run_route(app: App, route: str, capsys) -> tuple[int | None, str]:
    """Run *route* ("dbsync upgrade --contract", "alembic upgrade heads", ...); (dbsync exit code
    or None for alembic, what it printed or raised)."""
    words = route.split()
    capsys.readouterr()
    if words[0] == "dbsync":
        code = app.dbsync(*words[1:])
        captured = capsys.readouterr()
        return code, captured.out + captured.err
    project = app.project()
    try:
        getattr(alembic_command, words[1])(project.alembic_config, words[2])
        return None, ""
    except Exception as exc:  # alembic's CLI prints any of them as FAILED: ...
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        project.dispose()


def draw(everything: Sequence[Attack], backend: str, count_variable: str, seed_variable: str,
         default: int) -> tuple[int, list[Attack]]:
    """(seed, attacks): *count_variable* (default *default*; ``all`` walks everything) attacks drawn
    for *backend* from a random seed, or the one *seed_variable* names (to replay a draw)."""
    seed = int(os.environ.get(seed_variable) or random.SystemRandom().randrange(1 << 30))
    wanted = os.environ.get(count_variable, str(default))
    if wanted == "all":
        return seed, list(everything)
    return seed, random.Random(f"{seed}-{backend}").sample(list(everything), min(int(wanted), len(everything)))


def skip_most_on_servers(form: str, backend: str, share: float = 0.34) -> None:
    """A control test per form: SQLite runs every form, a server backend about *share* of them
    (drawn per process, so successive runs cover different forms; ``MP_ATTACK_CONTROLS=all`` runs
    every one)."""
    if os.environ.get("MP_ATTACK_CONTROLS") == "all":
        return
    if backend != "sqlite" and random.Random(f"{form}-{backend}-{os.getpid()}").random() > share:
        pytest.skip("drawn out this run (SQLite runs every form)")


def _fresh_url(backend: str, directory: Path) -> sa.URL:
    from ..conftest import get_server

    if backend == "sqlite":
        return sa.URL.create("sqlite", database=str(directory / "test.db"))
    return get_server(backend).create_database()


def run_attacks(tmp_path: Path, backend: str, seed: int, seed_variable: str, attacks: Sequence[Attack],
                attempt: Callable[[App, Attack], list[str]]) -> None:
    """Run each attack on a fresh expanded app (*attempt* returns what went wrong, each with the
    output); fail listing every failed attack and the seed that replays the draw."""
    from ..conftest import get_server

    failures = []
    for number, attack in enumerate(attacks):
        directory = tmp_path / f"attack{number}"
        directory.mkdir()
        url = _fresh_url(backend, directory)
        app = expanded_app(directory, url)
        try:
            problems = attempt(app, attack)
            if problems:
                failures.append(f"{attack}: {', '.join(problems)}")
        finally:
            app.engine.dispose()
            if backend != "sqlite":
                get_server(backend).drop_database(url)
    assert not failures, (f"{len(failures)} of {len(attacks)} attacks failed, seed {seed} "
                          f"({seed_variable}={seed} replays it):\n" + "\n".join(failures))
