"""The limits of a forked child (``lint.sandbox.worker``, ``lint.replay.worker``): CPU time, wall-clock time, memory, and
its end with the worker's.

``lint_timeout`` is CPU time (``limit_cpu``): a loaded machine slows a script down without costing it its verdict;
``wall_limit`` is the backstop for a script that blocks (a sleep, a lock, a socket) and uses no CPU.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

#: The wall-clock backstop is this many times ``lint_timeout`` (which is CPU time): generous, so that only a
#: script that blocks reaches it, not one slowed down by a loaded machine.
WALL_FACTOR = 6


def wall_limit(timeout: float) -> float:
    """Seconds of wall-clock time after which a child is killed whatever its CPU time (0: no limit)."""
    return timeout * WALL_FACTOR if timeout > 0 else 0.0


def limit_cpu(seconds: float, keep_handler: bool = False) -> None:
    """Let this process use *seconds* of CPU time: a profiling timer (``ITIMER_PROF``, SIGPROF's default action
    ends the process; *keep_handler*: the handler set for it stays, the child's ``worker._out_of_cpu``) at
    *seconds*, and ``RLIMIT_CPU`` -- which the process cannot raise -- at the first whole second after it
    (SIGXCPU; strictly after, so that the timer's handler has time to answer) and one second later (SIGKILL) for a
    script that ignores or resets the timer.  Core dumps off (SIGXCPU's default action dumps one).  The parent
    tells which it was from the child's CPU time (``wait4``)."""
    if seconds <= 0:
        return
    import math
    import resource

    for name in ("SIGXCPU",) if keep_handler else ("SIGPROF", "SIGXCPU"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    soft = math.floor(seconds) + 1
    for limit, value in ((resource.RLIMIT_CORE, (0, 0)), (resource.RLIMIT_CPU, (soft, soft + 1))):
        try:
            _, hard = resource.getrlimit(limit)
            if hard != resource.RLIM_INFINITY:
                value = (min(value[0], hard), min(value[1], hard))
            resource.setrlimit(limit, value)
        except (ValueError, OSError):
            pass
    signal.setitimer(signal.ITIMER_PROF, seconds)


def limit_memory(mebibytes: int) -> None:
    """Let this child's address space grow by at most *mebibytes* MiB (``RLIMIT_AS``): beyond it an allocation
    fails with ``MemoryError`` (``MP000``) instead of taking the machine's memory from the other scripts."""
    if mebibytes <= 0:
        return
    import resource

    try:
        with open("/proc/self/statm", "rb") as fh:
            current = int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):  # not Linux: the limit counts from nothing
        current = 0
    limit = current + mebibytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


_LIBC: list = []


def libc():
    """The C library's handle, opened once (in the worker before the first fork: every child inherits it)."""
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def die_with_worker(worker: int) -> None:
    """Linux: this child gets SIGKILL when the *worker* dies (a worker killed mid-run leaves no script running)."""
    try:
        libc().prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != worker:
        os._exit(1)


def out_of_cpu(signum: int, cpu: float, timeout: float) -> bool:
    """Whether a child killed by *signum* after *cpu* s of CPU time was ended by ``limit_cpu``: the profiling
    timer or RLIMIT_CPU's SIGXCPU (the CPU time ``wait4`` reports is sampled by ticks: it may fall short of the
    timer's by a tenth or more), or RLIMIT_CPU's SIGKILL (a second past the limit at least)."""
    if signum in (signal.SIGPROF, signal.SIGXCPU):
        return cpu >= timeout * 0.5
    return signum == signal.SIGKILL and cpu >= timeout


@contextmanager
def within(timeout: float):
    """Run the block in this process (the worker: importing plugins, pre-importing the scripts' packages) within
    *timeout* s of CPU time (``ITIMER_PROF``) and ``wall_limit(timeout)`` s of wall-clock time (``ITIMER_REAL``),
    as a script's child: past either, ``TimeoutError`` saying which is raised in the block."""
    if timeout <= 0:
        yield
        return

    def expired(signum, frame):
        if signum == signal.SIGPROF:
            raise TimeoutError(f"did not finish within {timeout:g} s of CPU time")
        raise TimeoutError(f"did not finish within {wall_limit(timeout):g} s of wall-clock time")

    previous = {signum: signal.signal(signum, expired) for signum in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, timeout)
    signal.setitimer(signal.ITIMER_REAL, wall_limit(timeout))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
