"""``migrations-policy rehearse`` and the pytest helper: output, exit codes, refusals, the workload hook."""

from __future__ import annotations

import json
import pytest
import sqlalchemy as sa

from migrations_policy import cli
from migrations_policy.testing.rehearsal import assert_upgrade_safe, rehearse_upgrade

from ..helpers import copy_example, forget_example_modules

FAST = ["--seconds", "0.5", "--threads", "2", "--seed-rows", "10", "--seed", "3"]


@pytest.fixture
def ini(tmp_path):
    path = copy_example(tmp_path)
    forget_example_modules()
    yield path
    forget_example_modules()


def rehearse_argv(ini, url, *extra):
    return ["rehearse", "-c", str(ini), "--url", url, "--old-models", "inventory.models.release1",
            "--new-models", "inventory.models.release2", "--from-revision", "r1_inventory", *extra]


def test_json_report_and_exit_code(ini, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    assert cli.main(rehearse_argv(ini, url, "--no-contract", "--format", "json", *FAST)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exit_code"] == 0 and out["errors"] == [] and out["incompatible"] == []
    assert [p["name"] for p in out["phases"]] == ["build", "expand", "rolling"]
    assert out["phases"][2]["running"] == ["old", "new"] and out["phases"][2]["operations"]["new"]


def test_contract_under_release2_code_exits_1_and_names_the_columns(ini, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    assert cli.main(rehearse_argv(ini, url, *FAST)) == 1
    out = capsys.readouterr().out
    assert "INCOMPATIBLE: after contract: new: nodes.extra: column does not exist" in out
    assert "ERROR release-N+1 code" in out and out.strip().splitlines()[-1].startswith("FAILED")


@pytest.mark.parametrize("url, message", [
    ("postgresql+psycopg://ops:hunter2@db.example.com/prod", "only against a scratch database on 127.0.0.1"),
    ("mysql+pymysql://ops:hunter2@10.0.0.5/prod", "only against a scratch database on 127.0.0.1"),
    ("sqlite://", "not an in-memory database"),
])
def test_refuses_anything_but_a_local_scratch_database(ini, url, message, capsys):
    assert cli.main(rehearse_argv(ini, url, *FAST)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "hunter2" not in err[0]


def test_refuses_a_database_with_tables(ini, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    assert cli.main(rehearse_argv(ini, url, "--no-contract", *FAST)) == 0
    capsys.readouterr()
    assert cli.main(rehearse_argv(ini, url, *FAST)) == 2
    err = capsys.readouterr().err.strip()
    assert "needs an empty scratch database" in err and "nodes" in err and "\n" not in err


@pytest.mark.parametrize("extra, message", [
    (["--old-models", "no_such_module"], "cannot import 'no_such_module'"),
    (["--old-models", "inventory.models.release1:Nope"], "has no 'Nope'"),
    (["--old-models", "inventory.data_migrations"], "no mapped classes"),
    (["--workload", "inventory"], "expected MODULE:FUNCTION"),
    (["--workload", "inventory.releases:RELEASE_MAPPING"], "is not a function"),
    (["--value", "nodes=1"], "expected TABLE.COLUMN=VALUE"),
    (["--seconds", "0"], "must be positive"),
    (["--threads", "many"], "not a number"),
    (["--no-contract", "--contract-to", "x"], "not allowed with argument"),
])
def test_bad_arguments_are_one_line_errors(ini, tmp_path, extra, message, capsys):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    assert cli.main(rehearse_argv(ini, url, *FAST, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "scratch.db").exists() or (tmp_path / "scratch.db").stat().st_size == 0


def count_nodes(session, models, rng):
    """A project's own operation: reads through the release's Node class."""
    session.scalar(sa.select(sa.func.count()).select_from(models.classes["Node"]))
    return "count_nodes"


def test_pytest_helper_with_a_project_workload(ini, tmp_path):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    result = assert_upgrade_safe(ini, url, "inventory.models.release1", "inventory.models.release2",
                                 "r1_inventory", contract=False, seconds=0.5, threads=2, seed=5,
                                 workload=count_nodes)
    assert result.phases[1].operations("old")["count_nodes"] > 0
    assert result.phases[2].operations("new")["count_nodes"] > 0


def test_pytest_helper_fails_with_the_report(ini, tmp_path):
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    with pytest.raises(AssertionError, match="rolling-upgrade rehearsal failed:(.|\n)*nodes.extra"):
        assert_upgrade_safe(ini, url, "inventory.models.release1", "inventory.models.release2", "r1_inventory",
                            seconds=0.5, threads=2)
    assert rehearse_upgrade  # the non-raising form is the same call


def test_progress_lines_name_phases_and_revisions(ini, tmp_path, capsys):
    """rehearse with --progress line: each phase as it starts and ends, each revision with its time."""
    url = f"sqlite:///{tmp_path / 'scratch.db'}"
    assert cli.main(rehearse_argv(ini, url, "--no-contract", "--progress", "line", "--progress-interval", "0.01",
                                  *FAST)) == 0
    err = capsys.readouterr().err
    for expected in ("rehearse: phase build: release-N code running", "rehearse: phase expand took ",
                     "rehearse: phase rolling: release-N code and release-N+1 code running",
                     "rehearse: running r1_inventory -> r2_meta_display_name_version",
                     "rehearse: ran r1_inventory -> r2_meta_display_name_version"):
        assert expected in err, (expected, err)
