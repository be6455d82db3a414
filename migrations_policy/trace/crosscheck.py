"""Compare what a statement did with what the policy knowledge base (``migrations_policy.policy``) says.

A finding is a statement that did more than the policy says it does:

* it rewrote a table (relfilenode changed) the policy says it does not rewrite;
* it read rows with a sequential scan the policy does not mention (no scan, no rewrite);
* it took a stronger table lock than the lock the policy names;
* on MariaDB: neither ALGORITHM=INSTANT nor ALGORITHM=INPLACE, LOCK=NONE was accepted for a
  statement the policy calls safe.

A brief ACCESS EXCLUSIVE lock with no scan or rewrite (ADD COLUMN, DROP DEFAULT ...)
is what the policy models as a brief metadata lock: reported, not a finding.
"""

from __future__ import annotations

import re

from migrations_policy.core.project import _one_line
from migrations_policy.trace.report import PG_LOCK_MODES, StatementTrace

# "ShareUpdateExclusiveLock" -> "SHARE UPDATE EXCLUSIVE", longest first so that "ACCESS EXCLUSIVE"
# is not read as "EXCLUSIVE".
_SPOKEN = sorted(((re.sub(r"(?<!^)(?=[A-Z])", " ", m.removesuffix("Lock")).upper(), m) for m in PG_LOCK_MODES),
                 key=lambda pair: -len(pair[0]))


def named_lock(text: str) -> str | None:
    """The strongest PostgreSQL lock mode named in the policy's *text* (e.g. ``"ACCESS EXCLUSIVE"``)."""
    found, rest = [], text.upper()
    for spoken, mode in _SPOKEN:
        if re.search(rf"\b{spoken}\b", rest):
            found.append(mode)
            rest = re.sub(rf"\b{spoken}\b", " ", rest)
    return max(found, key=PG_LOCK_MODES.index) if found else None


def _describe(verdict) -> str:
    effect = verdict.effect
    what = [effect.lock] if effect.lock else []
    what += [label for flag, label in ((effect.rewrite, "rewrite"), (effect.scan, "scan"),
                                       (effect.blocks_writes, "blocks writes"), (effect.blocks_reads, "blocks reads"),
                                       (effect.no_transaction, "not in a transaction")) if flag]
    return f"{verdict.operation.kind} ({verdict.phase}): {', '.join(what) or 'safe'}"


def cross_check(trace: StatementTrace, dialect: str) -> None:
    """Fill *trace*'s ``policy`` line and ``findings``."""
    if trace.not_run or trace.error:
        return
    try:
        from migrations_policy import policy

        verdicts = [policy.classify(op, dialect) for op in policy.from_sql(trace.sql)]
    except Exception as exc:  # the knowledge base is someone else's work in progress: say so, do not fail
        trace.policy = f"(not classified: {_one_line(exc)})"
        return
    if not verdicts:
        return
    trace.policy = "; ".join(_describe(v) for v in verdicts)
    effects = [v.effect for v in verdicts]
    if trace.rewritten and not any(e.rewrite for e in effects):
        trace.findings.append(f"rewrote {', '.join(trace.rewritten)}; the policy says no rewrite")
    scanned = {t: n for t, n in trace.scanned.items()}
    if scanned and not any(e.scan or e.rewrite for e in effects):
        trace.findings.append("scanned " + ", ".join(f"{t} ({n} rows, under {trace.strongest_lock(t) or 'no lock'})"
                                                    for t, n in scanned.items()) + "; the policy says no scan")
    for verdict in verdicts:
        said = named_lock(verdict.effect.lock)
        took = trace.strongest_lock(verdict.operation.table) if verdict.operation.table else None
        if said and took and PG_LOCK_MODES.index(took) > PG_LOCK_MODES.index(said):
            trace.findings.append(f"took {took} on {verdict.operation.table}; the policy says {verdict.effect.lock}")
    if ("ALGORITHM=INSTANT", "accepted") in trace.algorithms and any(e.blocking for e in effects):
        trace.policy += " (the server accepted ALGORITHM=INSTANT: the policy is stricter here)"
    online = [outcome for clause, outcome in trace.algorithms if clause != "as written"]
    if online and "accepted" not in online and all(e.safe for e in effects):
        trace.findings.append("MariaDB refused ALGORITHM=INSTANT and ALGORITHM=INPLACE, LOCK=NONE: it locks or "
                              "copies the table; the policy calls it safe")
