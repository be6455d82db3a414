"""A worker process that cannot run at all (a broken installation) ends the run with one line: how it ended and the
last line it wrote on its stderr (kept in an anonymous file, ``parallel._errors_file``), never a traceback."""

from __future__ import annotations

import os
import random

import pytest

from migrations_policy.lint.offline.plugins import Plugins
from migrations_policy.lint.options import Options
from migrations_policy.lint.sandbox.parallel import WorkerError, _run_worker

SEED = int(os.environ.get("MP_WORKER_ERROR_SEED") or random.randrange(10 ** 9))
print(f"test_worker_errors: MP_WORKER_ERROR_SEED={SEED}")


def test_a_worker_that_cannot_start_is_named_with_its_last_error_line(tmp_path):
    rng = random.Random(SEED)
    module = "migrations_policy_no_such_worker_" + "".join(rng.choice("abcdefghij") for _ in range(8))
    path = tmp_path / "r1.py"
    path.write_text("revision = 'r1'\n")
    options = Options(dialects=("postgresql",), plugins=Plugins())
    with pytest.raises(WorkerError) as raised:
        _run_worker([(0, path, "expand")], options, 1, lambda *args: None, module=module)
    message = str(raised.value)
    assert "exited with status 1" in message and f"No module named {module}" in message, (SEED, message)
    assert "\n" not in message, (SEED, message)
