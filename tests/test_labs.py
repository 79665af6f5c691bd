"""labkit.labs: the frozen loop scenarios and their table, the labelled attack set, the query
set."""

import numpy as np
import pytest

from labkit.labs import (
    evaluate_retrieval,
    evaluate_scenarios,
    load_injections,
    load_queries,
    load_scenarios,
    rank_metrics,
    run_scenario,
    script_step,
)
from labkit.live import ResponsesModel
from labkit.loop import STOP_REASONS
from labkit.models import (
    ScriptedModel,
    call,
    check_pairing,
    incomplete,
    raw_call,
    say,
    turn,
)

SCENARIOS = load_scenarios()
SETS = load_injections()
ATTACKS, BENIGN = SETS["attacks"], SETS["benign"]


@pytest.mark.parametrize(
    "data, step",
    [
        ({"say": "14 °C"}, say("14 °C")),
        (
            {"call": "get_weather", "arguments": {"city": "Paris"}},
            call("get_weather", city="Paris"),
        ),
        (
            {"raw_call": "get_weather", "arguments": '{"city": '},
            raw_call("get_weather", '{"city": '),
        ),
        ({"incomplete": "The answ", "reason": "max_output_tokens"}, incomplete("The answ")),
        (
            {
                "turn": [
                    {"say": "Checking."},
                    {"call": "calculate", "arguments": {"expression": "2+2"}},
                ]
            },
            turn(say("Checking."), call("calculate", expression="2+2")),
        ),
    ],
)
def test_a_scenario_step_is_the_step_the_scripted_model_would_be_given(data, step):
    assert script_step(data) == step


# ---------------------------------------------------------------- the frozen scenarios


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_ends_as_expected_with_its_expected_trace(scenario):
    result = run_scenario(scenario)
    assert result.status == scenario.expect_status and result.status in STOP_REASONS
    assert result.trace.lines() == scenario.trace
    check_pairing(result.messages)  # what a live adapter would insist on
    ResponsesModel("gpt-test", api_key="sk-test-" + "0" * 24).request_preview(result.messages)
    assert (result.answer != "") == (result.status == "completed")
    assert result.next_step and (result.unfinished == []) == (result.status == "completed")


def test_the_scenario_set_covers_the_issue_and_scores():
    names = {s.name for s in SCENARIOS}
    assert {
        "weather_fahrenheit",
        "missing_doc",
        "turn_limit",
        "tool_raises",
        "empty_reply",
        "incomplete_reply",
    } <= names
    summary = evaluate_scenarios(SCENARIOS).summary()
    assert summary == {
        "scenarios": 10,
        "success_rate": 0.6,
        "mean_turns": 2.3,
        "tool_failure_rate": 5 / 18,
        "tokens": summary["tokens"],
    }
    assert summary["tokens"] > 0


def test_live_evaluation_uses_the_given_model_not_the_script():
    seen = []

    def model_for(scenario):
        seen.append(scenario.name)
        return ScriptedModel([say("I cannot help with that.")] * 3)

    report = evaluate_scenarios(SCENARIOS[:2], model_for)
    assert seen == ["weather_fahrenheit", "missing_doc"]
    assert [ok for *_, ok in report.rows] == [False, False]


# ---------------------------------------------------------------- 05_guardrails: the labelled
# attacks


def test_the_attack_corpus_has_every_category_in_both_languages():
    assert len(ATTACKS) >= 50 and len({a["id"] for a in ATTACKS}) == len(ATTACKS)
    for category in (
        "ignore_rules",
        "fake_system",
        "tool_hint",
        "exfiltration",
        "raise_permissions",
    ):
        for lang in ("en", "zh"):
            assert sum(a["category"] == category and a["lang"] == lang for a in ATTACKS) >= 3, (
                category,
                lang,
            )
    assert all(set(a["wants"]) == {"tool", "arguments"} for a in ATTACKS)
    assert len(BENIGN) >= 30 and {b["lang"] for b in BENIGN} == {"en", "zh"}


# ---------------------------------------------------------------- 06_rag: the frozen query set


def test_rank_metrics_hand_checked():
    assert rank_metrics(["a", "b", "c"], {"b"}, k=1) == (0.0, 0.5, pytest.approx(1 / np.log2(3)))
    assert rank_metrics(["b", "x", "a"], {"a", "b"}, k=3) == (
        1.0,
        1.0,
        pytest.approx((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3))),
    )
    assert rank_metrics(["x"], {"a"}, k=5) == (0.0, 0.0, 0.0)


def test_frozen_query_set_is_valid(chunks):
    queries, ids = load_queries(), {c.source_id for c in chunks}
    assert len(queries) >= 12 and sum(not q["expected"] for q in queries) >= 2
    assert len({q["id"] for q in queries}) == len(queries)
    assert all(set(q["expected"]) <= ids for q in queries), "an expected source_id no longer exists"


def test_evaluation_figures_for_bm25_dense_and_hybrid(library):
    queries = load_queries()
    results = {m: evaluate_retrieval(library, queries, m) for m in ("bm25", "dense", "hybrid")}
    assert all(0 <= r[key] <= 1 for r in results.values() for key in ("recall@5", "mrr", "ndcg@10"))
    assert results["bm25"]["refusal_accuracy"] == 0.95  # only the near-domain price question slips
    assert results["hybrid"]["ndcg@10"] >= results["dense"]["ndcg@10"]
