"""The hands-on checker: one line per case, hints, no tracebacks; every reference passes."""

from inspect import signature

import pytest

from labkit import UserError, check
from labkit.check import NOTEBOOKS, load_task, signature_problem
from labkit.taskspec import Case, Task

SQUARE = Task(
    "square a number",
    [
        Case("two", (2,), 4, "multiply x by itself"),
        Case("negative", (-3,), 9, "a negative times a negative is positive"),
        Case("not a number", ("x",), raises=TypeError, hint="let Python raise TypeError"),
    ],
    reference=lambda x: x * x,
)


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


@pytest.mark.parametrize(
    "fn, why",
    [
        (lambda x, y: x * y, "missing a required argument: 'y'"),
        (lambda: 4, "too many positional arguments"),
        (lambda *, x: x * x, "too many positional arguments"),
    ],
)
def test_wrong_parameters_are_said_once_with_the_expected_ones(capsys, fn, why):
    result = check(fn, SQUARE)
    lines = capsys.readouterr().out.splitlines()
    assert not result and result.passed == 0
    assert [line for line in lines if "FAIL" in line] == [
        f"  FAIL  <lambda>{signature(fn)} cannot be called the way the cases call it ({why})"
    ]
    assert lines[-2:] == [
        "        hint: give your function the parameters (x), then run this cell again",
        "0/3 passed — no case could run",
    ]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_task_names_its_parameters_when_a_function_takes_none(notebook, capsys):
    result = check(lambda: None, notebook)
    out = capsys.readouterr().out
    assert out.count("FAIL") == 1 and out.count("hint:") == 1 and result.passed == 0
    assert signature_problem(load_task(notebook).reference, notebook) is None


def test_a_keyword_the_function_lacks_is_a_parameter_problem(capsys):
    task = Task(
        "scale",
        [Case("default", (2,), 2), Case("factor", (2,), 6, kwargs={"factor": 3})],
        reference=lambda x, factor=1: x * factor,
    )
    check(lambda x: x, task)
    out = capsys.readouterr().out
    assert "unexpected keyword argument 'factor'" in out and "the parameters (x, factor=1)" in out
    assert "1. default" not in out  # no case runs until the parameters fit


def test_a_crash_gets_a_hint_about_the_crash_not_the_value_rule(capsys):
    def crashes(x):
        return {}["missing"]

    check(crashes, SQUARE)
    out = capsys.readouterr().out
    assert "FAIL  1. two: raised KeyError: 'missing'" in out
    assert "hint: it should return 4 here: fix the line that raises KeyError first" in out
    assert "multiply x by itself" not in out


def test_a_case_can_say_what_a_typical_crash_means(capsys):
    task = Task(
        "first item",
        [
            Case(
                "empty",
                ([],),
                None,
                "return None for an empty list",
                crash_hint="an empty list has no [0]: test `if not xs`",
            )
        ],
        reference=lambda xs: xs[0] if xs else None,
    )
    check(lambda xs: xs[0], task)
    out = capsys.readouterr().out
    assert "raised IndexError: list index out of range" in out
    assert "hint: an empty list has no [0]: test `if not xs`" in out


def test_the_wrong_exception_says_which_one_was_expected(capsys):
    def wrong_error(x):
        if not isinstance(x, int):
            raise ValueError("not a number")
        return x * x

    check(wrong_error, SQUARE)
    out = capsys.readouterr().out
    assert (
        "FAIL  3. not a number: raised ValueError: not a number, but should raise TypeError" in out
    )
    assert "hint: let Python raise TypeError" in out


def test_returning_none_is_named_as_a_missing_return(capsys):
    def forgets(x):
        x * x

    check(forgets, SQUARE)
    out = capsys.readouterr().out
    assert "FAIL  1. two: expected 4, got None" in out
    assert "hint: your function returned None: end every path with `return ...`" in out


def test_a_hint_shown_already_is_not_repeated(capsys):
    check(lambda x: None, SQUARE)
    out = capsys.readouterr().out
    assert out.count("your function returned None") == 1
    assert "FAIL  2. negative: expected 9, got None\n        hint: as for case 1" in out


def test_a_task_can_say_what_a_wrong_value_means(capsys):
    def diagnose(got, expected):
        return "right items, wrong order" if sorted(got) == expected else None

    task = Task(
        "sorted copy",
        [Case("three", ([3, 1, 2],), [1, 2, 3], "sort ascending")],
        reference=sorted,
        diagnose=diagnose,
    )
    check(lambda xs: xs, task)
    assert "hint: right items, wrong order" in capsys.readouterr().out
    check(lambda xs: [1], task)
    assert "hint: sort ascending" in capsys.readouterr().out


def test_a_case_can_compare_only_what_it_tests():
    def names_only(got, expected):
        return [n for n, _ in got] == [n for n, _ in expected]

    task = Task(
        "rank",
        [
            Case(
                "order", (["b", "a"],), [("b", 1), ("a", 2)], "keep the order", compare=names_only
            ),
            Case("ranks", (["b", "a"],), [("b", 1), ("a", 2)], "rank from 1"),
        ],
        reference=lambda names: [(n, r) for r, n in enumerate(names, 1)],
    )
    result = check(lambda names: [(n, r) for r, n in enumerate(names)], task, quiet=True)
    assert result.lines[1:3] == [
        "  ok    1. order",
        "  FAIL  2. ranks: expected [('b', 1), ('a', 2)], got [('b', 0), ('a', 1)]\n"
        "        hint: rank from 1",
    ]


def test_the_memory_task_says_an_extra_name_is_not_a_missing_one(capsys):
    def flags_too_much(record):
        return ["confirmed", "kind"] if record.get("confirmed") is not True else []

    check(flags_too_much, "03_memory")
    out = capsys.readouterr().out
    assert (
        "FAIL  2. not confirmed by the user: expected ['confirmed'], got ['confirmed', 'kind']"
        "\n        hint: kind is fine in this record: flag only what is wrong"
    ) in out


def test_a_value_the_comparison_cannot_handle_is_a_wrong_value_not_a_crash(capsys):
    result = check(lambda record: [1, "kind", ["x"]], "03_memory")  # sorted() would raise
    out = capsys.readouterr().out
    assert result.passed == 0 and "Traceback" not in out
    assert "FAIL  1. a good record has no problems: expected [], got [1, 'kind', ['x']]" in out


def test_check_wants_the_function_not_its_result():
    with pytest.raises(UserError, match="pass my_function, not my_function"):
        check((lambda x: x * x)(2), SQUARE)


def test_learner_cannot_mutate_the_hidden_cases():
    task = Task("append", [Case("list", ([1],), [1, 2], "append 2")], reference=None)
    check(lambda xs: xs.append(2) or xs, task, quiet=True)
    assert task.cases[0].args == ([1],)


def test_unknown_task_name():
    with pytest.raises(UserError, match="no task '09_magic'"):
        load_task("09_magic")


# ---------------------------------------------------------------- progress, on this machine only


def test_a_passed_task_is_recorded_and_listed(tmp_path, capsys):
    from labkit import progress
    from labkit.check import progress_path

    assert progress_path() == tmp_path / "progress.json"  # conftest: never the real one
    check(lambda a, b: __import__("labkit").schema.json_equal(a, b), "02_tools", quiet=True)
    status = progress()
    out = capsys.readouterr().out
    assert status["02_tools"] and not status["01_setup"]
    assert "  done     02_tools" in out and "  not yet  01_setup" in out
    assert out.splitlines()[-1] == f"1/{len(NOTEBOOKS)} tasks done (recorded on this machine only)"


def test_a_failed_check_or_the_reference_itself_records_nothing(tmp_path):
    from labkit.check import passed_tasks

    check(lambda a, b: a == b, "02_tools", quiet=True)
    check(load_task("02_tools").reference, "02_tools", quiet=True)  # the notebooks run it
    assert passed_tasks() == [] and not (tmp_path / "progress.json").exists()


def test_a_broken_progress_file_counts_as_nothing_done(tmp_path):
    from labkit.check import passed_tasks

    (tmp_path / "progress.json").write_text("{not json")
    assert passed_tasks() == []


def test_the_command_line_shows_the_same(capsys):
    from labkit.__main__ import main

    check(lambda reply: load_task("04_loop").reference(reply), "04_loop", quiet=True)
    assert main(["progress"]) == 0
    out = capsys.readouterr().out
    assert "  done     04_loop" in out and "  not yet  10_evals" in out


def test_a_rule_a_case_names_must_exist():
    with pytest.raises(UserError, match="names no rule"):
        Task("t", [Case("c", (1,), 1, rule="missing")], reference=lambda x: x)


def test_a_case_whose_own_rule_holds_is_blamed_on_the_first_rule_broken():
    from labkit.taskspec import Rule

    task = Task(
        "double a number",
        [Case("zero", (0,), 0, rule="zero"), Case("two", (2,), 4, rule="positive")],
        reference=lambda x: 2 * x,
        rules=[
            Rule("zero", (0,), "twice nothing is nothing"),
            Rule("positive", (5,), "double positive numbers"),
        ],
    )
    result = check(lambda x: 2 * abs(x), task, quiet=True)
    assert result and result.rules == []

    def off_at_zero_and_two(x):  # doubles 5 (the probe) right, so its mistake lies elsewhere
        return x + 1 if x in (0, 2) else 2 * x

    result = check(off_at_zero_and_two, task, quiet=True)
    assert result.rules == ["zero"]
    assert result.lines[1:3] == [
        "  FAIL  1. zero: expected 0, got 1\n        hint: twice nothing is nothing",
        "  FAIL  2. two: expected 4, got 3\n"
        "        hint: this case fails only because of the mistake in case 1",
    ]
