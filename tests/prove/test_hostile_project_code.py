"""The project's own code cannot crash or silence a dbsync command.

A drawn *stop* (``sys.exit(k)`` for any k, 0 included, ``exit()``, ``raise SystemExit``,
an exception of any kind, ``GeneratorExit``, an exception group, a failed import) is put
in a drawn place of the inventory example at release 2 — the top of a new expand
revision, its ``upgrade()`` after an ``add_column`` (inside a ``batch_alter_table``
block or not), the top of the data-migration module, or the body of a data-migration
function — and a drawn dbsync command runs (``upgrade --expand``, ``status``, ``check``,
``online_data_migrations``).

When the command runs the stopped code, it exits 8 if the code stopped a revision's upgrade() or
a data migration's function while it ran (2 if it stopped the code loading), with one line naming the file and line
and what the code did (never 0: ``sys.exit(0)`` used to end ``dbsync check`` as
"success"), and nothing of it is applied: the version table does not name the revision,
its column is not there, the batch's rows are as they were.  When the command does not
run that code for real (``status`` and ``check`` read a revision offline), it exits as it
does for the same revision without the stop.  Never a traceback.

``MP_HOSTILE_CASES`` cases per backend (default 8 on SQLite, 3 on the servers) from
``MP_HOSTILE_SEED`` (printed; replays a draw).  MariaDB is left out: its DDL commits
statement by statement, and what a stopped revision leaves is the journal's business
(``tests/prove/test_expand_kill.py``).
"""

from __future__ import annotations

import os
import random
import re

import pytest
import sqlalchemy as sa

from ..gate.conftest import ORPHANS, App
from ..helpers import copy_example, forget_example_modules, set_ini_option
from .attacks import _fresh_url

REVISION = "r3_hostile"
COMMANDS = ("upgrade --expand", "status", "check", "online_data_migrations")


def _stops(rng: random.Random) -> list[tuple[str, str]]:
    """(source, what the one line says of it)."""
    k = rng.choice([0, 0, 1, 2, 3, 4, 5, 7, rng.randrange(256)])
    word = f"hostile{rng.randrange(10**6)}"
    return [
        (f"sys.exit({k})", f"called sys.exit({k})"),
        (f"exit({k})", f"called sys.exit({k})"),
        (f"raise SystemExit({word!r})", f"called sys.exit({word!r})"),
        ("raise SystemExit", "called sys.exit(None)"),
        (f"raise RuntimeError({word!r})", f"RuntimeError: {word}"),
        (f"raise KeyError({word!r})", f"KeyError: '{word}'"),
        ("1 / 0", "ZeroDivisionError: division by zero"),
        ("raise GeneratorExit", "GeneratorExit"),
        (f"raise BaseExceptionGroup({word!r}, [ValueError('v')])", f"ExceptionGroup: {word} (1 sub-exception)"),
        (f"import {word}_missing", f"ModuleNotFoundError: No module named '{word}_missing'"),
    ]


PLACES = ("revision_top", "upgrade", "upgrade_in_batch", "data_module_top", "data_function")


def _write(app: App, place: str, stop: str) -> tuple[str, int]:
    """Install the revision (with *stop* where *place* says); (file name, line of the stop)."""
    versions = app.ini.parent / "migrations" / "versions" / "expand"
    top = stop if place == "revision_top" else "pass"
    plain = 'op.add_column("nodes", sa.Column("zz", sa.Text()))'
    body = {"upgrade": f'{plain}\n    {stop}',
            "upgrade_in_batch": 'with op.batch_alter_table("nodes") as batch:\n'
                                f'        batch.add_column(sa.Column("zz", sa.Text()))\n        {stop}'}
    source = ('"""release 3: hostile"""\nimport sys\n\nfrom alembic import op\nimport sqlalchemy as sa\n\n'
              f'revision = "{REVISION}"\ndown_revision = "r2_meta_display_name_version"\nbranch_labels = None\n'
              f"depends_on = None\n{top}\n\n\ndef upgrade() -> None:\n"
              f"    {body.get(place, plain)}\n\n\n"
              "def downgrade() -> None:\n    pass\n")
    (versions / "0003_r3_hostile.py").write_text(source)
    if place == "revision_top" or place.startswith("upgrade"):
        return "0003_r3_hostile.py", _line_of(source, stop)
    module = app.ini.parent / "inventory" / "data_migrations.py"
    text = module.read_text()
    if place == "data_module_top":
        text = "import sys\n" + text + f"\n{stop}\n"
    else:
        head = 'def port_node_orphans(connection, batch):\n'
        assert head in text
        docstring_end = text.index('"""', text.index('"""', text.index(head)) + 3) + 3
        text = "import sys\n" + text[:docstring_end] + f"\n    {stop}" + text[docstring_end:]
    module.write_text(text)
    forget_example_modules()  # the next command imports it again, as a new process would
    return "data_migrations.py", _line_of(text, stop)


def _line_of(text: str, stop: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.strip() == stop)


def _runs_the_stop(place: str, command: str) -> bool:
    if place in ("revision_top", "data_module_top"):
        return True  # every command loads the scripts and the data migrations
    if place == "data_function":
        return command == "online_data_migrations"
    return command == "upgrade --expand"


def _app(directory, backend) -> App:
    forget_example_modules()
    ini = copy_example(directory)
    set_ini_option(ini, "migrations_policy", "lock_timeout", "1")
    app = App(ini, _fresh_url(backend, directory))
    app.alembic_upgrade("r1_inventory")
    app.seed_release1()
    assert app.dbsync("upgrade", "--expand") == 0
    # every data migration but the orphans' (its function is a place a stop may be put): the
    # object versions are complete, so the next expand is not refused before it runs
    assert app.dbsync("online_data_migrations", *(f"--migration={name}" for name in (
        "nodes_extra_to_meta", "nodes_name_to_display_name", "object_version_nodes", "object_version_ports"))) == 0
    return app


def _orphans(app: App) -> int:
    with app.engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM ports WHERE node_id > 10000")).scalar()


def _run(app: App, command: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = app.dbsync("--progress", "none", *command.split())
    except BaseException as exc:  # noqa: BLE001 - escaping dbsync_main at all is the failure
        return -1, f"ESCAPED dbsync_main: {type(exc).__name__}: {exc}"
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_projects_code_cannot_crash_or_silence_a_command(tmp_path, backend, capsys):
    from ..conftest import get_server

    if backend == "mysql":
        pytest.skip("MariaDB commits DDL statement by statement: a stopped revision is the journal's (test_expand_kill)")
    seed = int(os.environ.get("MP_HOSTILE_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(f"{seed}-{backend}")
    count = int(os.environ.get("MP_HOSTILE_CASES") or (8 if backend == "sqlite" else 3))
    failures = []
    for number in range(count):
        stop, said = rng.choice(_stops(rng))
        place, command = rng.choice(PLACES), rng.choice(COMMANDS)
        case = f"{stop!r} in {place}, dbsync {command}"
        directory = tmp_path / f"case{number}"
        directory.mkdir()
        app = _app(directory, backend)
        try:
            # the same revision without the stop: what the command answers when the stop does not
            # run (read-only commands; online_data_migrations completes the orphans' migration: 0)
            control = 0
            if command in ("status", "check") and not _runs_the_stop(place, command):
                (control_file, _) = _write(app, "upgrade", "pass")
                control, _ = _run(app, command, capsys)
                (app.ini.parent / "migrations" / "versions" / "expand" / control_file).unlink()
            if command == "upgrade --expand":  # the next release's expand waits for this one's migrations
                assert app.dbsync("online_data_migrations", "--migration=port_node_orphans") == 0
            filename, line = _write(app, place, stop)
            orphans = _orphans(app)
            code, output = _run(app, command, capsys)
            problems = []
            if "Traceback" in output or output.startswith("ESCAPED"):
                problems.append("traceback or escaped")
            named = re.compile(rf"{re.escape(filename)}:{line}: {re.escape(said)}")
            if place == "data_function" and command == "online_data_migrations":
                # one migration's failure does not stop the others: the run's report names it (exit 8)
                if code != 8:
                    problems.append(f"exit {code}, not 8")
                if not named.search(output):
                    problems.append(f"the report does not name {filename}:{line} and {said!r}")
            elif _runs_the_stop(place, command):
                errors = [text for text in output.splitlines() if text.startswith("dbsync: error:")]
                expected = 8 if place.startswith("upgrade") else 2  # a revision running, or the code loading
                if code != expected:
                    problems.append(f"exit {code}, not {expected}")
                if len(errors) != 1 or not named.search(errors[0]):
                    problems.append(f"not one line naming {filename}:{line} and {said!r}")
            elif code != control:
                problems.append(f"exit {code}, the same command without the stop exits {control}")
            if REVISION in app.heads() and _runs_the_stop(place, command):
                problems.append("the revision is recorded")
            if "zz" in app.columns("nodes") and place.startswith("upgrade") and command == "upgrade --expand":
                problems.append("half applied: nodes.zz is there")
            if place == "data_function" and command == "online_data_migrations" and _orphans(app) != orphans:
                problems.append("the batch's rows changed")
            if problems:
                failures.append(f"{case}: {', '.join(problems)} ({output.strip()[:300]})")
        finally:
            app.engine.dispose()
            forget_example_modules()
            if backend != "sqlite":
                get_server(backend).drop_database(app.url)
    assert not failures, f"seed {seed} (MP_HOSTILE_SEED={seed} replays it):\n" + "\n".join(failures)


def test_the_draw_covers_every_place_and_command():
    """Every place and command can be drawn, and each place's stop runs under some command."""
    assert {p for p in PLACES for c in COMMANDS if _runs_the_stop(p, c)} == set(PLACES)
    assert ORPHANS > 0  # the data function has rows to run on
