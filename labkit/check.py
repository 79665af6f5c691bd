"""The checker behind every notebook's "Hands-on task".

Built in 01_setup. `check(fn, "02_tools")` runs the task's hidden cases against the learner's
function and prints one line per case: ok, or FAIL with what happened and a hint that fits it (a
wrong value, an exception, a missing one). An exception in the learner's code is reported in one
line, never as a wall of traceback; a function whose parameters do not fit the cases is told so
once, with the parameters the task expects. The tasks (cases plus a reference solution) are in
labkit/tasks.py; tests prove every reference passes its own cases.

Deliberately left out: timeouts for runaway learner code, sandboxing, grading beyond pass/fail.
"""

import copy
import inspect
from dataclasses import dataclass, field

from .errors import UserError
from .trace import clip

NOTEBOOKS = (
    "01_setup",
    "02_tools",
    "03_memory",
    "04_loop",
    "05_guardrails",
    "06_rag",
    "07_runtime",
    "08_context",
    "09_mcp",
    "10_evals",
    "11_coding_agent",
)


@dataclass
class Case:
    name: str  # what this case is about, shown to the learner
    args: tuple = ()
    expected: object = None  # the value the function should return
    hint: str = ""  # the rule this case tests: shown for a wrong outcome
    raises: type | None = None  # an exception type expected instead of a value
    kwargs: dict = field(default_factory=dict)
    crash_hint: str = ""  # shown when the function raises where it should return
    compare: object = None  # this case's (got, expected) -> bool, if not the task's


@dataclass
class Task:
    title: str
    cases: list
    reference: object  # the reference solution (a function in labkit)
    compare: object = None  # (got, expected) -> bool; defaults to ==
    diagnose: object = None  # (got, expected) -> a hint for this wrong value, or None
    show: object = None  # value -> how the learner sees it in "expected ..., got ..."; repr


@dataclass
class CheckResult:
    passed: int
    total: int
    lines: list

    def __bool__(self):
        return self.passed == self.total

    def __repr__(self):
        return f"CheckResult({self.passed}/{self.total} passed)"


@dataclass
class Failure:
    problem: str  # what happened, one line
    hint: str  # what to do about what happened


def _raised(exc):
    first = str(exc).splitlines()[0][:100] if str(exc) else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _parameters(fn):
    """`(rankings, k=60)`: `fn`'s parameters without annotations; None if Python cannot tell."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins, or not a function at all
        return None
    plain = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return signature.replace(parameters=plain, return_annotation=signature.empty)


def _judged(judge, got, expected, otherwise):
    """judge(got, expected), or `otherwise` when the learner's value makes the judge itself fail."""
    try:
        return judge(got, expected)
    except Exception:  # e.g. sorted() of a list mixing numbers and strings
        return otherwise


def load_task(name: str) -> Task:
    """The Task for a notebook name. Example: load_task("01_setup").title"""
    if name not in NOTEBOOKS:
        raise UserError(f"there is no task {name!r} — use one of {', '.join(NOTEBOOKS)}")
    from .tasks import TASKS  # imported here: tasks.py builds on this module and every lesson

    return TASKS[name]


def signature_problem(fn, task: str | Task) -> Failure | None:
    """Why `fn` cannot take the cases' arguments at all (wrong number or names), or None.

    Example: signature_problem(lambda a, b: a, "04_loop")   # -> a Failure naming (reply)
    """
    task = load_task(task) if isinstance(task, str) else task
    yours = _parameters(fn)
    if yours is None:
        return None
    for case in task.cases:
        try:
            yours.bind(*case.args, **case.kwargs)
        except TypeError as exc:
            name = getattr(fn, "__name__", "your function")
            wanted = _parameters(task.reference)
            wanted = f"the parameters {wanted}" if wanted else f"{len(case.args)} argument(s)"
            return Failure(
                f"{name}{yours} cannot be called the way the cases call it ({exc})",
                f"give your function {wanted}, then run this cell again",
            )
    return None


def run_case(fn, case: Case, compare, diagnose=None, show=repr) -> Failure | None:
    """Run one case: None when it passes, else a Failure whose hint fits what went wrong.

    Example: run_case(lambda x: x + x, Case("negative", (-3,), 9, "..."), operator.eq).problem
             ->  "expected 9, got -6"
    """
    try:
        got = fn(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
    except Exception as exc:  # the learner's bug is reported, not raised
        if case.raises and isinstance(exc, case.raises):
            return None
        if case.raises:
            return Failure(
                f"raised {_raised(exc)}, but should raise {case.raises.__name__}", case.hint
            )
        return Failure(
            f"raised {_raised(exc)}",
            case.crash_hint
            or (
                f"it should return {clip(repr(case.expected), 60)} here: fix the line that raises "
                f"{type(exc).__name__} first"
            ),
        )
    if case.raises:
        return Failure(
            f"returned {clip(repr(got), 120)} but should raise {case.raises.__name__}", case.hint
        )
    if not _judged(case.compare or compare, got, case.expected, False):
        if got is None:  # the commonest slip: a path with no return
            hint = "your function returned None: end every path with `return ...`"
        else:  # the task may know better what this wrong value means
            hint = (diagnose and _judged(diagnose, got, case.expected, None)) or case.hint
        return Failure(
            f"expected {clip(show(case.expected), 120)}, got {clip(show(got), 120)}", hint
        )
    return None


def check(fn, task: str | Task, quiet: bool = False) -> CheckResult:
    """Run a task's cases against `fn`, print ok/FAIL per case, and return a CheckResult.

    Example: check(my_read_output, "01_setup")   # prints "7/7 passed" when every case passes
    """
    if not callable(fn):
        raise UserError(
            f"check needs your function itself, got {type(fn).__name__} — pass "
            "my_function, not my_function(...)"
        )
    task = load_task(task) if isinstance(task, str) else task
    compare = task.compare or (lambda got, expected: got == expected)
    lines, passed, total = [f"checking: {task.title}"], 0, len(task.cases)
    wrong_parameters = signature_problem(fn, task)
    if wrong_parameters:  # say it once, not once per case
        lines += [
            f"  FAIL  {wrong_parameters.problem}",
            f"        hint: {wrong_parameters.hint}",
            f"0/{total} passed — no case could run",
        ]
    else:
        first_with = {}  # hint -> the case that showed it first
        for number, case in enumerate(task.cases, 1):
            failure = run_case(fn, case, compare, task.diagnose, task.show or repr)
            passed += failure is None
            if failure is None:
                lines.append(f"  ok    {number}. {case.name}")
                continue
            first = first_with.setdefault(failure.hint, number)
            hint = failure.hint if first == number else f"as for case {first}"
            lines.append(f"  FAIL  {number}. {case.name}: {failure.problem}\n        hint: {hint}")
        lines.append(
            f"{passed}/{total} passed"
            + (
                ""
                if passed == total
                else " — read the hints above, change your function, and run this cell again"
            )
        )
    if not quiet:
        print("\n".join(lines))
    return CheckResult(passed, total, lines)
