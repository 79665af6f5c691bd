"""labkit.tasks: every hands-on task's reference is the lesson's own function and passes its cases;
a typical wrong answer fails with a hint that fits it."""

import re
import string

import pytest

from labkit import check
from labkit.context import split_turns
from labkit.evals import normalize_answer
from labkit.guardrails import same_call
from labkit.live import read_output
from labkit.loop import next_action
from labkit.mcp import changed_tools, pin
from labkit.memory import record_problems
from labkit.rag import rrf
from labkit.runtime import decide
from labkit.schema import json_equal
from labkit.tasks import TASKS

PUNCTUATION = str.maketrans("", "", string.punctuation)
REFERENCES = {
    "01_setup": read_output,
    "02_tools": json_equal,
    "03_memory": record_problems,
    "04_loop": next_action,
    "05_guardrails": same_call,
    "06_rag": rrf,
    "07_runtime": decide,
    "08_context": split_turns,
    "09_mcp": changed_tools,
    "10_evals": normalize_answer,
}


@pytest.mark.parametrize("notebook", sorted(REFERENCES))
def test_each_reference_is_the_lessons_function_and_passes_its_own_cases(notebook):
    assert TASKS[notebook].reference is REFERENCES[notebook]
    assert check(REFERENCES[notebook], notebook, quiet=True)


def test_every_notebook_has_a_task():
    assert sorted(TASKS) == sorted(REFERENCES)


def no_dedupe(rankings, k=60):
    scores = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0) + 1 / (k + rank)
    return sorted(scores.items(), key=lambda p: -p[1])


def join_any(messages):
    turns = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool" and turns:
            turns[-1].append(m)
        else:
            turns.append([m])
    return turns


WRONG = {  # a typical wrong answer per task, and how many of its cases it still passes
    "01_setup: reads nothing": ("01_setup", lambda items: ("", []), "some"),
    "02_tools: Python's ==": ("02_tools", lambda a, b: a == b, "some"),
    "03_memory: checks only confirmed": (
        "03_memory",
        lambda record: [] if record.get("confirmed") else ["confirmed"],
        "some",
    ),
    "03_memory: returns None": ("03_memory", lambda record: None, "none"),
    "04_loop: runs calls from a cut-short reply": (
        "04_loop",
        lambda reply: (
            "run_tools"
            if reply.tool_calls
            else ("completed" if reply.text.strip() else "empty_output")
        ),
        "some",
    ),
    "05_guardrails: compares the text": (
        "05_guardrails",
        lambda a, b: a.name == b.name and a.arguments == b.arguments,
        "some",
    ),
    "06_rag: no dedupe": ("06_rag", no_dedupe, "all but one"),
    "08_context: every message its own turn": ("08_context", lambda ms: [[m] for m in ms], "some"),
    "08_context: joins an output to any turn": ("08_context", join_any, "all but one"),
    "09_mcp: refuses new tools too": (
        "09_mcp",
        lambda pins, listed: [t.name for t in listed if pins.get(t.name) != pin(t)],
        "some",
    ),
    "10_evals: articles dropped inside words": (
        "10_evals",
        lambda text: re.sub(r"\s|a|an|the", "", text.lower()).translate(PUNCTUATION),
        "some",
    ),
    "10_evals: spaces only, articles kept": (
        "10_evals",
        lambda text: text.replace(" ", "").lower().translate(PUNCTUATION),
        "some",
    ),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_typical_wrong_answer_fails(case):
    notebook, wrong, passes = WRONG[case]
    result = check(wrong, notebook, quiet=True)
    assert not result
    expected = {
        "some": 0 < result.passed < result.total,
        "none": result.passed == 0,
        "all but one": result.passed == result.total - 1,
    }
    assert expected[passes], result


def test_a_text_comparison_still_passes_the_cases_written_alike():
    naive = lambda a, b: a.name == b.name and a.arguments == b.arguments  # noqa: E731
    assert check(naive, "05_guardrails", quiet=True).passed >= 5


def test_the_rrf_tie_cases_test_the_order_alone(capsys):
    def ranks_from_zero(rankings, k=60):  # wrong scores, right order
        return [(item, score * 1.01) for item, score in rrf(rankings, k)]

    result = check(ranks_from_zero, "06_rag")
    out = capsys.readouterr().out
    assert "ok    5. ties go to the id seen first" in out and "ok    6. ties when the first" in out
    assert "FAIL  1. one ranking keeps its order" in out and "with rank starting at 1" in out
    assert result.passed == 3  # the two tie cases and "no rankings"


@pytest.mark.parametrize("reverse", [False, True], ids=["ids ascending", "ids descending"])
def test_the_rrf_task_catches_ties_sorted_by_id_in_either_order(reverse):
    def ties_by_id(rankings, k=60):  # right scores; equal scores ordered by the ids themselves
        by_id = sorted(rrf(rankings, k), key=lambda pair: pair[0], reverse=reverse)
        return sorted(by_id, key=lambda pair: -pair[1])

    result = check(ties_by_id, "06_rag", quiet=True)
    assert not result and result.passed == result.total - 1
    assert any("FAIL" in line and "ties" in line for line in result.lines)


def test_the_turns_task_shows_each_message_by_its_role(capsys):
    """08's cases compare lists of Messages: a wrong answer is shown as roles, not as reprs."""
    check(lambda messages: [[m] for m in messages], "08_context")
    shown = capsys.readouterr().out
    assert "got [[user], [assistant calls get_weather], [tool call_1], [assistant]]" in shown
    assert "Message(" not in shown


# ---------------------------------------------------------------- 11_coding_agent: SWE-bench's rule


from labkit.swe import resolved  # noqa: E402  (kept with its task's tests: merges stay easy)

REFERENCES["11_coding_agent"] = resolved


def test_the_coding_task_is_swe_s_resolved():
    assert TASKS["11_coding_agent"].reference is resolved
    assert check(resolved, "11_coding_agent", quiet=True)


CODING_WRONG = {  # a plausible wrong rule -> the hint it must be shown
    "only FAIL_TO_PASS": (
        lambda r, f, p: all(r.get(t) == "passed" for t in f),
        "every PASS_TO_PASS test must still pass",
    ),
    "indexes the results": (
        lambda r, f, p: all(r[t] == "passed" for t in f + p),
        "a test missing from the results did not pass",
    ),
    "not failed is passed": (
        lambda r, f, p: all(r.get(t) != "failed" for t in f + p),
        "a test missing from the results did not pass",
    ),
    "not failed and not missing": (
        lambda r, f, p: all(t in r and r[t] != "failed" for t in f + p),
        "a test that errors (e.g. in its setup) did not pass",
    ),
    "a skip counts": (
        lambda r, f, p: all(r.get(t) in ("passed", "skipped") for t in f + p),
        "a skipped test proves nothing",
    ),
    "every test that ran": (
        lambda r, f, p: all(o == "passed" for o in r.values()) and all(t in r for t in f + p),
        "only the listed tests count",
    ),
    "any instead of all": (
        lambda r, f, p: any(r.get(t) == "passed" for t in f + p),
        "a FAIL_TO_PASS test that does not pass means not resolved",
    ),
    "nothing listed is nothing proved": (
        lambda r, f, p: bool(f + p) and all(r.get(t) == "passed" for t in f + p),
        "with no test listed nothing is required",
    ),
}


@pytest.mark.parametrize("name", CODING_WRONG)
def test_a_wrong_resolved_fails_with_its_hint(name):
    wrong, hint = CODING_WRONG[name]
    result = check(wrong, "11_coding_agent", quiet=True)
    assert not result
    assert any(hint in line for line in result.lines if "hint:" in line), result.lines


def set_based(results, fail_to_pass, pass_to_pass):
    passed = {t for t, outcome in results.items() if outcome == "passed"}
    return set(fail_to_pass) | set(pass_to_pass) <= passed


def loop_based(results, fail_to_pass, pass_to_pass):
    for test in [*fail_to_pass, *pass_to_pass]:
        if results.get(test, "missing") != "passed":
            return False
    return True


@pytest.mark.parametrize("right", [set_based, loop_based])
def test_a_differently_written_resolved_passes(right):
    assert check(right, "11_coding_agent", quiet=True)
