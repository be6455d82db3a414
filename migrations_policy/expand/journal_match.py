"""Which statement of a rerun is which statement of the interrupted run: by content, in order.

A revision may be written to be re-runnable (``if "isbn" not in columns: op.add_column(...)``):
its rerun then issues fewer statements than the run that was interrupted, and its statement 1
is not the interrupted run's statement 1.  So a rerun's statement is paired with the journal's
entries by its SQL, not by its position (:class:`Resume`, the one rule for ``dbsync upgrade`` /
``rollback`` and for what ``status`` predicts):

* it is the first not yet paired entry with the same SQL hash (in the journal's order): that
  entry's state decides (done: skipped; running: ``journal_state`` decides).  Entries passed
  over are statements the rerun did not issue;
* else, if a not yet paired entry acts on the same object (the same description, ``add column
  books.pages``) with other SQL, the script was edited: refused (:class:`Edited`), since running
  an edited statement after the original (a changed ``UPDATE``, a column's other type) is
  neither resuming nor safe;
* else it is a statement the interrupted run did not apply: it runs, journaled after the
  interrupted run's entries.

When the revision's statements are done, the applied statements the rerun never issued are
:meth:`Resume.left_over`: reported one line each (a conditional script skipped them, or the
script changed), not an error; their objects stay in the schema.
"""

from __future__ import annotations

from typing import Any


class Edited(Exception):
    """A rerun statement is another version of a statement the interrupted run applied."""

    def __init__(self, ordinal: int, entry: Any):
        super().__init__(entry.description)
        self.ordinal, self.entry = ordinal, entry


class Resume:
    """Pairs a rerun's statements with the journal *entries* ``{ordinal: entry}`` of one direction
    (entries have ``sql_hash`` and ``description``)."""

    def __init__(self, entries: dict[int, Any]):
        self._pending = sorted(entries.items())
        self._passed: list[tuple[int, Any]] = []
        self._next = max(entries, default=0) + 1

    def take(self, sql_hash: str, description: str) -> tuple[int, Any | None]:
        """(journal ordinal, its entry) for the next statement: the paired entry, or a new ordinal
        and None; raises :class:`Edited`."""
        for i, (ordinal, entry) in enumerate(self._pending):
            if entry.sql_hash == sql_hash:
                self._passed += self._pending[:i]
                self._pending = self._pending[i + 1:]
                return ordinal, entry
        for ordinal, entry in self._pending:
            if entry.description == description:
                raise Edited(ordinal, entry)
        ordinal, self._next = self._next, self._next + 1
        return ordinal, None

    def left_over(self) -> list[tuple[int, Any]]:
        """The interrupted run's entries no statement of the rerun was paired with."""
        return sorted(self._passed + self._pending)
