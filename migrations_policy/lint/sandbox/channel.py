"""The worker -> linter result channel, read by a party that does not trust it.

A script runs in a child of the worker and shares the user's uid: it can open
``/proc/<worker>/fd/1`` (or the linter's end of the pipe) and write frames of its
own, now or from a descendant long after it was judged.  It can always lie about its
own verdict; ``Ledger`` makes sure it cannot decide another file's:

* ``("start", i)`` only for an index of this worker's job, once;
* ``("done", i, ...)`` only while ``i`` is started and not yet done, once;
* ``("end",)`` (the worker's last frame) only when every started index is done, once;
  nothing may follow it (``drain`` after the worker exited).

A forged frame for another index is either early (then the worker's own frame for
that index arrives as a duplicate) or late (a duplicate itself): either way it breaks
one of these rules, and ``Forged`` is raised; the caller then trusts none of the
worker's results (``parallel``: ``MP000`` naming every script started in it, nothing
cached).  Frames are length-prefixed marshal (``FRAME``), at most ``MAX_FRAME`` bytes.
"""

from __future__ import annotations

import marshal
import os
import select
import struct

FRAME = struct.Struct("!I")
#: A larger announced frame is not one the worker wrote.
MAX_FRAME = 256 * 1024 * 1024
_CHUNK = 1 << 20


class Forged(Exception):
    """A frame the worker did not send (or sent against the protocol); one line."""


class Broken(Exception):
    """The channel ended inside a frame, or a frame does not decode."""


class Ledger:
    """The assignments of one worker: which index may be answered, and when."""

    def __init__(self, names: dict):
        """*names*: index -> the file it stands for (named in ``Forged``'s message)."""
        self._names = names
        self._allowed = set(names)
        self.started: list[int] = []  # in order, as announced (the scripts run in this worker)
        self.open: set[int] = set()
        self.results: dict[int, tuple] = {}
        self.ended = False

    def start(self, index) -> None:
        if type(index) is not int:
            raise Forged("a start that names no file")
        if self.ended or index not in self._allowed or index in self.open or index in self.results:
            raise Forged(f"a second or unexpected start of {self._name(index)}")
        self.started.append(index)
        self.open.add(index)

    def done(self, index, result: tuple) -> None:
        if type(index) is not int or not _well_formed(result):
            raise Forged("a verdict that is not one")
        if self.ended or index not in self.open:
            raise Forged(f"a verdict for {self._name(index)}, which was not awaiting one")
        self.open.discard(index)
        self.results[index] = result

    def _name(self, index) -> str:
        try:
            return str(self._names[index])
        except (KeyError, TypeError):  # not an index of this job (unhashable: not even an index)
            return "a file it was not given"

    def end(self) -> None:
        if self.ended or self.open:
            raise Forged("an end of job while verdicts were awaited" if self.open else "a second end of job")
        self.ended = True


def _well_formed(result: tuple) -> bool:
    """``(hits, internal, modules, ...)`` as the worker sends it."""
    return (len(result) >= 3 and isinstance(result[0], list) and all(isinstance(hit, list) and len(hit) == 5
                                                                     for hit in result[0])
            and (result[1] is None or (isinstance(result[1], tuple) and len(result[1]) == 2))
            and isinstance(result[2], (list, tuple)))


class Reader:
    """Length-prefixed frames from *fd*; ``silence`` seconds without a byte raise ``TimeoutError``.

    Once *exited()* (the worker is gone) and the channel is empty, it is at its end: a descendant of a
    script holding the pipe open cannot keep the linter waiting."""

    def __init__(self, fd: int, silence: float | None, exited):
        self.fd, self.silence, self._exited = fd, silence, exited

    def _wait(self) -> bool:
        """Whether there is something to read (False: the worker is gone and the channel is empty)."""
        waited = 0.0
        while True:
            step = 0.5 if self.silence is None else min(0.5, max(0.0, self.silence - waited))
            gone = self._exited()  # before the select: whatever the worker wrote is in the pipe then
            if select.select([self.fd], [], [], 0 if gone else step)[0]:
                return True
            if gone:
                return False
            waited += step
            if self.silence is not None and waited >= self.silence:
                raise TimeoutError

    def _read(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = os.read(self.fd, min(size - len(data), _CHUNK)) if self._wait() else b""
            if not chunk:
                if data:
                    raise Broken("the channel ended inside a frame")
                return None
            data += chunk
        return bytes(data)

    def frame(self) -> tuple | None:
        """The next frame; None at the end of the channel."""
        head = self._read(FRAME.size)
        if head is None:
            return None
        size = FRAME.unpack(head)[0]
        if size > MAX_FRAME:
            raise Broken(f"a frame of {size} bytes")
        body = self._read(size)
        try:
            frame = marshal.loads(body or b"")
        except (EOFError, ValueError, TypeError) as exc:
            raise Broken(f"a frame that does not decode ({type(exc).__name__})") from None
        if not (isinstance(frame, tuple) and frame and isinstance(frame[0], str)):
            raise Broken("a frame that is not a tagged tuple")
        return frame

    def drain(self) -> bool:
        """Whether anything is left in the channel (read without waiting)."""
        os.set_blocking(self.fd, False)
        try:
            return bool(os.read(self.fd, 1))
        except BlockingIOError:
            return False
