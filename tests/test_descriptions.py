"""02_tools Lab 7, measured: the frozen tool-call set's questions asked with three kinds of tool
description (labkit.labs.descriptions). Offline a scripted reader stands in for the model; the
recording of SmolLM2 (make descriptions-table) replays and is checked against the table's rules.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import connect
from labkit.cassettes import recorded
from labkit.labs import description_table, first_calls, load_tool_cases
from labkit.labs.descriptions import (
    CASSETTE,
    VARIANTS,
    described,
    load_written,
    questions,
    right_arguments,
    right_tool,
)
from labkit.models import ScriptedModel, ToolCall, call, say


def test_each_distinct_question_is_asked_once():
    cases = questions()
    keys = {(c["question"], tuple(d["name"] for d in c["functions"])) for c in cases}
    assert len(keys) == len(cases) == 34
    assert sum(len(c["ground_truth"]) == 1 for c in cases) == 20


def test_every_function_of_the_frozen_set_has_written_words_for_each_parameter():
    docs = {d["name"]: d for c in load_tool_cases() for d in c["functions"]}
    written = load_written()
    assert set(written) == set(docs)
    for name, doc in docs.items():
        assert written[name]["description"]
        assert set(written[name]["parameters"]) == set(doc["parameters"]["properties"])


def test_a_variant_changes_only_the_words_the_model_reads():
    doc = next(d for c in load_tool_cases() for d in c["functions"] if d["name"] == "get_weather")
    before = json.dumps(doc, sort_keys=True)
    written = load_written()
    for variant in VARIANTS:
        seen = described(doc, variant, written)
        assert seen["name"] == doc["name"]
        assert seen["parameters"]["required"] == doc["parameters"]["required"]
        for p, schema in doc["parameters"]["properties"].items():
            strip = {k: v for k, v in schema.items() if k != "description"}
            assert {k: v for k, v in seen["parameters"]["properties"][p].items()
                    if k != "description"} == strip  # fmt: skip
    assert described(doc, "bare", written)["description"] == ""
    assert "description" not in described(doc, "bare", written)["parameters"]["properties"]["city"]
    assert described(doc, "one line", written) == doc
    assert (
        "Berlin"
        in described(doc, "written", written)["parameters"]["properties"]["city"]["description"]
    )
    assert json.dumps(doc, sort_keys=True) == before  # the frozen doc is not changed


def strings(value):
    if isinstance(value, str):
        yield value.lower()
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_the_written_words_never_give_away_a_questions_answer():
    """An example value equal to what a question asks for would measure leaking, not describing
    (an enum's values are the doc's own: every variant shows them)."""
    cases = load_tool_cases()
    enums = {e for c in cases for d in c["functions"] for e in strings(
        [p.get("enum", []) for p in d["parameters"]["properties"].values()])}  # fmt: skip
    values = {v for c in cases for v in strings(c["ground_truth"]) if len(v) > 2} - enums
    words = json.dumps(load_written()).lower().replace('\\"', '"')
    assert not sorted(v for v in values if f'"{v}"' in words)
    assert '"berlin"' in words  # the check sees the examples it compares


def case(question, functions, truth):
    docs = {d["name"]: d for c in load_tool_cases() for d in c["functions"]}
    return {"question": question, "functions": [docs[f] for f in functions], "ground_truth": truth}


WEATHER = case("Weather in Oslo?", ["get_weather", "get_stock_price"],
               [{"get_weather": {"city": ["Oslo"], "unit": ["celsius", ""]}}])  # fmt: skip
NONE = case("Who wrote Hamlet?", ["get_weather"], [])


@pytest.mark.parametrize(
    "calls, right",
    [
        ([ToolCall("c1", "get_weather", '{"city": "Oslo"}')], True),
        ([ToolCall("c1", "get_weather", '{"city": "Rome"}')], True),  # the tool, not the values
        ([ToolCall("c1", "get_stock_price", '{"ticker": "OSLO"}')], False),
        ([ToolCall("c1", "get_stock_price", "{}"), ToolCall("c2", "get_weather", "{}")], False),
        ([], False),
    ],
)
def test_right_tool_is_the_first_calls_name(calls, right):
    assert right_tool(WEATHER, calls) is right


def test_no_call_is_the_right_tool_when_no_tool_fits():
    assert right_tool(NONE, []) is True
    assert right_tool(NONE, [ToolCall("c1", "get_weather", '{"city": "London"}')]) is False


@pytest.mark.parametrize(
    "arguments, right",
    [
        ('{"city": "Oslo"}', True),
        ('{"city": "oslo", "unit": "celsius"}', True),  # BFCL standardises case
        ('{"city": "Rome"}', False),
        ('{"city": "Oslo", "unit": "kelvin"}', False),
        ('{"city": "Oslo", "country": "NO"}', False),
        ('{"city": ', False),  # not JSON: the model's fault, a miss
        ("{}", False),
    ],
)
def test_right_arguments_is_the_bfcl_match_of_the_forced_call(arguments, right):
    assert right_arguments(WEATHER, [ToolCall("c1", "get_weather", arguments)]) is right
    assert right_arguments(WEATHER, []) is False


def reader(messages, tools):
    """A scripted reader: it calls a tool only when the tools are described, and fills the
    arguments from the parameter descriptions' first quoted example."""
    spec = tools[0]
    if not spec.description:
        return say("I cannot tell which tool this needs.")
    arguments = {}
    for name in spec.parameters.get("required", []):
        text = spec.parameters["properties"][name].get("description", "")
        arguments[name] = text.split('"')[1] if text.count('"') >= 2 else "?"
    return call(spec.name, **arguments)


class Reader:
    """One scripted reply per request, reacting to the tools it is shown; it records each
    tool_choice asked for (a script may refuse to obey: enforce_tool_choice=False)."""

    def __init__(self):
        self.choices = []

    def respond(self, messages, tools=(), max_output_tokens=None, tool_choice="auto"):
        self.choices.append(tool_choice)
        model = ScriptedModel([reader], enforce_tool_choice=False)
        return model.respond(messages, tools, tool_choice=tool_choice)


def test_the_table_asks_every_question_per_variant_auto_then_forced_by_name():
    model = Reader()
    report = description_table(model)
    assert [(r.policy, r.variant) for r in report.rows] == [
        (p, v) for p in ("auto", "by name") for v in VARIANTS
    ]
    assert model.choices[: 3 * 34] == ["auto"] * 102
    forced = model.choices[102:]
    assert len(forced) == 3 * 20
    cases = questions()
    single = [c for c in cases if len(c["ground_truth"]) == 1]
    assert forced[:20] == [next(iter(c["ground_truth"][0])) for c in single]
    bare, one_line, written = report.rows[:3]
    irrelevant = sum(not c["ground_truth"] for c in cases)
    assert sum(bare.scores) == irrelevant  # undescribed, the reader never calls: right only there
    assert sum(not c for c in bare.calls) == 34
    assert sum(one_line.scores) == sum(
        right_tool(c, calls) for c, calls in zip(one_line.cases, one_line.calls, strict=True)
    )
    text = repr(report)
    assert f"auto     bare      right tool       {irrelevant:>2}/34" in text
    assert "auto, written vs bare: 34 cases" in text
    assert "by name, one line vs bare: 20 cases" in text


def test_first_calls_names_each_question_and_what_the_model_sent():
    report = description_table(Reader())
    lines = first_calls(report, "auto", "bare")
    assert len(lines) == 34 and all(line.endswith("-> no call") for line in lines)
    lines = first_calls(report, "by name", "written")
    assert (
        lines[0].startswith("What is the area of a triangle")
        and "calculate_triangle_area(" in lines[0]
    )


def test_a_service_failure_is_a_miss_not_a_crash():
    from labkit.errors import ServiceError

    class Down:
        def respond(self, messages, tools=(), max_output_tokens=None, tool_choice="auto"):
            raise ServiceError("the server is down")

    report = description_table(Down())
    assert all(not any(r.scores) for r in report.rows if r.policy == "by name")
    assert all(all(c is None for c in r.calls) for r in report.rows)


# ---------------------------------------------------------------- the recording of SmolLM2


@pytest.fixture(scope="module")
def recorded_table():
    model = connect(mode="replay", cassette=CASSETTE)
    return description_table(model), model


def test_the_recording_is_labelled_as_the_local_model():
    header = recorded(CASSETTE).header
    assert (header["model"], header["provider"]) == ("SmolLM2-135M-Instruct", "local")


def test_the_table_replays_every_recorded_reply_and_no_more(recorded_table):
    report, model = recorded_table
    assert sum(len(r.cases) for r in report.rows) == len(recorded(CASSETTE).entries) == 162
    assert all(calls is not None for r in report.rows for calls in r.calls)  # no service error


def test_forced_by_name_every_reply_called_the_named_tool(recorded_table):
    """llama.cpp enforces a named tool_choice: each forced reply is a call of that tool."""
    report, _ = recorded_table
    for row in (r for r in report.rows if r.policy == "by name"):
        for case, calls in zip(row.cases, row.calls, strict=True):
            assert calls and calls[0].name == next(iter(case["ground_truth"][0]))


def test_what_02_says_of_the_recording_holds(recorded_table):
    """02_tools' prose reads these off the recording: re-recorded, they must be read again."""
    report, _ = recorded_table
    auto = [r for r in report.rows if r.policy == "auto"]
    assert all(not calls for r in auto for calls in r.calls)  # "called no tool" under auto
    assert [sum(r.scores) for r in auto] == [7, 7, 7]  # the 7 questions no tool answers
    forced = {r.variant: r for r in report.rows if r.policy == "by name"}
    assert [sum(forced[v].scores) for v in VARIANTS] == [5, 8, 6]
    said = {v: dict(zip((c["question"] for c in forced[v].cases), forced[v].calls, strict=True))
            for v in VARIANTS}  # fmt: skip
    apple = "What is Apple's stock price?"
    assert json.loads(said["written"][apple][0].arguments) == {"ticker": "AAPL"}
    fahrenheit = "What's the temperature in Paris in Fahrenheit?"
    assert json.loads(said["written"][fahrenheit][0].arguments)["unit"] == "celsius"
    assert json.loads(said["one line"][fahrenheit][0].arguments)["unit"] == "fahrenheit"


def test_the_command_line_prints_the_table_offline_from_the_recording():
    env = {**os.environ, "LABKIT_MODE": "offline", "LABKIT_ENV_FILE": "none"}
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "evals", "descriptions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("replay: replaying a recording of SmolLM2-135M-Instruct")
    assert lines[1].split() == ["policy", "variant", "measure", "score", "no", "call"]
    assert len(lines) == 2 + 6 + 4 and "sk-" not in done.stdout
