"""What a hands-on task is made of: its cases, its rules in teaching order, its reference.

Outside the lessons. tasks.py writes every task in these terms; check.py runs them.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import UserError


@dataclass
class Rule:
    name: str  # the rule in a few words, e.g. "ranks start at 1"
    probe: tuple  # the arguments of a small input that this rule alone decides
    hint: str  # what to do when the function breaks it
    kwargs: dict = field(default_factory=dict)
    compare: object = None  # (got, expected) -> bool for the probe, if not the task's
    needs: tuple = ()  # earlier rules this probe can only show when they hold (e.g. the shape)


@dataclass
class Case:
    name: str  # what this case is about, shown to the learner
    args: tuple = ()
    expected: object = None  # the value the function should return
    hint: str = ""  # shown for a wrong outcome; with `rule`, the rule's hint
    raises: type | None = None  # an exception type expected instead of a value
    kwargs: dict = field(default_factory=dict)
    crash_hint: str = ""  # shown when the function raises where it should return
    compare: object = None  # this case's (got, expected) -> bool, if not the task's
    rule: str = ""  # the name of the task's rule this case tests


@dataclass
class Task:
    title: str
    cases: list
    reference: object  # the reference solution
    compare: object = None  # (got, expected) -> bool; defaults to ==
    diagnose: object = None  # (got, expected) -> a hint for this wrong value, or None
    show: object = None  # value -> how the learner sees it in "expected ..., got ..."; repr
    rules: list = field(default_factory=list)  # Rules, in teaching order
    inputs: Callable[[], Any] | None = None  # () -> a hypothesis strategy of argument tuples
    examples: int = 150  # how many generated inputs the differential check tries
    show_input: object = None  # argument tuple -> how the learner sees it; repr

    def __post_init__(self):
        hints = {rule.name: rule.hint for rule in self.rules}
        for case in self.cases:
            if case.rule and case.rule not in hints:
                raise UserError(f"case {case.name!r} names no rule of the task: {case.rule!r}")
            case.hint = case.hint or hints.get(case.rule, "")
