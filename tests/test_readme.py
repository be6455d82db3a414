"""The README's two set-up commands run as written, with the distribution's own ``python3``
(``/usr/bin/python3``: Debian's, which refuses ``pip install`` outside a virtual environment,
PEP 668), in a fresh copy of the repository.  CI runs the second one for real (``.ci/run``
reads it from the README); here it runs with tox's commands narrowed to one test module
(``TOX_OVERRIDE``), so the suite does not run itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION_PYTHON = Path("/usr/bin/python3")


def setup_commands(readme: Path | None = None) -> list[str]:
    """The shell commands of the README's set-up section, in order, as ``.ci/run`` reads them."""
    extra = [str(readme)] if readme is not None else []
    return [subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_command"), str(n), *extra],
                           capture_output=True, text=True, check=True).stdout.strip() for n in (1, 2)]


def test_the_readme_has_exactly_two_setup_commands_and_ci_runs_the_second():
    commands = setup_commands()
    assert len(commands) == 2 and all("\n" not in command for command in commands)
    assert "examples/demo.py" in commands[0] and commands[1].endswith("tox")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_command" in ci  # .ci/run takes the command from the README, not a copy of it


def test_setup_commands_are_found_in_another_readme(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n## Set up on a fresh Debian machine\n```sh\na\n```\ntext\n```sh\nb c\n```\n## Next\n```sh\nd\n```\n")
    assert setup_commands(readme) == ["a", "b c"]


def _fresh_copy(tmp_path: Path) -> Path:
    """The tracked files as they are now (a clone of HEAD would miss uncommitted work)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path / "checkout"
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return copy


#: Inherited from the run this test is part of, never passed on: its virtual environment, and tox's and
#: pytest's own variables -- tox reads ``TOX_<SETTING>`` as its options, so the ``TOX_WORK_DIR`` the outer
#: tox sets for its commands made the copy's tox re-create the *outer* run's ``.tox/py`` while other
#: workers' tests ran from it (CI, ``-n 2``: 15 tests failed with "No module named 'sqlalchemy'").
_INHERITED = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")
_INHERITED_PREFIXES = ("TOX", "PYTEST_", "_PYTEST")


def _as_written_env(environ: dict[str, str], extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a README command runs in: the distribution's python3 first on PATH, nothing of
    this test run's virtual environment, tox run or pytest run; then *extra_env*."""
    env = {key: value for key, value in environ.items()
           if key not in _INHERITED and not key.upper().startswith(_INHERITED_PREFIXES)}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    env["DEBIAN_FRONTEND"] = "noninteractive"
    env.update(extra_env or {})
    return env


def test_a_readme_command_inherits_nothing_of_the_run_it_is_tested_in():
    outer = {"HOME": "/root", "TOX_WORK_DIR": "/ci/.tox", "TOX_ENV_DIR": "/ci/.tox/py", "TOX_ENV_NAME": "py",
             "TOXENV": "py", "TOX_PACKAGE": "/ci/.tox/.tmp/package/1/x.tar.gz", "PYTEST_XDIST_WORKER": "gw1",
             "PYTEST_CURRENT_TEST": "tests/test_readme.py::t", "VIRTUAL_ENV": "/ci/.tox/py",
             "PYTHONPATH": "/ci", "PATH": "/ci/.tox/py/bin:/usr/bin"}
    env = _as_written_env(outer, {"TOX_OVERRIDE": "testenv.commands=pytest -q tests/test_layering.py"})
    assert env == {"HOME": "/root", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
                   "TOX_OVERRIDE": "testenv.commands=pytest -q tests/test_layering.py"}


def _run_as_written(command: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=_as_written_env(dict(os.environ), extra_env),
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_the_readme_commands_run_as_written_with_the_distribution_python(tmp_path):
    assert DISTRIBUTION_PYTHON.exists(), "no /usr/bin/python3: the README's commands assume Debian's python3"
    if os.geteuid() != 0:
        pytest.fail("the README's commands are written for root (apt-get); run this test as root", pytrace=False)
    demo, suite = setup_commands()
    checkout = _fresh_copy(tmp_path)

    proc = _run_as_written(demo, checkout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Done: the inventory runs release 3" in proc.stdout, proc.stdout[-2000:]
    # the virtual environment is the distribution's python's
    assert "home = /usr/bin" in (checkout / ".venv" / "pyvenv.cfg").read_text()

    proc = _run_as_written(suite, checkout, {"TOX_OVERRIDE": "testenv.commands=pytest -q tests/test_layering.py"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]
    assert (checkout / "docs" / "_build" / "html" / "index.html").exists()  # the docs env ran too
