"""labkit.loop: the loop's stop reasons, paired history, the guard seam, the report it returns."""

import json
from itertools import count

import pytest

import labkit
from labkit.errors import ServiceError, UserError
from labkit.labs import load_scenarios
from labkit.loop import Decision, Guard, run
from labkit.models import (
    Message,
    ScriptedModel,
    ToolCall,
    call,
    check_pairing,
    say,
    turn,
    user,
)
from labkit.toolbox import calculate, get_weather
from labkit.tools import tool

SCENARIOS = load_scenarios()


def fake_clock():
    ticks = count()
    return lambda: next(ticks) * 0.5  # every reading is half a second later


# ---------------------------------------------------------------- what the loop does, step by step


def test_bad_arguments_go_back_to_the_model_and_it_sees_them():
    model = ScriptedModel(
        [call("calculate", expression=2), call("calculate", expression="2"), say("2")]
    )
    result = run("2?", model, [calculate])
    shown = json.loads(model.seen[1].messages[-1].content)
    assert (
        shown["ok"] is False
        and shown["error"] == "invalid_arguments"
        and "should be string" in shown["message"]
    )
    assert (
        result.status == "completed"
        and result.tool_failures == 1
        and result.completed == ['calculate({"expression": "2"})']
    )


def test_a_crashing_tool_does_not_end_the_run_but_a_permission_error_does():
    @tool
    def delete_everything(confirm: bool) -> str:
        """Delete all files."""
        raise PermissionError("deleting needs the user's approval")

    @tool
    def buggy(x: int) -> int:
        """Has a bug."""
        return 1 // 0

    model = ScriptedModel(
        [
            call("buggy", x=1),
            turn(call("delete_everything", confirm=True), call("buggy", x=2)),
            say("never reached"),
        ]
    )
    result = run("clean up", model, [buggy, delete_everything])
    assert result.status == "permission_denied" and result.turns == 2
    assert "approval" in result.trace.events[-1].summary and model.unused() == [
        "say('never reached')"
    ]
    check_pairing(result.messages)  # buggy(x=2) was answered "not_run"
    assert json.loads(result.messages[-1].content)["error"] == "not_run"
    assert result.unfinished[0] == 'not run: buggy({"x": 2})'


def test_history_is_kept_in_front_of_the_task_and_must_be_paired():
    earlier = [user("My name is Ada."), Message("assistant", "Hello Ada.")]
    model = ScriptedModel([say("Your name is Ada.")])
    result = run("What is my name?", model, [], history=earlier, system="Be brief.")
    assert [m.content for m in model.seen[0].messages] == [
        "Be brief.",
        "My name is Ada.",
        "Hello Ada.",
        "What is my name?",
    ]
    assert result.answer == "Your name is Ada."
    broken = [Message("assistant", "", [ToolCall("call_9", "calculate", "{}")])]
    with pytest.raises(UserError, match="no output"):
        run("x", ScriptedModel([say("y")]), [], history=broken)


def test_service_errors_stop_the_run_with_the_trace_kept():
    class Down:
        def respond(self, messages, tools):
            raise ServiceError(
                "429 rate limited: too many requests — wait a minute and run the cell again", 429
            )

    result = run("hi", Down(), [])
    assert (
        result.status == "service_error"
        and "wait a minute" in result.next_step
        and result.turns == 1
    )


def test_elapsed_comes_from_the_clock_passed_in():
    result = run("hi", ScriptedModel([say("hello")]), [], clock=fake_clock())
    assert result.elapsed == 1.5 and result.trace.events[0].elapsed == 0.5


def test_a_running_result_holds_no_start_time():
    class Watch(Guard):
        seen = []

        def before_model(self, run):
            self.seen.append(run.elapsed)

    ticks = count(100)  # a clock far from 0: a start time would show
    result = run(
        "hi",
        ScriptedModel([call("calculate", expression="1+1"), say("2")]),
        [calculate],
        guard=Watch(),
        clock=lambda: float(next(ticks)),
    )
    assert Watch.seen == [0.0, 0.0] and result.elapsed > 0


def test_a_scripted_model_that_runs_out_fails_loudly():
    with pytest.raises(UserError, match="no step 2"):
        run("x", ScriptedModel([call("calculate", expression="1")]), [calculate])


def test_tool_limit_counts_calls_across_turns():
    model = ScriptedModel(
        [call("calculate", expression="1"), call("calculate", expression="2"), say("3")]
    )
    assert run("x", model, [calculate], max_calls=2).status == "completed"
    model = ScriptedModel([call("calculate", expression="1"), call("calculate", expression="2")])
    result = run("x", model, [calculate], max_calls=1)
    assert result.status == "tool_limit" and result.tool_calls == 1 and result.turns == 2
    check_pairing(result.messages)


def test_an_incomplete_reply_with_a_call_never_runs_the_call():
    ran = []

    @tool
    def record(x: str) -> str:
        """Record x."""
        ran.append(x)
        return x

    cut = ScriptedModel(
        [
            lambda messages, tools: labkit.models.Step(
                calls=(("record", '{"x": "a"}'),),
                status="incomplete",
                incomplete_reason="max_output_tokens",
            )
        ]
    )
    result = run("x", cut, [record])
    assert (
        result.status == "model_incomplete"
        and ran == []
        and result.unfinished[0].startswith("not run: record")
    )
    check_pairing(result.messages)


def test_max_turns_zero_never_calls_the_model():
    model = ScriptedModel([say("x")])
    assert run("x", model, [], max_turns=0).status == "turn_limit" and model.seen == []


# ---------------------------------------------------------------- the guard seam (used by
# 05_guardrails)


class Recorder(Guard):
    def __init__(self, decisions):
        self.decisions = decisions  # where -> Decision

    def before_model(self, run):
        return self.decisions.get(("model", run.turns))

    def before_tool(self, run, call, tool):
        return self.decisions.get(("tool", call.name, tool.risk if tool else None))

    def after_tool(self, run, call, result):
        if result.get("ok"):
            return {"ok": True, "data": {"untrusted": result["data"]}}
        return result


def test_guard_can_refuse_a_tool_stop_the_run_and_wrap_results():
    guard = Recorder(
        {
            ("tool", "calculate", "low"): Decision("refuse", "not_approved", "ask the user first"),
            ("model", 1): Decision("stop", "budget_exhausted", "token budget of 100 reached"),
        }
    )
    model = ScriptedModel(
        [turn(call("calculate", expression="1"), call("get_weather", city="Paris")), say("x")]
    )
    result = run("x", model, [calculate, get_weather], guard=guard)
    assert (
        result.status == "budget_exhausted" and result.turns == 1 and model.unused() == ["say('x')"]
    )
    refused, wrapped = (json.loads(m.content) for m in result.messages[-2:])
    assert refused == {"ok": False, "error": "not_approved", "message": "ask the user first"}
    assert wrapped["data"]["untrusted"]["city"] == "Paris"
    kinds = [e.kind for e in result.trace.events]
    assert kinds == ["model", "guard", "tool", "guard", "tool", "guard", "stop"]
    assert (
        result.trace.events[1].summary == "before calculate: refuse not_approved ask the user first"
    )
    assert result.next_step == "token budget of 100 reached"


def test_guard_stop_before_a_tool_answers_it_not_run():
    guard = Recorder(
        {("tool", "calculate", "low"): Decision("stop", "repeated_action", "same call twice")}
    )
    result = run("x", ScriptedModel([call("calculate", expression="1")]), [calculate], guard=guard)
    assert result.status == "repeated_action" and result.tool_calls == 0
    check_pairing(result.messages)
    assert json.loads(result.messages[-1].content)["error"] == "not_run"


def test_guard_stop_with_permission_denied_before_the_tool_runs():
    guard = Recorder(
        {("tool", "calculate", "low"): Decision("stop", "permission_denied", "user said no")}
    )
    result = run("x", ScriptedModel([call("calculate", expression="1")]), [calculate], guard=guard)
    assert result.status == "permission_denied"
    check_pairing(result.messages)


@pytest.mark.parametrize(
    "decision, needle",
    [
        (Decision("maybe"), "action"),
        (Decision("refuse", "x", "no"), "allow or stop"),
        (Decision("stop", "tired"), "stop reason"),
    ],
)
def test_guard_mistakes_are_the_callers_fault(decision, needle):
    with pytest.raises(UserError, match=needle):
        run("x", ScriptedModel([say("y")]), [], guard=Recorder({("model", 0): decision}))


def test_allow_decisions_are_recorded_too():
    result = run(
        "x",
        ScriptedModel([say("y")]),
        [],
        guard=Recorder({("model", 0): Decision("allow", "", "ok")}),
    )
    assert (
        result.status == "completed" and result.trace.events[0].summary == "before model: allow ok"
    )


def test_run_result_prints_a_deterministic_report():
    text = repr(run("x", ScriptedModel([say("done")]), [], clock=fake_clock()))
    assert text.splitlines()[0] == "status:     completed" and "ms" not in text and "0x" not in text


def test_a_finished_runs_messages_can_be_passed_on_as_history():
    first = run("2+3?", ScriptedModel([call("calculate", expression="2+3"), say("5")]), [calculate])
    second = run("And doubled?", ScriptedModel([say("10")]), [calculate], history=first.messages)
    assert [m.role for m in second.messages].count("system") == 1
    assert second.messages[1 : len(first.messages)] == first.messages[1:]


# ---------------------------------------------------------------- a tool_choice policy per turn

WEATHER_THEN_ANSWER = [call("get_weather", city="Paris"), say("14 °C in Paris.")]


def asked(policy, steps=WEATHER_THEN_ANSWER, **options):
    """The run, and the tool_choice the model was asked for on each turn."""
    model = ScriptedModel(steps)
    result = run(
        "Weather in Paris?", model, [get_weather, calculate], tool_choice=policy, **options
    )
    return result, [s.tool_choice for s in model.seen]


@pytest.mark.parametrize(
    "policy, choices",
    [
        ("auto", ["auto", "auto"]),
        ("required-first", ["required", "auto"]),
        ("required", ["required", "auto"]),  # forcing ends with the first tool result
        ("get_weather", ["get_weather", "auto"]),
        (lambda turn: "get_weather" if turn == 1 else "none", ["get_weather", "none"]),
    ],
)
def test_a_policy_gives_each_turn_its_tool_choice(policy, choices):
    result, seen = asked(policy)
    assert result.status == "completed" and seen == choices


def test_none_holds_on_every_turn():
    assert asked("none", [say("I cannot look that up.")])[1] == ["none"]


def test_a_forced_call_after_a_tool_result_takes_a_function_and_max_turns_still_binds():
    steps = [call("get_weather", city=city) for city in ("Paris", "Rome", "Oslo")]
    result, seen = asked(lambda turn: "required", steps, max_turns=3)
    assert seen == ["required"] * 3  # the function said so, turn by turn
    assert result.status == "turn_limit" and result.tool_calls == 3


def test_the_trace_says_which_turns_were_told_what():
    result, _ = asked("required-first")
    model_events = [e for e in result.trace.events if e.kind == "model"]
    assert [e.detail.get("tool_choice") for e in model_events] == ["required", None]
    first, second = result.trace.lines()[0], result.trace.lines()[2]
    assert "(tool_choice required)" in first and "tool_choice" not in second  # read, not parsed


def test_a_streamed_run_is_forced_the_same_way():
    result, seen = asked("required-first", stream=True)
    assert result.status == "completed" and seen == ["required", "auto"]


@pytest.mark.parametrize(
    "policy, words",
    [
        ("always", '\'always\' is not a policy for a run — use "auto", "none", "required"'),
        ("get_time", "an offered tool's name (get_weather, calculate)"),
        (None, "None is not a policy"),
    ],
)
def test_a_bad_policy_says_what_is_allowed_before_any_model_call(policy, words):
    model = ScriptedModel(WEATHER_THEN_ANSWER)
    with pytest.raises(UserError) as caught:
        run("Weather?", model, [get_weather, calculate], tool_choice=policy)
    assert words in str(caught.value) and model.seen == []


def test_forcing_a_run_without_tools_is_refused():
    with pytest.raises(UserError, match="forcing a call needs tools, and this run has none"):
        run("hi", ScriptedModel([say("hi")]), [], tool_choice="required-first")


def test_a_policy_function_returning_a_bad_choice_names_the_turn():
    with pytest.raises(UserError, match="the tool_choice function, for turn 2: tool_choice 'yes'"):
        asked(lambda turn: "required" if turn == 1 else "yes")


def test_a_model_of_your_own_without_tool_choice_still_runs_on_auto():
    class Parrot:  # written before tool_choice existed: respond(messages, tools) only
        def respond(self, messages, tools):
            return labkit.Reply(f"you said {messages[-1].content}")

    assert run("hi", Parrot(), [get_weather]).answer == "you said hi"


def test_a_stream_asked_of_a_model_that_cannot_stream_is_a_user_error():
    class Whole:  # a Model, not a StreamingModel
        def respond(self, messages, tools=()):
            raise AssertionError("never asked: the run cannot stream it")

    with pytest.raises(UserError, match="Whole cannot stream"):
        run("x", Whole(), [], stream=True)


def test_start_is_step_1_the_history_a_run_begins_with():
    finished = run("2 + 2?", ScriptedModel([say("4")]), [])
    began = labkit.loop.start("And 3 + 3?", "Be brief.", finished.messages)
    assert [m.role for m in began.messages] == ["system", "user", "assistant", "user"]
    assert began.messages[0].content == "Be brief." and began.task == "And 3 + 3?"
