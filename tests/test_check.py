"""The hands-on checker: one line per case, hints, no tracebacks; every reference passes."""
import importlib.util

import pytest

from labkit import UserError, check
from labkit.check import TASK_MODULES, Case, Task, load_task

SQUARE = Task("square a number", [
    Case("two", (2,), 4, "multiply x by itself"),
    Case("negative", (-3,), 9, "a negative times a negative is positive"),
    Case("not a number", ("x",), raises=TypeError, hint="let Python raise TypeError"),
], reference=lambda x: x * x)


def test_passing_function(capsys):
    result = check(lambda x: x * x, SQUARE)
    assert result and (result.passed, result.total) == (3, 3)
    assert capsys.readouterr().out.splitlines()[-1] == "3/3 passed"


def test_failures_show_expected_got_and_hint(capsys):
    result = check(lambda x: x + x, SQUARE)
    out = capsys.readouterr().out
    assert not result and result.passed == 1
    assert "FAIL  2. negative: expected 9, got -6" in out and "hint: a negative times" in out
    assert "returned 'xx' but should raise TypeError" in out


def test_an_exception_is_one_line_not_a_traceback(capsys):
    def broken(x):
        return {}["missing"]
    result = check(broken, SQUARE)
    out = capsys.readouterr().out
    assert result.passed == 0 and "raised KeyError: 'missing'" in out and "Traceback" not in out


def test_learner_cannot_mutate_the_hidden_cases():
    task = Task("append", [Case("list", ([1],), [1, 2], "append 2")], reference=None)
    check(lambda xs: xs.append(2) or xs, task, quiet=True)
    assert task.cases[0].args == ([1],)


def test_unknown_task_name():
    with pytest.raises(UserError, match="no task '09_magic'"):
        load_task("09_magic")


@pytest.mark.parametrize("notebook", sorted(TASK_MODULES))
def test_every_reference_solution_passes_its_task(notebook):
    if importlib.util.find_spec(TASK_MODULES[notebook]) is None:
        pytest.skip(f"{TASK_MODULES[notebook]} is not written yet")
    task = load_task(notebook)
    assert check(task.reference, notebook, quiet=True), notebook
