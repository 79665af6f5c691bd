"""labkit.labs: the frozen loop scenarios and their table, the labelled attack set, the query
set."""

import io
import json

import jsonschema
import numpy as np
import pytest

from labkit.labs import (
    bfcl_tool,
    evaluate_retrieval,
    evaluate_scenarios,
    load_injections,
    load_queries,
    load_scenarios,
    load_suite,
    load_tool_cases,
    model_calls,
    plot_cost,
    plot_success,
    rank_metrics,
    run_scenario,
    script_step,
    tool_call_table,
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


# ---------------------------------------------------------------- 10_evals: the tool-call set,
# live calls, plots

TOOL_CASES = load_tool_cases()


@pytest.mark.parametrize("case", TOOL_CASES[:1] + TOOL_CASES[15:17], ids=lambda c: c["id"])
def test_a_bfcl_function_doc_becomes_a_json_schema_an_api_accepts(case):
    for doc in case["functions"]:
        spec = bfcl_tool(doc)
        jsonschema.Draft202012Validator.check_schema(spec.parameters)  # the reference
        assert spec.parameters["type"] == "object" and spec.strict is False
        types = json.dumps(spec.parameters)
        assert '"dict"' not in types and '"float"' not in types


def test_the_tool_call_table_counts_by_category():
    report = tool_call_table(TOOL_CASES)
    lines = repr(report).splitlines()
    assert [line.split()[0] for line in lines] == [
        "category",
        "simple",
        "multiple",
        "parallel",
        "irrelevance",
        "all",
    ]
    assert report.accuracy() == sum(c["expect"] == "ok" for c in TOOL_CASES) / len(TOOL_CASES)


def test_a_live_model_is_asked_each_question_with_its_functions_as_tools():
    """Through the real SDK against the fake server, which calls the first tool it is offered
    with arguments filled from the schema: its calls are matched like anyone's."""
    from fake_server import FakeServer

    with FakeServer() as server:
        model = ResponsesModel("gpt-test", api_key="sk-test-" + "0" * 24, base_url=server.url)
        report = tool_call_table(TOOL_CASES[:3], model_calls(model))
        sent = [r["body"] for r in server.requests]
    assert [b["input"][-1]["content"] for b in sent] == [c["question"] for c in TOOL_CASES[:3]]
    assert sent[0]["tools"][0]["name"] == "calculate_triangle_area"
    assert [m.kind for _, m in report.rows] == ["value_error"] * 3  # it sends base=2, height=2


@pytest.mark.parametrize("plot", [plot_success, plot_cost])
def test_plots_have_a_title_and_labelled_axes_and_the_same_bytes_every_time(plot):
    import matplotlib

    matplotlib.use("Agg")  # no display in tests
    suite = load_suite()
    reports = [suite.run(v) for v in ("v1", "v2")]
    fig = plot(reports)
    (ax,) = fig.axes
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    images = []
    for _ in range(2):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        images.append(buffer.getvalue())
    assert images[0] == images[1] and b"tIME" not in images[0]  # PNG's time chunk: absent
