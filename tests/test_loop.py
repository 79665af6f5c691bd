"""labkit.loop: the loop's stop reasons, paired history, guard seam, ReAct, plan-and-execute, scenarios."""
import json
from itertools import count

import pytest

import labkit
from labkit.errors import ModelBehaviorError, ServiceError, UserError
from labkit.loop import (STOP_REASONS, Decision, Guard, evaluate, load_scenarios, next_action,
                         parse_plan, parse_react, plan_and_execute, run, run_react, run_scenario)
from labkit.live import ResponsesModel
from labkit.models import (Message, ScriptedModel, ToolCall, call, check_pairing, incomplete, say,
                           turn, user)
from labkit.tools import calculate, get_weather, read_doc, tool

SCENARIOS = load_scenarios()


def fake_clock():
    ticks = count()
    return lambda: next(ticks) * 0.5         # every reading is half a second later


# ---------------------------------------------------------------- the frozen scenarios

@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_ends_as_expected_with_its_expected_trace(scenario):
    result = run_scenario(scenario)
    assert result.status == scenario.expect_status and result.status in STOP_REASONS
    assert result.trace.lines() == scenario.trace
    check_pairing(result.messages)                      # what a live adapter would insist on
    ResponsesModel("gpt-test", api_key="sk-test-" + "0" * 24).request_preview(result.messages)
    assert (result.answer != "") == (result.status == "completed")
    assert result.next_step and (result.unfinished == []) == (result.status == "completed")


def test_the_scenario_set_covers_the_issue_and_scores():
    names = {s.name for s in SCENARIOS}
    assert {"weather_fahrenheit", "missing_doc", "turn_limit", "tool_raises", "empty_reply",
            "incomplete_reply"} <= names
    summary = evaluate(SCENARIOS).summary()
    assert summary == {"scenarios": 10, "success_rate": 0.6, "mean_turns": 2.3,
                       "tool_failure_rate": 5 / 18, "tokens": summary["tokens"]}
    assert summary["tokens"] > 0


def test_live_evaluation_uses_the_given_model_not_the_script():
    seen = []

    def model_for(scenario):
        seen.append(scenario.name)
        return ScriptedModel([say("I cannot help with that.")] * 3)

    report = evaluate(SCENARIOS[:2], model_for)
    assert seen == ["weather_fahrenheit", "missing_doc"]
    assert [ok for *_, ok in report.rows] == [False, False]


# ---------------------------------------------------------------- what the loop does, step by step

def test_bad_arguments_go_back_to_the_model_and_it_sees_them():
    model = ScriptedModel([call("calculate", expression=2), call("calculate", expression="2"), say("2")])
    result = run("2?", model, [calculate])
    shown = json.loads(model.seen[1].messages[-1].content)
    assert shown["ok"] is False and shown["error"] == "invalid_arguments" and "should be string" in shown["message"]
    assert result.status == "completed" and result.tool_failures == 1 and result.completed == [
        'calculate({"expression": "2"})']


def test_a_crashing_tool_does_not_end_the_run_but_a_permission_error_does():
    @tool
    def delete_everything(confirm: bool) -> str:
        """Delete all files."""
        raise PermissionError("deleting needs the user's approval")

    @tool
    def buggy(x: int) -> int:
        """Has a bug."""
        return 1 // 0

    model = ScriptedModel([call("buggy", x=1), turn(call("delete_everything", confirm=True), call("buggy", x=2)),
                           say("never reached")])
    result = run("clean up", model, [buggy, delete_everything])
    assert result.status == "permission_denied" and result.turns == 2
    assert "approval" in result.trace.events[-1].summary and model.unused() == ["say('never reached')"]
    check_pairing(result.messages)                      # buggy(x=2) was answered "not_run"
    assert json.loads(result.messages[-1].content)["error"] == "not_run"
    assert result.unfinished[0] == 'not run: buggy({"x": 2})'


def test_history_is_kept_in_front_of_the_task_and_must_be_paired():
    earlier = [user("My name is Ada."), Message("assistant", "Hello Ada.")]
    model = ScriptedModel([say("Your name is Ada.")])
    result = run("What is my name?", model, [], history=earlier, system="Be brief.")
    assert [m.content for m in model.seen[0].messages] == ["Be brief.", "My name is Ada.", "Hello Ada.",
                                                          "What is my name?"]
    assert result.answer == "Your name is Ada."
    broken = [Message("assistant", "", [ToolCall("call_9", "calculate", "{}")])]
    with pytest.raises(UserError, match="no output"):
        run("x", ScriptedModel([say("y")]), [], history=broken)


def test_service_errors_stop_the_run_with_the_trace_kept():
    class Down:
        def respond(self, messages, tools):
            raise ServiceError("429 rate limited: too many requests — wait a minute and run the cell again", 429)

    result = run("hi", Down(), [])
    assert result.status == "service_error" and "wait a minute" in result.next_step and result.turns == 1


def test_elapsed_comes_from_the_clock_passed_in():
    result = run("hi", ScriptedModel([say("hello")]), [], clock=fake_clock())
    assert result.elapsed == 1.5 and result.trace.events[0].elapsed == 0.5


def test_a_scripted_model_that_runs_out_fails_loudly():
    with pytest.raises(UserError, match="no step 2"):
        run("x", ScriptedModel([call("calculate", expression="1")]), [calculate])


def test_tool_limit_counts_calls_across_turns():
    model = ScriptedModel([call("calculate", expression="1"), call("calculate", expression="2"), say("3")])
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

    cut = ScriptedModel([lambda messages, tools: labkit.models.Step(calls=(("record", '{"x": "a"}'),),
                                                                     status="incomplete",
                                                                     incomplete_reason="max_output_tokens")])
    result = run("x", cut, [record])
    assert result.status == "model_incomplete" and ran == [] and result.unfinished[0].startswith("not run: record")
    check_pairing(result.messages)


def test_max_turns_zero_never_calls_the_model():
    model = ScriptedModel([say("x")])
    assert run("x", model, [], max_turns=0).status == "turn_limit" and model.seen == []


# ---------------------------------------------------------------- the guard seam (used by 05_guardrails)

class Recorder(Guard):
    def __init__(self, decisions):
        self.decisions = decisions          # where -> Decision

    def before_model(self, run):
        return self.decisions.get(("model", run.turns))

    def before_tool(self, run, call, tool):
        return self.decisions.get(("tool", call.name, tool.risk if tool else None))

    def after_tool(self, run, call, result):
        if result.get("ok"):
            return {"ok": True, "data": {"untrusted": result["data"]}}
        return result


def test_guard_can_refuse_a_tool_stop_the_run_and_wrap_results():
    guard = Recorder({("tool", "calculate", "low"): Decision("refuse", "not_approved", "ask the user first"),
                      ("model", 1): Decision("stop", "budget_exhausted", "token budget of 100 reached")})
    model = ScriptedModel([turn(call("calculate", expression="1"), call("get_weather", city="Paris")), say("x")])
    result = run("x", model, [calculate, get_weather], guard=guard)
    assert result.status == "budget_exhausted" and result.turns == 1 and model.unused() == ["say('x')"]
    refused, wrapped = (json.loads(m.content) for m in result.messages[-2:])
    assert refused == {"ok": False, "error": "not_approved", "message": "ask the user first"}
    assert wrapped["data"]["untrusted"]["city"] == "Paris"
    kinds = [e.kind for e in result.trace.events]
    assert kinds == ["model", "guard", "tool", "guard", "tool", "guard", "stop"]
    assert result.trace.events[1].summary == "before calculate: refuse not_approved ask the user first"
    assert result.next_step == "token budget of 100 reached"


def test_guard_stop_before_a_tool_answers_it_not_run():
    guard = Recorder({("tool", "calculate", "low"): Decision("stop", "repeated_action", "same call twice")})
    result = run("x", ScriptedModel([call("calculate", expression="1")]), [calculate], guard=guard)
    assert result.status == "repeated_action" and result.tool_calls == 0
    check_pairing(result.messages)
    assert json.loads(result.messages[-1].content)["error"] == "not_run"


def test_guard_stop_with_permission_denied_before_the_tool_runs():
    guard = Recorder({("tool", "calculate", "low"): Decision("stop", "permission_denied", "user said no")})
    result = run("x", ScriptedModel([call("calculate", expression="1")]), [calculate], guard=guard)
    assert result.status == "permission_denied"
    check_pairing(result.messages)


@pytest.mark.parametrize("decision, needle", [(Decision("maybe"), "action"),
                                               (Decision("refuse", "x", "no"), "allow or stop"),
                                               (Decision("stop", "tired"), "stop reason")])
def test_guard_mistakes_are_the_callers_fault(decision, needle):
    with pytest.raises(UserError, match=needle):
        run("x", ScriptedModel([say("y")]), [], guard=Recorder({("model", 0): decision}))


def test_allow_decisions_are_recorded_too():
    result = run("x", ScriptedModel([say("y")]), [], guard=Recorder({("model", 0): Decision("allow", "", "ok")}))
    assert result.status == "completed" and result.trace.events[0].summary == "before model: allow ok"


# ---------------------------------------------------------------- ReAct

@pytest.mark.parametrize("text, expected", [
    ('Thought: add\nAction: calculate\nAction Input: {"expression": "2+2"}', ("action", "calculate", '{"expression": "2+2"}')),
    ('I will check.\n\nThought: weather\nAction: get_weather\nAction Input: {"city": "Paris"}\nThat should do.',
     ("action", "get_weather", '{"city": "Paris"}')),
    ('```\nThought: x\nAction: get_weather\nAction Input: {"city": "Paris"}\n```', ("action", "get_weather", '{"city": "Paris"}')),
    ('```text\nTHOUGHT: x\nACTION: get_weather\nACTION INPUT: {"city": "Paris"}\n```', ("action", "get_weather", '{"city": "Paris"}')),
    ('thought: x\naction: `get_weather`\naction_input: {"city": "Paris"}', ("action", "get_weather", '{"city": "Paris"}')),
    ('Action: get_weather\nAction Input:\n{\n  "city": "Paris"\n}', ("action", "get_weather", '{\n  "city": "Paris"\n}')),
    ("Action: list_docs", ("action", "list_docs", "{}")),
    ("Action: list_docs\nAction Input: none", ("action", "list_docs", "none")),
    ('Action: calculate\nAction Input: {"expression": "1"\nThanks', ("action", "calculate", '{"expression": "1"\nThanks')),
    ('Action: calculate\nAction Input: {"expression": "1"}\nObservation: {"ok": true, "data": 1}\nFinish[1]',
     ("action", "calculate", '{"expression": "1"}')),
    ("Thought: done\nFinish[14 °C]", ("finish", "14 °C")),
    ("Finish[the list is [1, 2] and [3]]", ("finish", "the list is [1, 2] and [3]")),
    ("FINISH [It rains.]", ("finish", "It rains.")),
    ("So the answer:\nfinish[42]\nHope that helps!", ("finish", "42")),
    ("Final Answer: 42", ("finish", "42")),
    ('Finish[done]\nAction: calculate\nAction Input: {}', ("finish", "done")),
])
def test_parse_react_is_tolerant(text, expected):
    step = parse_react(text)
    got = (step.kind, step.tool, step.arguments) if step.kind == "action" else (step.kind, step.answer)
    assert got == expected


@pytest.mark.parametrize("text", ["", "I think it is 14 degrees.", "Thought: hmm", "Finish[]", "Finish[ ]",
                                  "Observation: Finish[42]", "Action Input: {}", "Actions: calculate"])
def test_parse_react_refuses_what_it_cannot_read(text):
    with pytest.raises(ModelBehaviorError, match="Action: <tool>"):
        parse_react(text)


def test_run_react_end_to_end_with_one_unreadable_reply():
    model = ScriptedModel([say('Thought: weather\nAction: get_weather\nAction Input: {"city": "Paris"}'),
                           say("It is probably 14."), say("Thought: done\nFinish[14 °C in Paris]")])
    result = run_react("Weather in Paris?", model, [get_weather])
    assert result.status == "completed" and result.answer == "14 °C in Paris" and result.tool_calls == 1
    assert "get_weather(city: string)" in model.seen[0].messages[0].content and model.seen[0].tools == []
    observation = model.seen[1].messages[-1]
    assert observation.role == "user" and observation.content.startswith('Observation: {"ok": true')
    assert model.seen[2].messages[-1].content.startswith("Observation: no Action")
    check_pairing(result.messages)


def test_run_react_stops_after_two_unreadable_replies_and_feeds_bad_arguments_back():
    result = run_react("x", ScriptedModel([say("hmm"), say("hmm again")]), [calculate])
    assert result.status == "parse_error"
    model = ScriptedModel([say("Action: calculate\nAction Input: {\"expr\": 1}"), say("Finish[?]")])
    result = run_react("x", model, [calculate])
    assert '"error": "invalid_arguments"' in model.seen[1].messages[-1].content and result.tool_failures == 1


def test_run_react_limits():
    step = say('Action: calculate\nAction Input: {"expression": "1"}')
    assert run_react("x", ScriptedModel([step] * 3), [calculate], max_turns=2).status == "turn_limit"
    assert run_react("x", ScriptedModel([step] * 3), [calculate], max_calls=1).status == "tool_limit"
    assert run_react("x", ScriptedModel([incomplete("Thought:")]), [calculate]).status == "model_incomplete"


# ---------------------------------------------------------------- plan-and-execute

def test_parse_plan():
    assert parse_plan("Plan:\n1. Check the weather.\n2) Read the doc.\n- Answer.") == [
        "Check the weather.", "Read the doc.", "Answer."]
    with pytest.raises(ModelBehaviorError, match="numbered"):
        parse_plan("I would check the weather.")
    with pytest.raises(ModelBehaviorError, match="limit is 2"):
        parse_plan("1. a\n2. b\n3. c", max_steps=2)


def test_plan_and_execute_runs_each_step_with_the_history_so_far():
    model = ScriptedModel([say("1. Check the weather in London.\n2. Say what to pack."),
                           call("get_weather", city="London"), say("London: overcast, 12 °C."),
                           say("Pack a light jacket.")])
    result = plan_and_execute("What should I pack for London?", model, [get_weather, read_doc])
    assert result.status == "completed" and result.answer == "Pack a light jacket." and result.turns == 4
    assert result.completed == ["step 1: Check the weather in London. -> London: overcast, 12 °C.",
                                "step 2: Say what to pack. -> Pack a light jacket."]
    last_prompt = model.seen[-1].messages
    assert any("overcast" in m.content for m in last_prompt)         # step 2 saw step 1's result
    assert "step 2 of 2 only: Say what to pack." in last_prompt[-1].content
    check_pairing(result.messages)
    assert [e.turn for e in result.trace.events if e.kind == "model"] == [1, 2, 3, 4]


def test_plan_and_execute_reports_the_steps_left_when_one_stops():
    model = ScriptedModel([say("1. Get the weather.\n2. Answer."), say("")])
    result = plan_and_execute("x", model, [get_weather])
    assert result.status == "empty_output"
    assert result.unfinished[:2] == ["step 1: Get the weather.", "step 2: Answer."]
    assert plan_and_execute("x", ScriptedModel([say("no plan")]), []).status == "parse_error"


# ---------------------------------------------------------------- the hands-on task and the repr

def test_task_reference_passes_its_own_cases():
    assert labkit.check(next_action, "04_loop", quiet=True)


def test_task_catches_running_calls_from_a_cut_short_reply():
    def naive(reply):
        return "run_tools" if reply.tool_calls else ("completed" if reply.text.strip() else "empty_output")
    assert not labkit.check(naive, "04_loop", quiet=True)


def test_run_result_prints_a_deterministic_report():
    text = repr(run("x", ScriptedModel([say("done")]), [], clock=fake_clock()))
    assert text.splitlines()[0] == "status:     completed" and "ms" not in text and "0x" not in text


def test_a_finished_runs_messages_can_be_passed_on_as_history():
    first = run("2+3?", ScriptedModel([call("calculate", expression="2+3"), say("5")]), [calculate])
    second = run("And doubled?", ScriptedModel([say("10")]), [calculate], history=first.messages)
    assert [m.role for m in second.messages].count("system") == 1
    assert second.messages[1:len(first.messages)] == first.messages[1:]


class Unreachable:
    def respond(self, messages, tools=()):
        from labkit.errors import ServiceError
        raise ServiceError("connection failed: could not reach the server — is it running?")


def test_react_and_plan_and_execute_stop_with_service_error_like_run():
    for result in (run_react("2+2?", Unreachable(), [calculate]), plan_and_execute("2+2?", Unreachable(), [calculate]),
                   run("2+2?", Unreachable(), [calculate])):
        assert result.status == "service_error" and "connection failed" in result.next_step
        check_pairing(result.messages)
