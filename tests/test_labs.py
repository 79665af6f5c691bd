"""labkit.labs: the frozen loop scenarios and their table, the labelled attack set, the query
set."""

import numpy as np
import psutil
import pytest

from labkit.errors import UserError
from labkit.labs import (
    DBOS_POINTS,
    Bank,
    dbos_kill_trial,
    evaluate_retrieval,
    evaluate_scenarios,
    kill_points,
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


# ---------------------------------------------------------------- 07_runtime beside DBOS


@pytest.mark.parametrize(
    "keys, receipts, paid",
    [
        (["op_1", "op_1", "op_2"], ["R-1", "R-1", "R-2"], 2),
        ([None, None, None], ["R-1", "R-2", "R-3"], 3),
    ],
    ids=["a repeated key pays once", "without a key every request pays"],
)
def test_the_bank_honours_an_idempotency_key(tmp_path, keys, receipts, paid):
    bank = Bank(tmp_path / "bank.txt")
    assert [bank.refund("A-1", 30, key)["receipt"] for key in keys] == receipts
    assert (bank.requests("A-1"), bank.refunds("A-1")) == (3, paid)


@pytest.mark.parametrize("trials", [6, 20, 25])
def test_kill_points_are_shuffled_and_balanced(trials):
    points = kill_points(trials)
    counts = [points.count(p) for p in DBOS_POINTS]
    assert len(points) == trials and max(counts) - min(counts) <= 1
    assert points != sorted(points, key=DBOS_POINTS.index) and points == kill_points(trials)


def test_an_unknown_kill_point_is_refused(tmp_path):
    with pytest.raises(UserError, match="unknown kill points"):
        dbos_kill_trial(tmp_path, ["after_lunch"])


@pytest.fixture(scope="module")
def dbos_trial(tmp_path_factory):
    """24 DBOS workers per mode, each SIGKILLed at a seeded random point, then recovered."""
    points = kill_points(24, seed=16)
    trial = dbos_kill_trial(tmp_path_factory.mktemp("dbos"), points)
    return points, trial, psutil.Process().children(recursive=True)


def test_every_dbos_worker_was_killed_and_reaped(dbos_trial):
    points, trial, children = dbos_trial
    for rows in trial.values():
        assert [r["point"] for r in rows] == points
        assert all(r["killed"] for r in rows)
    assert children == []  # the runner and every worker it forked are gone


@pytest.mark.parametrize("mode", ["with key", "without key"])
def test_dbos_runs_a_step_again_when_its_completion_was_not_recorded(dbos_trial, mode):
    """The bank is asked twice exactly where the worker died after the effect, before DBOS
    recorded the step's output; at every other point, once."""
    points, trial, _ = dbos_trial
    assert [r["requests"] for r in trial[mode]] == [2 if p == "after_effect" else 1 for p in points]


def test_only_the_idempotency_key_keeps_the_second_request_from_paying(dbos_trial):
    points, trial, _ = dbos_trial
    duplicates = {m: [r["point"] for r in rows if r["refunds"] > 1] for m, rows in trial.items()}
    assert duplicates["with key"] == []
    assert duplicates["without key"] == ["after_effect"] * points.count("after_effect")
    assert all(r["refunds"] >= 1 for rows in trial.values() for r in rows)  # none lost
