"""The checker behind every notebook's "Hands-on task".

Built in 01_setup. `check(fn, "02_tools")` runs the task's hidden cases against the learner's
function and prints one line per case: ok, or FAIL with what was expected, what came back, and a
hint. An exception in the learner's code is reported in one line, never as a wall of traceback.
Each stage module defines its `TASK` (cases plus a reference solution); tests prove every
reference passes its own cases.

Deliberately left out: timeouts for runaway learner code, sandboxing, grading beyond pass/fail.
"""
import copy
import importlib
from dataclasses import dataclass, field

from .errors import UserError

TASK_MODULES = {                          # notebook -> the module that defines its TASK
    "01_setup": "labkit.live",
    "02_tools": "labkit.tools",
    "03_memory": "labkit.memory",
    "04_loop": "labkit.loop",
    "05_guardrails": "labkit.guardrails",
    "06_rag": "labkit.rag",
    "07_runtime": "labkit.runtime",
}


@dataclass
class Case:
    name: str                             # what this case is about, shown to the learner
    args: tuple = ()
    expected: object = None               # the value the function should return
    hint: str = ""                        # shown when this case fails
    raises: type | None = None            # an exception type expected instead of a value
    kwargs: dict = field(default_factory=dict)


@dataclass
class Task:
    title: str
    cases: list
    reference: object                     # the reference solution (a function in labkit)
    compare: object = None                # (got, expected) -> bool; defaults to ==


@dataclass
class CheckResult:
    passed: int
    total: int
    lines: list

    def __bool__(self):
        return self.passed == self.total

    def __repr__(self):
        return f"CheckResult({self.passed}/{self.total} passed)"


def _short(value, limit=120):
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def load_task(name):
    """The Task for a notebook name. Example: load_task("01_setup").title"""
    if name not in TASK_MODULES:
        raise UserError(f"there is no task {name!r} — use one of {', '.join(TASK_MODULES)}")
    return importlib.import_module(TASK_MODULES[name]).TASK


def run_case(fn, case, compare):
    """Run one case; return None when it passes, else what went wrong (one line)."""
    try:
        got = fn(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
    except Exception as exc:              # subtle: the learner's bug is reported, not raised
        if case.raises and isinstance(exc, case.raises):
            return None
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"raised {type(exc).__name__}: {first[:100]}"
    if case.raises:
        return f"returned {_short(got)} but should raise {case.raises.__name__}"
    if not compare(got, case.expected):
        return f"expected {_short(case.expected)}, got {_short(got)}"
    return None


def check(fn, task, quiet=False):
    """Run a task's cases against `fn`, print ok/FAIL per case, and return a CheckResult.

    Example: check(my_read_output, "01_setup")   # prints "7/7 passed" when every case passes
    """
    task = load_task(task) if isinstance(task, str) else task
    compare = task.compare or (lambda got, expected: got == expected)
    lines, passed = [f"checking: {task.title}"], 0
    for number, case in enumerate(task.cases, 1):
        problem = run_case(fn, case, compare)
        passed += problem is None
        lines.append(f"  ok    {number}. {case.name}" if problem is None else
                     f"  FAIL  {number}. {case.name}: {problem}\n        hint: {case.hint}")
    lines.append(f"{passed}/{len(task.cases)} passed" + ("" if passed == len(task.cases) else
                 " — read the hints above, change your function, and run this cell again"))
    if not quiet:
        print("\n".join(lines))
    return CheckResult(passed, len(task.cases), lines)
