"""Facts that come from an operation's place in its script, not from the operation alone.

``annotate(ops)`` walks one script's operations in order and sets:

* ``new_table`` on every operation on a table created earlier in the script
  (it is empty and no running code uses it yet);
* ``fk_checks_off`` on FKs added after ``SET foreign_key_checks = 0`` (MySQL);
* ``autocommit`` on operations after a raw ``COMMIT`` (until ``BEGIN``), the old
  idiom for running ``CREATE INDEX CONCURRENTLY`` outside the transaction.
"""

from __future__ import annotations

from migrations_policy.policy import model as m


def annotate(ops: list[m.Operation]) -> list[m.Operation]:
    created: set[str] = set()
    fk_checks_off = False
    committed = False
    result = []
    for op in ops:
        if op.name == "foreign_key_checks":
            fk_checks_off = op.value == "off"
        elif op.name == "transaction" and op.kind == m.OTHER:
            committed = op.value == "commit"
        flags = {}
        table = (op.table or "").lower()
        if op.kind == m.CREATE_TABLE and table:
            created.add(table)
        elif table in created:
            flags["new_table"] = True
        if fk_checks_off and op.kind == m.ADD_FK:
            flags["fk_checks_off"] = True
        if committed and not op.autocommit:
            flags["autocommit"] = True
        if op.kind == m.DROP_TABLE:
            created.discard(table)
        result.append(op.with_(**flags) if flags else op)
    return result
