"""What the linter's analyses answer (``Analysis``) and over how many processes (``jobs``).

Apart from ``lint.sandbox.parallel`` (which starts the worker) so that a run that never starts it -- every script read
by ``lint.static`` -- does not import it (subprocess, the channel, ...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

ENV = "MIGRATIONS_POLICY_LINT_JOBS"


@dataclass
class Analysis:
    hits: list[list[list]]
    #: index -> (message, traceback) of the linter's own errors.
    internal: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: index -> [(path, sha256)] of the local modules the script imported (part of its cache entry).
    modules: dict[int, list] = field(default_factory=dict)
    #: The indexes whose verdict is the script's own answer (a MP000 among them is cached: a syntax error, a
    #: script that cannot be loaded, the CPU limit answered by its child -- ``worker._out_of_cpu``), not one built
    #: for a child that did not answer (the wall-clock backstop, RLIMIT_CPU, a death).
    judged: set[int] = field(default_factory=set)

    def place(self, part: "Analysis", indexes: list[int]) -> None:
        """Put the answers of *part* (an analysis of some of the tasks, in order) at *indexes* of this one."""
        for position, index in enumerate(indexes):
            self.hits[index] = part.hits[position]
            if position in part.internal:
                self.internal[index] = part.internal[position]
            if position in part.modules:
                self.modules[index] = part.modules[position]
            if position in part.judged:
                self.judged.add(index)


def jobs(given: int | None = None) -> int:
    """*given* (``lint --jobs N``), else ``$MIGRATIONS_POLICY_LINT_JOBS``, else the CPUs this process may use."""
    if given:
        return max(1, int(given))
    value = os.environ.get(ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
