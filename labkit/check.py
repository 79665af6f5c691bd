"""The checker behind every notebook's "Hands-on task".

`check(fn, "02_tools")` runs the task's named cases, then compares `fn` with the reference on
generated inputs (hypothesis, derandomized: the same inputs on every machine) and prints one line
per case. A hint comes from the task's rules, in teaching order: each rule has a small probe input,
and a failure shows the hint of the first rule `fn` breaks on its probe, never one it follows.
A passed task is recorded in .runtime/progress.json (only on this machine); `progress()` lists it.

Outside the lessons. Left out: timeouts for runaway learner code, sandboxing, grades.
"""

import copy
import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .config import RUNTIME_DIR
from .errors import UserError
from .taskspec import Case, Task
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


NO_RETURN = "your function returned None: end every path with `return ...`"


@dataclass
class CheckResult:
    passed: int
    total: int
    lines: list
    rules: list = field(default_factory=list)  # the names of the rules hinted at, in order

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
    from .tasks import TASKS  # imported here: tasks.py builds on every lesson (slow to import)

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
            hint = NO_RETURN
        else:  # the task may know better what this wrong value means
            hint = (diagnose and _judged(diagnose, got, case.expected, None)) or case.hint
        return Failure(
            f"expected {clip(show(case.expected), 120)}, got {clip(show(got), 120)}", hint
        )
    return None


def _outcome(fn, args, kwargs=None):
    """("returned", value) or ("raised", exception) for fn on copies of the arguments."""
    try:
        return "returned", fn(*copy.deepcopy(args), **copy.deepcopy(kwargs or {}))
    except Exception as exc:  # the learner's bug is reported, not raised
        return "raised", exc


def _agrees(got, expected, compare):
    """Whether two outcomes agree: equal values, or exceptions of the reference's type."""
    if expected[0] == "raised":
        return got[0] == "raised" and isinstance(got[1], type(expected[1]))
    return got[0] == "returned" and _judged(compare, got[1], expected[1], False)


def _said(outcome, show):
    kind, value = outcome
    return f"raised {_raised(value)}" if kind == "raised" else clip(show(value), 100)


def broken_rules(fn, task: Task) -> list:
    """The names of the rules `fn` breaks on their probes, in teaching order.

    Example: broken_rules(lambda x: x, load_task("10_evals"))  ->  ["lower case", ...]
    """
    compare = task.compare or (lambda got, expected: got == expected)
    return [
        rule.name
        for rule in task.rules
        if not _agrees(
            _outcome(fn, rule.probe, rule.kwargs),
            _outcome(task.reference, rule.probe, rule.kwargs),
            rule.compare or compare,
        )
    ]


def differential(fn, task: Task):
    """(generated inputs tried, the smallest input where fn and the reference differ, or None).

    Derandomized, with no example database: every machine tries the same inputs and shrinks a
    difference to the same smallest one. Example: differential(my_rrf, load_task("06_rag"))
    """
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    assert task.inputs is not None, "differential needs a task with generated inputs"
    compare = task.compare or (lambda got, expected: got == expected)
    tried = [0]

    def differs(args):
        tried[0] += 1
        return not _agrees(_outcome(fn, args), _outcome(task.reference, args), compare)

    budget = settings(
        derandomize=True,
        database=None,
        max_examples=task.examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    try:
        return tried[0], find(task.inputs(), differs, settings=budget)
    except NoSuchExample:
        return tried[0], None


def _call_text(fn, args, task):
    shown = task.show_input(args) if task.show_input else ", ".join(map(repr, args))
    return f"{getattr(fn, '__name__', 'fn')}({clip(shown, 160)})"


class _Report:
    """The lines of one check: each hint shown once, and the rules hinted at, in order."""

    def __init__(self, title):
        self.lines, self.rules, self.first = [f"checking: {title}"], [], {}  # first: key -> case

    def ok(self, number, title):
        self.lines.append(f"  ok    {number}. {title}")

    def fail(self, number, title, problem, hint, rule="", own=True):
        first = self.first.setdefault(rule or hint, number)
        if first == number and rule:
            self.rules.append(rule)
        said = hint if first == number else f"as for case {first}"
        if first != number and not own:  # this case's own rule is followed
            said = f"this case fails only because of the mistake in case {first}"
        self.lines.append(f"  FAIL  {number}. {title}: {problem}\n        hint: {said}")


def _run_cases(fn, task, broken, report) -> int:
    """Run the named cases into `report`; how many passed."""
    compare = task.compare or (lambda got, expected: got == expected)
    passed = 0
    for number, case in enumerate(task.cases, 1):
        failure = run_case(fn, case, compare, task.diagnose, task.show or repr)
        if failure is None:
            passed += 1
            report.ok(number, case.name)
            continue
        cause = _cause(task, case.rule, broken) if failure.hint != NO_RETURN else case.rule
        if cause != case.rule:  # it fails only because of another rule fn breaks
            report.fail(number, case.name, failure.problem, _rule(task, cause).hint, cause, False)
        else:
            report.fail(number, case.name, failure.problem, failure.hint, case.rule)
    return passed


AFTER_CASES = "fix the mistakes the cases above show first, then run the check again"


def _run_differential(fn, task, broken, report, after_cases=False) -> int:
    """Compare fn with the reference on generated inputs, into `report`; 1 if they agree.

    A difference after failing cases is not blamed on a rule: which mistake an input shows is
    not known, and a hint must never name a rule this input does not break."""
    number = len(task.cases) + 1
    tried, found = differential(fn, task)
    if found is None:
        report.ok(number, f"the same as the reference on {tried} generated inputs")
        return 1
    expected, got = _outcome(task.reference, found), _outcome(fn, found)
    show = task.show or repr
    reference = ("returns " if expected[0] == "returned" else "") + _said(expected, show)
    yours = ("returned " if got[0] == "returned" else "") + _said(got, show)
    rule = broken[0] if broken and not after_cases else ""
    if after_cases:
        hint = AFTER_CASES
    elif rule:
        hint = _rule(task, rule).hint
    else:
        hint = "no rule's small input shows this mistake: work this input out by hand"
    problem = f"on {_call_text(fn, found, task)} the reference {reference}, yours {yours}"
    report.fail(number, "generated inputs", problem, hint, rule)
    return 0


def check(fn, task: str | Task, quiet: bool = False) -> CheckResult:
    """Run a task's cases and its differential check against `fn`, print ok/FAIL per case.

    Example: check(my_read_output, "01_setup")   # prints "8/8 passed" when every case passes
    """
    if not callable(fn):
        raise UserError(
            f"check needs your function itself, got {type(fn).__name__} — pass "
            "my_function, not my_function(...)"
        )
    name = task if isinstance(task, str) else None
    task = load_task(task) if isinstance(task, str) else task
    total = len(task.cases) + (task.inputs is not None)
    report, passed = _Report(task.title), 0
    wrong_parameters = signature_problem(fn, task)
    if wrong_parameters:  # say it once, not once per case
        report.lines += [
            f"  FAIL  {wrong_parameters.problem}",
            f"        hint: {wrong_parameters.hint}",
            f"0/{total} passed — no case could run",
        ]
    else:
        broken = broken_rules(fn, task)  # in teaching order: the first one is hinted at
        passed = _run_cases(fn, task, broken, report)
        if task.inputs is not None:
            passed += _run_differential(fn, task, broken, report, passed < len(task.cases))
        advice = " — read the hints above, change your function, and run this cell again"
        report.lines.append(f"{passed}/{total} passed" + ("" if passed == total else advice))
    if name and passed == total and fn is not task.reference:
        record_pass(name)
    if not quiet:
        print("\n".join(report.lines))
    return CheckResult(passed, total, report.lines, report.rules)


def _cause(task, rule, broken):
    """The rule a failing case is blamed on: a broken rule it needs, else its own if broken, else
    the first rule fn breaks (its own rule's probe passes, so another mistake shows here)."""
    if not rule or not broken:
        return rule
    needed = [name for name in _rule(task, rule).needs if name in broken]
    return needed[0] if needed else rule if rule in broken else broken[0]


def _rule(task, name):
    return next(rule for rule in task.rules if rule.name == name)


# ---------------------------------------------------------------- progress, on this machine only


def progress_path() -> Path:
    """Where passed tasks are recorded: .runtime/progress.json, or $LABKIT_PROGRESS (tests)."""
    return Path(os.environ.get("LABKIT_PROGRESS") or RUNTIME_DIR / "progress.json")


def passed_tasks() -> list:
    """The notebooks whose task was passed on this machine. Example: passed_tasks() -> []"""
    try:
        done = json.loads(progress_path().read_text())
    except (OSError, ValueError):  # no file yet, or one a person broke: nothing recorded
        return []
    return [n for n in NOTEBOOKS if isinstance(done, dict) and done.get(n) is True]


def record_pass(name: str) -> None:
    """Record that the task of notebook `name` was passed (a file write failing is not fatal)."""
    path = progress_path()
    done = {n: True for n in passed_tasks()} | {name: True}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(done, indent=1, sort_keys=True) + "\n")
    except OSError:  # a read-only checkout: the check itself still counts
        pass


def progress(quiet: bool = False) -> dict:
    """Print every task with done / not yet; return {notebook: True or False}.

    Example: labkit.progress()   # "  done     01_setup  read a Responses API ..."
    """
    done = set(passed_tasks())
    status = {n: n in done for n in NOTEBOOKS}
    if not quiet:
        for n in NOTEBOOKS:
            print(f"  {'done   ' if status[n] else 'not yet'}  {n:<16}{load_task(n).title}")
        print(f"{len(done)}/{len(NOTEBOOKS)} tasks done (recorded on this machine only)")
    return status
