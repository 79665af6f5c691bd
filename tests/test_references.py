"""labkit beside the references, on generated inputs (benchmarks/references.py has the harness;
bench_references runs every case): BFCL's own ast_checker on BFCL's own data and its mutations,
GAIA's question_scorer on generated answer pairs."""

import os

import pytest

from benchmarks import references
from labkit.evals import ast_match, quasi_exact_match, score_answer

BFCL = references.load_bfcl()
needs_bfcl = pytest.mark.skipif(
    BFCL is None and os.environ.get("CI") != "true",
    reason="bfcl-eval is not installed in .venv/bfcl-eval: `make test` installs it",
)


@needs_bfcl
def test_bfcl_mode_agrees_with_bfcls_checker_on_every_mutation_of_a_sample():
    agree, total, differences, crashes = references.compare_bfcl(every=40, mode="bfcl")
    assert total > 4000 and crashes == []
    assert differences == []


@needs_bfcl
def test_the_default_differs_from_bfcl_only_where_it_pairs_parallel_calls_better():
    """Every difference: BFCL's greedy pairing rejects calls a maximum matching pairs."""
    agree, total, differences, _ = references.compare_bfcl(every=40)
    assert agree / total >= 0.999
    for case_id, calls, reference, ours in differences:
        assert "parallel" in case_id and reference is False and ours.ok
        assert ast_match(calls, *_case(case_id), mode="bfcl").kind == "no_match"


def _case(case_id):
    _, data = BFCL
    for _, found, functions, truth in references.bfcl_cases(data):
        if found == case_id:
            return truth, functions
    raise KeyError(case_id)


@needs_bfcl
def test_bfcls_literal_dict_value_is_matched_not_crashed_on():
    truth, functions = _case("live_multiple_121-46-0")
    right = [{"get_headway": references._literal(truth[0]["get_headway"])}]
    assert ast_match(right, truth, functions).ok and ast_match(right, truth, functions, mode="bfcl")


def test_gaia_mode_is_gaias_scorer_on_generated_pairs():
    agree, total, differences = references.compare_gaia(3000, mode="gaia")
    assert differences == [] and total == 3000


@pytest.mark.parametrize(
    "answer, truth, labkit, gaia",
    [
        (None, "None", True, True),  # GAIA reads a missing answer as "None"
        ("twelve", "inf", False, True),  # GAIA: no number -> infinity == inf
        ("the Eiffel Tower", "Eiffel Tower", True, False),  # labkit drops articles
        ("12", "12.0", True, True),
        ("13", "12", False, False),
    ],
)
def test_the_default_differs_from_gaia_only_by_its_stated_choices(answer, truth, labkit, gaia):
    assert quasi_exact_match(answer, truth) is labkit
    assert quasi_exact_match(answer, truth, mode="gaia") is gaia
    assert references.gaia_question_scorer(answer, truth) is gaia


def test_score_answer_takes_no_answer_without_crashing():
    assert score_answer(None, "57.2").correct is False
    assert score_answer("FINAL ANSWER: 57.2", "57.2", mode="gaia").correct is False  # whole text
