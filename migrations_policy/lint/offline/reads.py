"""The files a script reads while it is linted: its cached verdict depends on their content.

``watch()`` (in the worker's child, before the script is imported) wraps ``open`` / ``io.open``
(``pathlib`` too) and ``os.open`` to note every path opened for reading;
``dependencies(opened, script)`` turns them into ``(path, sha256)`` pairs, as the local
modules a script imports are (``worker._local_modules``): ``op.execute(open("x.sql").read())``
is linted again when ``x.sql`` changes.  Left out: the script itself, the standard library,
installed packages and migrations_policy, bytecode caches, and what is not a regular file
(``/proc``, devices).  A file read but absent now has the digest ``ABSENT``: the result holds
while it stays absent.  A script that reads more than ``MAX_FILES`` files gets a dependency
that never holds (``TOO_MANY``): it is analysed every run.
"""

from __future__ import annotations

import hashlib
import os
import sys

MAX_FILES = 500
ABSENT = ""
#: A dependency no file satisfies (the cache looks for a file named so and finds none).
TOO_MANY = ("\0too many files read", "\0")


def watch() -> list:
    """Start noting the paths opened for reading in this process (``open``, ``io.open`` -- ``pathlib`` --
    and ``os.open`` are wrapped: an audit hook would be called for every audited event, two million times
    for a traceback a million frames deep); the list they are appended to."""
    import builtins
    import io

    opened: list = []

    def note(path, reading: bool) -> None:
        try:
            if reading and isinstance(path, (str, bytes, os.PathLike)) and len(opened) <= MAX_FILES:
                opened.append(os.path.abspath(os.fsdecode(path)))
        except Exception:  # noqa: BLE001 - noting must never change what the script's open() does
            pass

    real_open, real_os_open = builtins.open, os.open

    def open_(file, mode="r", *args, **kwargs):
        note(file, isinstance(mode, str) and ("r" in mode or "+" in mode))
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        note(path, isinstance(flags, int) and not flags & os.O_WRONLY)
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = io.open = open_
    os.open = os_open
    return opened


def dependencies(opened: list, script: str) -> list[tuple[str, str]]:
    """``(path, sha256 or ABSENT)`` of the files in *opened* the verdict of *script* depends on."""
    from migrations_policy.lint.offline.loader import _installed_prefixes

    if len(opened) > MAX_FILES:
        return [TOO_MANY]
    prefixes = _installed_prefixes()
    own = os.path.realpath(script)
    searched = set(map(os.path.abspath, filter(None, sys.path)))  # the import system probes them (python311.zip)
    found = []
    for path in dict.fromkeys(opened):
        real = os.path.realpath(path)
        if real == own or path in searched or real.startswith(prefixes) or "__pycache__" in real.split(os.sep) \
                or real.startswith(("/proc/", "/dev/", "/sys/")):
            continue
        if not os.path.lexists(path):
            found.append((path, ABSENT))
            continue
        if not os.path.isfile(real):
            continue
        try:
            with open(real, "rb") as fh:
                found.append((path, hashlib.sha256(fh.read()).hexdigest()))
        except OSError:
            found.append(TOO_MANY)  # unreadable now: not cached
    return found
