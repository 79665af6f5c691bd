"""labkit.labs: the frozen loop scenarios and their table, the labelled attack set, the query
set."""

import io
import json

import jsonschema
import numpy as np
import psutil
import pytest

from labkit.errors import UserError
from labkit.labs import (
    DBOS_POINTS,
    MEMORY_QUERIES,
    Bank,
    FTS5Index,
    bfcl_tool,
    dbos_kill_trial,
    eval_table,
    evaluate_retrieval,
    evaluate_scenarios,
    kill_points,
    load_injections,
    load_memory_set,
    load_queries,
    load_scenarios,
    load_suite,
    load_tool_cases,
    memory_recall_table,
    model_calls,
    plot_cost,
    plot_success,
    rank_metrics,
    recall_cost,
    run_scenario,
    script_step,
    synthetic_memories,
    tool_call_table,
)
from labkit.live import ResponsesModel
from labkit.loop import STOP_REASONS
from labkit.memory import ManualClock, MemoryStore
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
    table = eval_table(results).splitlines()  # 06 prints these scores, then charts the same ones
    assert [line.split()[0] for line in table] == ["method", "bm25", "dense", "hybrid"]
    assert table[1].split()[1:] == [f"{results['bm25'][key]:.3f}" for key in (
        "recall@5", "mrr", "ndcg@10", "refusal_accuracy")]  # fmt: skip


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


@pytest.mark.soak
def test_every_dbos_worker_was_killed_and_reaped(dbos_trial):
    points, trial, children = dbos_trial
    for rows in trial.values():
        assert [r["point"] for r in rows] == points
        assert all(r["killed"] for r in rows)
    assert children == []  # the runner and every worker it forked are gone


@pytest.mark.soak
@pytest.mark.parametrize("mode", ["with key", "without key"])
def test_dbos_runs_a_step_again_when_its_completion_was_not_recorded(dbos_trial, mode):
    """The bank is asked twice exactly where the worker died after the effect, before DBOS
    recorded the step's output; at every other point, once."""
    points, trial, _ = dbos_trial
    assert [r["requests"] for r in trial[mode]] == [2 if p == "after_effect" else 1 for p in points]


@pytest.mark.soak
def test_only_the_idempotency_key_keeps_the_second_request_from_paying(dbos_trial):
    points, trial, _ = dbos_trial
    duplicates = {m: [r["point"] for r in rows if r["refunds"] > 1] for m, rows in trial.items()}
    assert duplicates["with key"] == []
    assert duplicates["without key"] == ["after_effect"] * points.count("after_effect")
    assert all(r["refunds"] >= 1 for rows in trial.values() for r in rows)  # none lost


# ---------------------------------------------------------------- 03: recall beside FTS5


def test_the_frozen_memory_set_is_valid_and_written_at_its_ages():
    clock = ManualClock()
    store, tenant, queries = load_memory_set(clock=clock)
    data = json.loads(MEMORY_QUERIES.read_text())
    ids = [m["id"] for m in data["memories"]]
    assert len(set(ids)) == len(ids) == store.count(tenant)
    assert {q["id"] for q in queries} == {f"q{n:02}" for n in range(1, len(queries) + 1)}
    assert all(q["expected"] and set(q["expected"]) <= set(ids) for q in queries)
    for m in data["memories"]:
        assert clock.now - store.get(tenant, m["id"]).updated_at == m["age_days"] * 86400


def four_memories(clock):
    store = MemoryStore(":memory:", clock=clock)
    store.write("ana", "Lives in Lisbon near the river", id="city_then", confirmed=True)
    clock.advance(days=60)
    store.write("ana", "Moved to Porto; lives in the old town now", id="city_now", confirmed=True)
    store.write("ana", "Allergic to peanuts", id="allergy", confirmed=True)
    store.write("ana", 'Said "NOT now" - later', id="quote", confirmed=True)
    return store


@pytest.mark.parametrize(
    "query, stem, labkit, fts5",
    [
        # the same word matches both; labkit puts the newer first, bm25 the shorter text
        ("lives", False, ["city_now", "city_then"], ["city_then", "city_now"]),
        ("a peanut?", False, [], []),
        ("a peanut?", True, [], ["allergy"]),  # only FTS5's porter stemmer finds it
        ('NOT now "quote" -later', False, ["quote", "city_now"], ["quote", "city_now"]),
    ],
    ids=["ranking", "no stemming", "porter stemming", "FTS5 syntax in a query is just words"],
)
def test_fts5_ranks_the_same_words_by_text_and_labkit_by_recency(query, stem, labkit, fts5):
    store = four_memories(ManualClock())
    assert [h.memory.id for h in store.recall("ana", query)][:2] == labkit
    assert FTS5Index(store.list("ana"), stem=stem).recall(query)[:2] == fts5


def test_recall_at_5_of_labkit_and_fts5_on_the_frozen_set():
    """Each figure is the mean of per-query recall, each hand-checkable from the ids found."""
    store, tenant, queries = load_memory_set()
    table = memory_recall_table(store, tenant, queries)
    expected = {q["id"]: set(q["expected"]) for q in queries}
    for name, value in table["recall"].items():
        per_query = [
            len(set(r["found"][name]) & expected[r["id"]]) / len(expected[r["id"]])
            for r in table["rows"]
        ]
        assert all(len(r["found"][name]) <= 5 for r in table["rows"])
        assert value == pytest.approx(sum(per_query) / len(queries))
    # both see the same keywords, so on 45 memories their top 5 hold the same memories
    assert table["recall"]["labkit"] == table["recall"]["fts5"] > 0.5
    assert table["recall"]["fts5 porter"] > table["recall"]["fts5"]
    synonym = next(r for r in table["rows"] if r["kind"] == "synonym")
    assert set(synonym["recall"].values()) == {0.0}  # no keyword index knows "hometown" = city


def test_synthetic_memories_are_seeded_and_zipf_like():
    texts, words = synthetic_memories(2000, seed=3)
    assert texts == synthetic_memories(2000, seed=3)[0] != synthetic_memories(2000, seed=4)[0]
    counts = [sum(text.split().count(w) for text in texts) for w in words[:3]]
    assert counts[0] > counts[1] > counts[2]  # the first words are the most frequent


def test_recall_cost_times_each_store_at_each_size():
    """A clock that moves one second per reading: each mean is one second over the queries."""
    ticks = iter(range(100))
    cost = recall_cost([50, 120], queries=4, clock=lambda: next(ticks))
    assert cost == {"sizes": [50, 120], "labkit": [0.25, 0.25], "fts5": [0.25, 0.25]}


# ---------------------------------------------------------------- 11_coding_agent: escape attempts


@pytest.mark.soak  # 11's strict nbval compares this table in make test; make test-all runs this too
def test_the_escape_lab_gets_out_off_and_says_what_the_fallback_lets_out():
    """11's table: with no sandbox every attempt gets out (so the table can show a difference);
    the rlimits fallback stops the key and the memory, not the files or the network."""
    from labkit.labs import coding

    assert all(coding.escape_attempts("off").values())
    fallback = coding.escape_attempts("rlimits")
    let_out = {"read a file outside", "write a file outside", "reach the network (127.0.0.1)"}
    assert {name for name, out in fallback.items() if out} == let_out


def test_the_escape_lab_contains_everything_in_bwrap():
    from labkit.labs import coding
    from labkit.sandbox import bwrap_available

    if not bwrap_available():
        pytest.skip("bubblewrap (bwrap) is not installed/usable")
    assert not any(coding.escape_attempts("bwrap").values())
