"""MySQL / MariaDB (InnoDB): which ALTERs are INSTANT/INPLACE and which copy the table.

Measured on MariaDB 10.11: ALGORITHM=COPY blocks writes for the whole copy;
INSTANT and INPLACE, LOCK=NONE do not.  ``effect(op, ctx) -> (Effect, alternative)``.
"""

from __future__ import annotations

from migrations_policy.policy import model as m
from migrations_policy.policy.defaults import functions_in
from migrations_policy.policy.model import Effect

DIALECT = "mysql"

_OSC = "use an online schema change tool (pt-online-schema-change, gh-ost) or a maintenance window"


def _copy(note: str) -> Effect:
    return Effect(lock="ALGORITHM=COPY", blocks_writes=True, rewrite=True, note=note)


def _add_column(op: m.Operation) -> tuple[Effect, str]:
    if op.generated == "stored":
        return _copy("a STORED generated column copies the whole table (writes blocked)"), \
            "use a VIRTUAL generated column, or add a plain column and backfill online"
    if op.generated == "identity":
        return _copy("an AUTO_INCREMENT column rebuilds the whole table (writes blocked)"), \
            "add it in a new table, or use an online schema change tool"
    if op.default_kind in (m.DEFAULT_VOLATILE, m.DEFAULT_EXPRESSION):
        if "rand" in functions_in(op.server_default):
            return Effect(lock="ALGORITHM=INSTANT", same_value=True,
                          note=f"DEFAULT {op.server_default} is added instantly: every existing row gets the SAME value"), \
                "add the column without default and backfill per-row values in an online data migration"
        return _copy(f"expression DEFAULT {op.server_default} copies the whole table (writes blocked)"), \
            "add the column nullable without default and backfill in an online data migration"
    if op.nullable is False and op.default_kind == m.DEFAULT_NONE:
        return Effect(lock="ALGORITHM=INSTANT", fails="INSERTs that omit the column fail in strict mode",
                      note="NOT NULL without a server default: existing rows get an implicit '' / 0"), ""
    return m.QUIET, ""


def _length_bytes_kept(length_from: int, length_to: int, bytes_per_char: int) -> bool:
    """InnoDB stores a VARCHAR's length in 1 byte while its maximum is at most 255 bytes, else in 2
    (1 for a value up to 127 bytes).  Widening is INPLACE/INSTANT unless it takes a column whose
    values may be 128-255 bytes long past 255 bytes (their stored length would need 2 bytes)."""
    old, new = length_from * bytes_per_char, length_to * bytes_per_char
    return new <= 255 or old > 255 or old <= 127


def widening_in_place(op: m.Operation) -> bool:
    """A ``WIDEN_VARCHAR`` that MariaDB/MySQL do INPLACE (no copy), for the column's character set,
    or for each of latin1, utf8mb3 and utf8mb4 (1, 3, 4 bytes per character) when it is unknown."""
    widths = (op.bytes_per_char,) if op.bytes_per_char else (1, 3, 4)
    return all(_length_bytes_kept(op.length_from, op.length_to, width) for width in widths)


def effect(op: m.Operation, ctx: m.Context) -> tuple[Effect, str]:
    kind = op.kind
    if kind == m.ADD_FK and op.fk_checks_off and not op.new_table:
        return Effect(lock="ALGORITHM=INPLACE", unvalidated=True,
                      note="with foreign_key_checks=0 the FK is added instantly but existing rows are never validated"), \
            "declare a separate orphan check (an online data migration that finds violating rows) and reference it in an ignore comment"
    if op.new_table:
        return m.QUIET, ""
    if kind == m.ADD_COLUMN:
        return _add_column(op)
    if kind == m.ADD_FK:
        return _copy("ADD FOREIGN KEY with foreign_key_checks=1 copies the whole table (writes blocked)"), _OSC
    if kind == m.ADD_CHECK:
        return _copy("ADD CHECK copies the whole table (writes blocked)"), _OSC
    if kind == m.CREATE_INDEX and op.fulltext:
        return Effect(lock="LOCK=SHARED", blocks_writes=True, scan=True,
                      note="a FULLTEXT index can only be built with LOCK=SHARED (writes blocked for the build)"), _OSC
    if kind == m.WIDEN_VARCHAR and not op.length_to:
        old = f"varchar({op.length_from})" if op.length_from else "varchar"
        return _copy(f"{old} to text is another storage type: ALGORITHM=COPY (writes blocked)"), ""
    if kind == m.WIDEN_VARCHAR:
        if widening_in_place(op):
            return Effect(lock="ALGORITHM=INPLACE", note="widening within the VARCHAR length-byte boundary is "
                                                          "INPLACE (metadata only)"), ""
        return _copy(f"widening varchar({op.length_from}) to varchar({op.length_to}) crosses the 255-byte "
                     "length-byte boundary: ALGORITHM=COPY (writes blocked)"), ""
    if kind in (m.ALTER_TYPE, m.CONVERT_CHARSET):
        return _copy("a type or character set change usually copies the whole table (writes blocked)"), ""
    if kind == m.SET_NOT_NULL:
        return Effect(lock="ALGORITHM=INPLACE", rewrite=True,
                      note="SET NOT NULL rebuilds the table in place and fails if old code writes NULLs"), ""
    if kind == m.ADD_PK:
        return _copy("ADD PRIMARY KEY rebuilds the table"), _OSC
    if kind == m.TRUNCATE:
        return Effect(lock="metadata lock", blocks_reads=True, blocks_writes=True,
                      note="TRUNCATE drops and recreates the table"), ""
    if kind == m.BATCH_RECREATE and op.value == "always":
        return _copy("batch recreate=\"always\" copies the table into a new one"), "use plain op.* calls (recreate=\"auto\")"
    return m.QUIET, ""
