"""labkit.patterns: the ReAct protocol and its parser, plan-and-execute, on the loop's pieces."""

from itertools import count

import pytest

from labkit.errors import ModelBehaviorError
from labkit.labs import load_scenarios
from labkit.loop import run
from labkit.models import (
    ScriptedModel,
    call,
    check_pairing,
    incomplete,
    say,
)
from labkit.patterns import parse_plan, parse_react, plan_and_execute, run_react
from labkit.toolbox import calculate, get_weather, read_doc

SCENARIOS = load_scenarios()


def fake_clock():
    ticks = count()
    return lambda: next(ticks) * 0.5  # every reading is half a second later


# ---------------------------------------------------------------- ReAct


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'Thought: add\nAction: calculate\nAction Input: {"expression": "2+2"}',
            ("action", "calculate", '{"expression": "2+2"}'),
        ),
        (
            'I will check.\n\nThought: weather\nAction: get_weather\nAction Input: {"city": '
            '"Paris"}\nThat should do.',
            ("action", "get_weather", '{"city": "Paris"}'),
        ),
        (
            '```\nThought: x\nAction: get_weather\nAction Input: {"city": "Paris"}\n```',
            ("action", "get_weather", '{"city": "Paris"}'),
        ),
        (
            '```text\nTHOUGHT: x\nACTION: get_weather\nACTION INPUT: {"city": "Paris"}\n```',
            ("action", "get_weather", '{"city": "Paris"}'),
        ),
        (
            'thought: x\naction: `get_weather`\naction_input: {"city": "Paris"}',
            ("action", "get_weather", '{"city": "Paris"}'),
        ),
        (
            'Action: get_weather\nAction Input:\n{\n  "city": "Paris"\n}',
            ("action", "get_weather", '{\n  "city": "Paris"\n}'),
        ),
        ("Action: list_docs", ("action", "list_docs", "{}")),
        ("Action: list_docs\nAction Input: none", ("action", "list_docs", "none")),
        (
            'Action: calculate\nAction Input: {"expression": "1"\nThanks',
            ("action", "calculate", '{"expression": "1"\nThanks'),
        ),
        (
            'Action: calculate\nAction Input: {"expression": "1"}\nObservation: {"ok": true, '
            '"data": 1}\nFinish[1]',
            ("action", "calculate", '{"expression": "1"}'),
        ),
        ("Thought: done\nFinish[14 °C]", ("finish", "14 °C")),
        ("Finish[the list is [1, 2] and [3]]", ("finish", "the list is [1, 2] and [3]")),
        ("FINISH [It rains.]", ("finish", "It rains.")),
        ("So the answer:\nfinish[42]\nHope that helps!", ("finish", "42")),
        ("Final Answer: 42", ("finish", "42")),
        ("Finish[done]\nAction: calculate\nAction Input: {}", ("finish", "done")),
    ],
)
def test_parse_react_is_tolerant(text, expected):
    step = parse_react(text)
    got = (
        (step.kind, step.tool, step.arguments)
        if step.kind == "action"
        else (step.kind, step.answer)
    )
    assert got == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think it is 14 degrees.",
        "Thought: hmm",
        "Finish[]",
        "Finish[ ]",
        "Observation: Finish[42]",
        "Action Input: {}",
        "Actions: calculate",
    ],
)
def test_parse_react_refuses_what_it_cannot_read(text):
    with pytest.raises(ModelBehaviorError, match="Action: <tool>"):
        parse_react(text)


def test_run_react_end_to_end_with_one_unreadable_reply():
    model = ScriptedModel(
        [
            say('Thought: weather\nAction: get_weather\nAction Input: {"city": "Paris"}'),
            say("It is probably 14."),
            say("Thought: done\nFinish[14 °C in Paris]"),
        ]
    )
    result = run_react("Weather in Paris?", model, [get_weather])
    assert (
        result.status == "completed"
        and result.answer == "14 °C in Paris"
        and result.tool_calls == 1
    )
    assert (
        "get_weather(city: string)" in model.seen[0].messages[0].content
        and model.seen[0].tools == []
    )
    observation = model.seen[1].messages[-1]
    assert observation.role == "user" and observation.content.startswith('Observation: {"ok": true')
    assert model.seen[2].messages[-1].content.startswith("Observation: no Action")
    check_pairing(result.messages)


def test_run_react_stops_after_two_unreadable_replies_and_feeds_bad_arguments_back():
    result = run_react("x", ScriptedModel([say("hmm"), say("hmm again")]), [calculate])
    assert result.status == "parse_error"
    model = ScriptedModel([say('Action: calculate\nAction Input: {"expr": 1}'), say("Finish[?]")])
    result = run_react("x", model, [calculate])
    assert (
        '"error": "invalid_arguments"' in model.seen[1].messages[-1].content
        and result.tool_failures == 1
    )


def test_run_react_limits():
    step = say('Action: calculate\nAction Input: {"expression": "1"}')
    assert (
        run_react("x", ScriptedModel([step] * 3), [calculate], max_turns=2).status == "turn_limit"
    )
    assert (
        run_react("x", ScriptedModel([step] * 3), [calculate], max_calls=1).status == "tool_limit"
    )
    assert (
        run_react("x", ScriptedModel([incomplete("Thought:")]), [calculate]).status
        == "model_incomplete"
    )


# ---------------------------------------------------------------- plan-and-execute


def test_parse_plan():
    assert parse_plan("Plan:\n1. Check the weather.\n2) Read the doc.\n- Answer.") == [
        "Check the weather.",
        "Read the doc.",
        "Answer.",
    ]
    with pytest.raises(ModelBehaviorError, match="numbered"):
        parse_plan("I would check the weather.")
    with pytest.raises(ModelBehaviorError, match="limit is 2"):
        parse_plan("1. a\n2. b\n3. c", max_steps=2)


def test_plan_and_execute_runs_each_step_with_the_history_so_far():
    model = ScriptedModel(
        [
            say("1. Check the weather in London.\n2. Say what to pack."),
            call("get_weather", city="London"),
            say("London: overcast, 12 °C."),
            say("Pack a light jacket."),
        ]
    )
    result = plan_and_execute("What should I pack for London?", model, [get_weather, read_doc])
    assert (
        result.status == "completed"
        and result.answer == "Pack a light jacket."
        and result.turns == 4
    )
    assert result.completed == [
        "step 1: Check the weather in London. -> London: overcast, 12 °C.",
        "step 2: Say what to pack. -> Pack a light jacket.",
    ]
    last_prompt = model.seen[-1].messages
    assert any("overcast" in m.content for m in last_prompt)  # step 2 saw step 1's result
    assert "step 2 of 2 only: Say what to pack." in last_prompt[-1].content
    check_pairing(result.messages)
    assert [e.turn for e in result.trace.events if e.kind == "model"] == [1, 2, 3, 4]


def test_plan_and_execute_reports_the_steps_left_when_one_stops():
    model = ScriptedModel([say("1. Get the weather.\n2. Answer."), say("")])
    result = plan_and_execute("x", model, [get_weather])
    assert result.status == "empty_output"
    assert result.unfinished[:2] == ["step 1: Get the weather.", "step 2: Answer."]
    assert plan_and_execute("x", ScriptedModel([say("no plan")]), []).status == "parse_error"


class Unreachable:
    def respond(self, messages, tools=()):
        from labkit.errors import ServiceError

        raise ServiceError("connection failed: could not reach the server — is it running?")


@pytest.mark.parametrize("loop", [run_react, plan_and_execute, run])
def test_react_and_plan_and_execute_stop_with_service_error_like_run(loop):
    result = loop("2+2?", Unreachable(), [calculate])
    assert result.status == "service_error" and "connection failed" in result.next_step
    assert result.turns == 1
    check_pairing(result.messages)
