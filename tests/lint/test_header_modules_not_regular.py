"""A module a header imports is read only when it is a regular file (red-team F6).

``branch_labels = (migration.CONTRACT_BRANCH,)`` makes the linter read ``migration.py``'s source.  A FIFO there
(or a symlink to one, or to a device, or a socket; as ``name.py`` or ``name/__init__.py``) once blocked the whole
run forever.  Each generated layout must be answered within seconds, the value unresolved.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

import pytest

from migrations_policy.lint.script.headers import read_header


def _fifo(path):
    os.mkfifo(path)


def _link_to_fifo(path):
    target = path.parent / f".target-{path.name}"
    os.mkfifo(target)
    os.symlink(target, path)


def _link_to_device(path):
    os.symlink("/dev/zero", path)


def _socket(path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


KINDS = [_fifo, _link_to_fifo, _link_to_device, _socket]
PLACES = ["migration.py", "migration/__init__.py"]


@pytest.mark.parametrize("make, place", list(itertools.product(KINDS, PLACES)))
def test_non_regular_header_module_does_not_block(tmp_path, make, place):
    target = tmp_path / place
    target.parent.mkdir(exist_ok=True)
    keep = make(target)
    script = tmp_path / "a1.py"
    text = 'import migration\nrevision = "a1"\ndown_revision = None\nbranch_labels = (migration.CONTRACT_BRANCH,)\n'
    script.write_text(text)
    result = {}
    thread = threading.Thread(target=lambda: result.update(header=read_header(text, script)), daemon=True)
    thread.start()
    thread.join(20)
    if keep is not None:
        keep.close()
    assert not thread.is_alive(), f"reading the header blocked on a {make.__name__[1:]} at {place}"
    assert result["header"].revision == "a1" and result["header"].branch_labels == ()
