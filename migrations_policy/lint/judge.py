"""Which rules an operation breaks on a dialect: the policy's verdict, memoized.

``judge(op, dialect, context, phase)`` returns ``(rule, headline, verdict)`` for every
rule that fires.  Neither the policy's verdict nor a rule's decision depends on an
operation's names (``table``, ``column``, ``name``, ``text``): names only go into the
headline.  So the verdict's effect and the set of firing rules are memoized per
name-free *signature* of the operation, and only firing rules are asked again, with
the real operation, for their headline.  A ten-op script then costs a few dict
look-ups per dialect instead of 20 rule checks per op.

``judge_dialects(op, dialects, context, phase)`` asks for several dialects at once
(one recording shared by them): one look-up for all of them.
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from operator import attrgetter

from migrations_policy.policy import classify
from migrations_policy.policy.model import Context, Operation, Verdict
from migrations_policy.lint import rules

NAME_FIELDS = frozenset({"table", "column", "name", "text"})
_signature = attrgetter(*(f.name for f in fields(Operation) if f.name not in NAME_FIELDS))
_MEMO_LIMIT = 50000
_memo: dict[tuple, tuple[Verdict, tuple[rules.Rule, ...]]] = {}


@lru_cache(maxsize=None)
def active_rules(phase: str) -> tuple[rules.Rule, ...]:
    return tuple(rule for rule in rules.all_rules() if rule.applies(phase))


def signature(op: Operation) -> tuple:
    """The operation's facts without its names (compute once, judge on every dialect)."""
    return _signature(op)


def judge(op: Operation, dialect: str, context: Context, phase: str,
          facts: tuple | None = None) -> list[tuple[rules.Rule, str, Verdict]]:
    """(rule, headline, verdict) for each rule *op* breaks; *facts* is ``signature(op)`` when known."""
    if op.only_on and op.only_on != dialect:
        return []  # SQL of another dialect: it cannot run here (the policy's ``Operation.only_on``)
    key = (_signature(op) if facts is None else facts, dialect, context, phase)
    known = _memo.get(key)
    if known is None:
        verdict = classify(op, dialect, context)
        fired = [(rule, rule.check(verdict)) for rule in active_rules(phase)]
        fired = [(rule, headline) for rule, headline in fired if headline]
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[key] = (verdict, tuple(rule for rule, _ in fired))
        return [(rule, headline, verdict) for rule, headline in fired]
    template, firing = known
    if not firing:
        return []
    verdict = _for(template, op)
    found = []
    for rule in firing:
        headline = rule.check(verdict)
        if headline:
            found.append((rule, headline, verdict))
    return found


def _for(template: Verdict, op: Operation) -> Verdict:
    """*template* (a memoized verdict) for *op*: ``dataclasses.replace`` without its frozen ``__init__``."""
    verdict = object.__new__(Verdict)
    verdict.__dict__.update(template.__dict__)
    verdict.__dict__["operation"] = op
    return verdict


_multi: dict[tuple, tuple[tuple[str, Verdict, tuple[rules.Rule, ...]], ...]] = {}


def judge_dialects(op: Operation, dialects: tuple[str, ...], context: Context, phase: str,
                   facts: tuple | None = None) -> list[tuple[rules.Rule, str, Verdict]]:
    """``judge`` for each of *dialects* in turn, concatenated (memoized per signature for all of them)."""
    facts = _signature(op) if facts is None else facts
    key = (facts, dialects, context, phase)
    known = _multi.get(key)
    if known is None:
        found = []
        for dialect in dialects:
            found.extend(judge(op, dialect, context, phase, facts))
            if (facts, dialect, context, phase) not in _memo:
                continue  # not judged on this dialect (only_on)
            template, firing = _memo[(facts, dialect, context, phase)]
            known = (known or ()) + (((dialect, template, firing),) if firing else ())
        if len(_multi) >= _MEMO_LIMIT:
            _multi.clear()
        _multi[key] = known or ()
        return found
    found = []
    for _, template, firing in known:
        verdict = _for(template, op)
        for rule in firing:
            headline = rule.check(verdict)
            if headline:
                found.append((rule, headline, verdict))
    return found
