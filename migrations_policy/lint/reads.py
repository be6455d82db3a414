"""The files a script reads while it is linted: its cached verdict depends on their content.

``watch()`` (in the worker's child, before the script is imported) installs an audit hook
(``sys.addaudithook``, event ``open``) that notes every path opened for reading;
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
    """Start noting the paths opened for reading in this process; the list they are appended to."""
    opened: list = []
    write = os.O_WRONLY

    def hook(event: str, args: tuple) -> None:
        if event != "open":
            return
        try:
            path, mode, flags = args
            if isinstance(path, (str, bytes)) and len(opened) <= MAX_FILES and (
                    ("r" in mode or "+" in mode) if isinstance(mode, str) else not flags & write):
                opened.append(os.path.abspath(os.fsdecode(path)))
        except Exception:  # noqa: BLE001 - an audit hook that raises would fail the script's open()
            pass

    sys.addaudithook(hook)
    return opened


def dependencies(opened: list, script: str) -> list[tuple[str, str]]:
    """``(path, sha256 or ABSENT)`` of the files in *opened* the verdict of *script* depends on."""
    from .loader import _installed_prefixes

    if len(opened) > MAX_FILES:
        return [TOO_MANY]
    prefixes = _installed_prefixes()
    own = os.path.realpath(script)
    found = []
    for path in dict.fromkeys(opened):
        real = os.path.realpath(path)
        if real == own or real.startswith(prefixes) or "__pycache__" in real.split(os.sep) \
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
