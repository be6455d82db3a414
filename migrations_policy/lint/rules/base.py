"""The ``Rule`` base class: a stable code, a name, a default severity, a doc and a check.

A rule reads one ``Verdict`` of the policy knowledge base (``migrations_policy.policy``)
and the phase of the script, and returns a message when the operation breaks the
rule.  Rules whose ``check`` always returns None (``MP000``-``MP003``) are
reported by the linter itself; they are rules so that they have a code, a
severity that settings can change, and a page in the docs.
"""

from __future__ import annotations

import inspect

from migrations_policy.policy.model import CONTRACT, EXPAND, Verdict

BOTH_PHASES = (EXPAND, CONTRACT)


class Rule:
    """Base class; subclasses set the attributes and override ``check``."""

    code: str = ""
    name: str = ""
    severity: str = "error"
    #: Script phases the rule applies in.
    phases: tuple[str, ...] = (EXPAND,)
    #: The safe alternative to show; None: the policy's (``Verdict.alternative``).
    alternative: str | None = None

    def check(self, verdict: Verdict) -> str | None:
        """The finding's headline, or None.  The linter appends the dialect's explanation
        (``verdict.effect.note``) and the safe alternative.

        Whether a rule fires must not depend on the operation's names (``table``,
        ``column``, ``name``, ``text``; only the headline may use them): the linter
        memoizes the firing rules per name-free operation signature (``lint.judge``)."""
        return None

    def applies(self, phase: str) -> bool:
        return phase in self.phases

    @property
    def doc(self) -> str:
        return inspect.cleandoc(type(self).__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else self.name

