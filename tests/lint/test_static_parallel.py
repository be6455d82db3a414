"""``lint.static.parallel.read_all``: the same answers over one process or several (``--jobs``), and a child
that fails leaves its scripts unread (they are run in the worker), never answers for them."""

from __future__ import annotations

import random
import sys

from migrations_policy.lint.static import parallel as static_parallel
from migrations_policy.lint.options import Options

from tests.lint.test_static_equivalence import SEED, _script


def _tasks(tmp_path, count: int):
    rng = random.Random(SEED)
    tasks = []
    for index in range(count):
        path = tmp_path / f"s{index}.py"
        path.write_text(_script(rng, index))
        tasks.append((path, rng.choice(["expand", "contract"])))
    return tasks


def test_the_answers_do_not_depend_on_the_number_of_processes(tmp_path):
    tasks = _tasks(tmp_path, 3 * static_parallel.MIN_SHARE)
    options = Options(dialects=("postgresql", "mysql", "sqlite"))
    alone = static_parallel.read_all(tasks, options, 1)
    assert alone, SEED
    assert static_parallel.read_all(tasks, options, 3) == alone, SEED
    assert static_parallel.read_all(tasks, options, 2) == alone, SEED


def test_a_failing_child_leaves_its_scripts_to_the_worker(tmp_path, monkeypatch):
    tasks = _tasks(tmp_path, 2 * static_parallel.MIN_SHARE)
    options = Options(dialects=("postgresql",))
    alone = static_parallel.read_all(tasks, options, 1)
    parent = __import__("os").getpid()
    real = static_parallel.marshal.dumps

    def broken(value):  # only in the child: it cannot send its answers
        if __import__("os").getpid() != parent:
            raise OSError("broken pipe")
        return real(value)

    monkeypatch.setattr(static_parallel.marshal, "dumps", broken)
    found = static_parallel.read_all(tasks, options, 2)
    child_share = {index for index in range(len(tasks)) if index % 2 == 1}
    assert not set(found) & child_share, SEED
    assert found == {i: hits for i, hits in alone.items() if i not in child_share}, SEED
    print(f"{len(found)} read here, {len(alone) - len(found)} left to the worker", file=sys.stderr)
