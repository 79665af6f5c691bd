"""labkit.evals: tool calls matched the BFCL way (rule by rule, and the frozen set), final answers
scored the GAIA way, with 06's citation checks."""

from pathlib import Path

import pytest

from labkit import ToolCall, UserError
from labkit.evals import (
    MATCH_KINDS,
    ast_match,
    bfcl_calls,
    final_answer,
    normalize_answer,
    quasi_exact_match,
    score_answer,
    standardize,
)
from labkit.labs import load_tool_cases
from labkit.toolbox import get_weather

FLIGHTS = {  # a BFCL function doc: Python type names, a nested dict, a list
    "name": "search_flights",
    "description": "Search flights.",
    "parameters": {
        "type": "dict",
        "properties": {
            "origin": {"type": "string"},
            "seats": {"type": "integer"},
            "budget": {"type": "float"},
            "direct": {"type": "boolean"},
            "dates": {"type": "array", "items": {"type": "string"}},
            "passengers": {
                "type": "dict",
                "properties": {"adults": {"type": "integer"}, "children": {"type": "integer"}},
            },
            "legs": {
                "type": "array",
                "items": {"type": "dict", "properties": {"to": {"type": "string"}}},
            },
        },
        "required": ["origin"],
    },
}
TRUTH = {  # each parameter's allowed values; "" = may be left out
    "origin": ["New York", "NYC"],
    "seats": [2, ""],
    "budget": [500.0, ""],
    "direct": [True, ""],
    "dates": [["2025-03-01", "2025-03-02"], ""],
    "passengers": [{"adults": [2], "children": [0, ""]}, ""],
    "legs": [[{"to": ["Rome"]}, {"to": ["Paris"]}], ""],
}


def match(arguments, truth=TRUTH):
    return ast_match([{"search_flights": arguments}], [{"search_flights": truth}], [FLIGHTS])


# ---------------------------------------------------------------- each rule: a pass and a fail

RULES = [  # (rule, arguments that pass, arguments that fail, the kind the failure names)
    ("the required parameter present", {"origin": "NYC"}, {"seats": 2}, "missing_required"),
    (
        "no parameter outside the function doc",
        {"origin": "NYC"},
        {"origin": "NYC", "cabin": "economy"},
        "unexpected_param",
    ),
    (
        "a value among the allowed",
        {"origin": "NYC", "seats": 2},
        {"origin": "Boston"},
        "value_error",
    ),
    (
        "strings: case, spaces and , . / - _ * ^ do not count",
        {"origin": "new-york"},
        {"origin": "New York!"},
        "value_error",
    ),
    (
        "an int is accepted for a float",
        {"origin": "NYC", "budget": 500},
        {"origin": "NYC", "budget": "500"},
        "type_error",
    ),
    (
        "an integer must be an int",
        {"origin": "NYC", "seats": 2},
        {"origin": "NYC", "seats": 2.0},
        "type_error",
    ),
    (
        "a boolean is no integer, and no integer is a boolean",
        {"origin": "NYC", "direct": True},
        {"origin": "NYC", "direct": 1},
        "type_error",
    ),
    (
        "lists element by element, in order",
        {"origin": "NYC", "dates": ["2025-03-01", "2025-03-02"]},
        {"origin": "NYC", "dates": ["2025-03-02", "2025-03-01"]},
        "value_error",
    ),
    (
        "lists: every element, none missing",
        {"origin": "NYC", "dates": ["2025-03-01", "2025-03-02"]},
        {"origin": "NYC", "dates": ["2025-03-01"]},
        "value_error",
    ),
    (
        "list items have their type",
        {"origin": "NYC", "dates": ["2025-03-01", "2025-03-02"]},
        {"origin": "NYC", "dates": ["2025-03-01", 20250302]},
        "type_error",
    ),
    (
        "a nested dict key by key; an optional key may be absent",
        {"origin": "NYC", "passengers": {"adults": 2}},
        {"origin": "NYC", "passengers": {"adults": 2, "children": 1}},
        "value_error",
    ),
    (
        "a nested dict: no unknown key",
        {"origin": "NYC", "passengers": {"adults": 2, "children": 0}},
        {"origin": "NYC", "passengers": {"adults": 2, "pets": 1}},
        "value_error",
    ),
    (
        "a list of dicts, each against its own allowed dict",
        {"origin": "NYC", "legs": [{"to": "rome"}, {"to": "Paris"}]},
        {"origin": "NYC", "legs": [{"to": "Paris"}, {"to": "Rome"}]},
        "value_error",
    ),
]


@pytest.mark.parametrize("rule, good, bad, kind", RULES, ids=[r[0] for r in RULES])
def test_each_rule_passes_a_right_call_and_names_itself_for_a_wrong_one(rule, good, bad, kind):
    assert match(good).ok, match(good)
    assert (match(bad).ok, match(bad).kind) == (False, kind)


def test_list_items_may_be_of_the_type_an_allowed_list_writes_them_in():
    truth = {**TRUTH, "dates": [[20250301], ""]}  # the doc says strings, the truth writes an int
    assert match({"origin": "NYC", "dates": [20250301]}, truth).ok
    wrong = match({"origin": "NYC", "dates": [True]}, truth)
    assert (wrong.ok, wrong.kind) == (False, "type_error")


def test_an_optional_parameter_may_be_absent_only_when_its_values_hold_an_empty_string():
    assert match({"origin": "NYC"}).ok  # TRUTH lets every optional parameter be left out
    asked = match({"origin": "NYC"}, {**TRUTH, "seats": [2]})  # the question asked for 2 seats
    assert (asked.ok, asked.kind) == (False, "missing_optional")


def test_a_parameter_of_the_doc_that_the_truth_does_not_name_is_unexpected():
    got = match({"origin": "NYC", "seats": 2}, {"origin": ["NYC"]})
    assert (got.ok, got.kind) == (False, "unexpected_param") and "ground truth" in got.reason


def test_the_function_name_must_match():
    got = ast_match([{"find_flights": {"origin": "NYC"}}], [{"search_flights": TRUTH}], [FLIGHTS])
    assert (got.ok, got.kind) == (False, "wrong_name")
    assert "'find_flights'" in got.reason and "'search_flights'" in got.reason


CITY = {"get_weather": {"city": ["Paris"]}}
TOKYO = {"get_weather": {"city": ["Tokyo"]}}


@pytest.mark.parametrize(
    "calls, truth, kind",
    [
        (
            [{"get_weather": {"city": "Tokyo"}}, {"get_weather": {"city": "paris"}}],
            [CITY, TOKYO],
            "ok",
        ),
        ([{"get_weather": {"city": "Paris"}}] * 2, [CITY, TOKYO], "no_match"),
        ([{"get_weather": {"city": "Paris"}}], [CITY, TOKYO], "wrong_count"),
        ([{"get_weather": {"city": "Paris"}}] * 2, [CITY], "wrong_count"),
        ([], [], "ok"),
        ([{"get_weather": {"city": "Paris"}}], [], "unexpected_call"),
        ([], [CITY], "wrong_count"),
    ],
    ids=[
        "parallel in any order",
        "parallel: one city twice",
        "parallel: a call missing",
        "simple: one call too many",
        "irrelevance: no call",
        "irrelevance: a call anyway",
        "simple: no call",
    ],
)
def test_counts_orders_and_irrelevance(calls, truth, kind):
    """A labkit Tool's JSON-schema parameters serve as its function doc."""
    got = ast_match(calls, truth, [get_weather])
    assert (got.ok, got.kind) == (kind == "ok", kind)


def test_parallel_calls_are_paired_by_a_matching_not_first_come():
    """BFCL pairs greedily (the first call that fits); a matching finds the pairing if one exists.
    Expected call 1 allows city Paris or Tokyo, call 2 only Paris: the greedy choice would pair
    the Paris call with expected 1 and leave nothing for expected 2."""
    calls = [{"get_weather": {"city": "Paris"}}, {"get_weather": {"city": "Tokyo"}}]
    either = {"get_weather": {"city": ["Paris", "Tokyo"]}}
    assert ast_match(calls, [either, CITY], [get_weather]).ok


def test_labkit_tool_calls_match_like_bfcl_output_and_broken_ones_are_the_models_fault():
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    assert bfcl_calls([call]) == [{"get_weather": {"city": "Paris"}}]
    assert ast_match([call], [CITY], [get_weather]).ok
    broken = ast_match([ToolCall("call_2", "get_weather", '{"city": ')], [CITY], [get_weather])
    assert (broken.ok, broken.kind) == (False, "malformed") and "not valid JSON" in broken.reason


@pytest.mark.parametrize(
    "calls, truth, functions, problem",
    [
        (["get_weather(city='Paris')"], [CITY], [get_weather], "give labkit ToolCalls or BFCL"),
        ([], {"get_weather": {"city": ["Paris"]}}, [get_weather], "use BFCL's form"),
        ([], [{"get_weather": {"city": "Paris"}}], [get_weather], "[allowed values]"),
        ([{"get_time": {}}], [{"get_time": {}}], [get_weather], "has no doc for it"),
    ],
    ids=["a call as text", "truth not a list", "allowed values not a list", "no function doc"],
)
def test_inputs_in_the_wrong_format_are_the_callers_mistake(calls, truth, functions, problem):
    with pytest.raises(UserError, match=problem.replace("[", r"\[").replace("(", r"\(")):
        ast_match(calls, truth, functions)


def test_standardize_is_bfcls_string_rule():
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"
    assert standardize("Luigi's") == 'luigi"s' and standardize("late!") == "late!"


# ---------------------------------------------------------------- the frozen set

CASES = load_tool_cases()


def test_the_frozen_set_has_every_category_and_every_rule():
    categories = [c["category"] for c in CASES]
    assert len(CASES) >= 40 and len({c["id"] for c in CASES}) == len(CASES)
    for category in ("simple", "multiple", "parallel", "irrelevance"):
        assert categories.count(category) >= 8, category
    assert set(MATCH_KINDS) - {c["expect"] for c in CASES} == {"malformed"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_frozen_case_gets_the_verdict_written_beside_it(case):
    got = ast_match(case["output"], case["ground_truth"], case["functions"])
    assert got.kind == case["expect"], got.reason


# ---------------------------------------------------------------- final answers: GAIA's rules

GAIA_STYLE = [  # (model answer, truth, quasi-exact match)
    ("57.2", "57.2", True),
    ("$1,234.50", "1234.5", True),  # $ and thousands separators dropped
    ("12%", "12", True),
    ("57.2 °F", "57.2", False),  # other units make it no number
    ("17 km", "17", False),
    ("fifty", "50", False),
    ("0.1", "0.10", True),  # by value
    ("1,000", "1000", True),
    ("Cairo, Sydney", "Cairo, Sydney", True),  # a list, element by element
    ("cairo ; sydney", "Cairo; Sydney", True),
    ("Sydney, Cairo", "Cairo, Sydney", False),  # in order
    ("Cairo and Sydney", "Cairo, Sydney", False),  # not a list of two
    ("12; 19.0", "12; 19", True),  # numbers in a list by value
    ("12 °C; 19 °C", "12; 19", False),
    ("New York", "new york", True),  # strings: no case, spaces or punctuation
    ("New-York!", "new york", True),
    ("NewYork", "New York", True),  # spaces removed, so these are equal too
    ("New York City", "New York", False),
    ("The Beatles", "Beatles", True),  # labkit drops articles; GAIA does not
    ("an umbrella or a rain jacket", "umbrella or rain jacket", True),
    ("a", "a", True),  # an answer that is only an article stays itself
]


@pytest.mark.parametrize("answer, truth, expected", GAIA_STYLE, ids=[a for a, _, _ in GAIA_STYLE])
def test_quasi_exact_match_on_gaia_style_answers(answer, truth, expected):
    assert quasi_exact_match(answer, truth) is expected


@pytest.mark.parametrize(
    "answer, truth", [("The Beatles", "Beatles"), ("a warm coat", "warm coat")]
)
def test_articles_false_is_gaias_own_rule(answer, truth):
    assert quasi_exact_match(answer, truth) and not quasi_exact_match(answer, truth, articles=False)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower!", "eiffeltower"),
        ("Sea gull", "seagull"),
        ("  A  ", "a"),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("14 * 9 / 5 + 32 = 57.2\nFINAL ANSWER: 57.2", "57.2"),
        ("final answer: 3\nFINAL ANSWER:  4 ", "4"),  # the last one counts
        ("It is 57.2.", "It is 57.2."),  # no marker: the whole text
    ],
)
def test_final_answer_is_what_follows_the_last_marker(text, expected):
    assert final_answer(text) == expected


TRAVEL = {"handbook-travel.md": "Below 10 °C: a warm coat. Rain: an umbrella or a rain jacket."}


@pytest.mark.parametrize(
    "text, passed, problem",
    [
        ("FINAL ANSWER: a warm coat [handbook-travel.md]", True, None),
        ("FINAL ANSWER: a warm coat", False, "cites no source"),
        ("FINAL ANSWER: a warm coat [travel.md]", False, "not in the evidence"),
        ("FINAL ANSWER: a warm hat [handbook-travel.md]", False, None),  # wrong, though cited
        ("FINAL ANSWER: sunglasses and boots [handbook-travel.md]", False, None),
    ],
    ids=["cited and right", "no citation", "an unknown source", "wrong", "unsupported"],
)
def test_an_answer_that_must_cite_gets_06s_checks(text, passed, problem):
    score = score_answer(text, "a warm coat", TRAVEL)
    assert score.passed is passed
    assert any(problem in p for p in score.problems) if problem else score.problems == []


def test_an_unsupported_citation_is_counted_by_06s_report():
    score = score_answer("FINAL ANSWER: sunglasses and boots [handbook-travel.md]", "x", TRAVEL)
    assert (score.citations.citations, score.citations.unsupported) == (1, 1)
    assert score_answer("FINAL ANSWER: 57.2", "57.2").citations is None  # no sources: no checks


def test_the_benchmark_times_matchers_whose_verdicts_it_reports(monkeypatch):
    """bench_evals compares ast_match with two shortcuts: both ast_match inputs give every written
    verdict, and each shortcut gets some wrong (the benchmark prints how many)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    from benchmarks import bench_evals

    cases = load_tool_cases()
    right = {
        name: sum(fn(c) == (c["expect"] == "ok") for c in cases)
        for name, fn in bench_evals.methods(cases).items()
    }
    assert right["ast_match (BFCL form)"] == right["ast_match (ToolCalls)"] == len(cases)
    assert right["jsonschema types only"] < len(cases) and right["exact JSON text"] < len(cases)
