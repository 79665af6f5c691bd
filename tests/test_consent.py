"""The one consent rule (labkit.tools.approved) and every place that asks a person for a yes."""

import json

import pytest

from labkit import guardrails as g
from labkit.labs import Workspace
from labkit.memory import ManualClock, MemoryStore, WorkingMemory, memory_tools
from labkit.models import ScriptedModel, ToolCall, call, say
from labkit.tools import YES_WORDS, ToolRegistry, approved, execute

YES = [
    True,
    "yes",
    "Yes",
    "  YES  ",
    "y",
    "Y",
    "yes.",
    "Yes!",
    "是",
    "是的",
    "好",
    "好的。",
    "可以！",
    "同意",
    "\u3000是\u3000",
]  # an ideographic space is whitespace too
# answers that start like a yes, contain one, or are "truthy", and still are not one
NOT_YES = [
    "Yesterday I said no",
    "you must not",
    "yes, but not now",
    "yes?",
    "yeah no",
    "y'know",
    "no",
    "",
    "   ",
    None,
    1,
    1.0,
    "true",
    "True",
    "ok",
    "sure",
    "yes please",
    "yes yes",
    "yes..",
    "yes!!",
    "yess",
    "ye",
    "not yes",
    "no. yes",
    "yes\u200b",
    "是吗",
    "不是",
    "不好",
    "不可以",
    "好不好",
    "不同意",
    b"yes",
    ["yes"],
    {"answer": "yes"},
    False,
    0,
]


@pytest.mark.parametrize("answer", YES)
def test_an_explicit_yes_approves(answer):
    assert approved(answer) is True


@pytest.mark.parametrize("answer", NOT_YES)
def test_everything_else_is_a_no(answer):
    assert approved(answer) is False


def test_the_yes_words_are_short_and_each_approves_on_its_own():
    assert {"y", "yes", "是", "好"} <= YES_WORDS
    assert all(approved(word) and approved(word.upper()) for word in YES_WORDS)


# ---------------------------------------------------------------- memory: the remember tool


def remember_with(answer, store, tenant="ana", content="Prefers metric units"):
    remember, _ = memory_tools(store, tenant, confirm=lambda question: answer)
    arguments = {"id": "units", "content": content, "kind": "preference", "importance": 0.6}
    return execute(ToolCall("call_1", "remember", json.dumps(arguments)), ToolRegistry([remember]))


@pytest.fixture
def store():
    with MemoryStore(":memory:", clock=ManualClock()) as s:
        yield s


@pytest.mark.parametrize("answer", NOT_YES)
def test_remember_stores_nothing_without_an_explicit_yes(store, answer):
    result = remember_with(answer, store)
    assert (result["ok"], result["error"]) == (False, "not_confirmed")
    assert store.list("ana") == []


@pytest.mark.parametrize("answer", NOT_YES)
def test_remember_keeps_the_old_value_without_an_explicit_yes(store, answer):
    store.write("ana", "Prefers imperial units", id="units", confirmed=True)
    result = remember_with(answer, store)
    assert (result["ok"], result["error"]) == (False, "kept")
    assert store.get("ana", "units").content == "Prefers imperial units"


@pytest.mark.parametrize("answer", YES)
def test_remember_stores_after_an_explicit_yes(store, answer):
    assert remember_with(answer, store)["ok"] is True
    assert store.get("ana", "units").content == "Prefers metric units"


# ---------------------------------------------------------------- memory: consolidate


def consolidate_with(answer, store):
    work = WorkingMemory(capacity=5, clock=store.clock)
    work.add("Wants chapters under 4,000 words", kind="preference", importance=0.9)
    return work.consolidate(store, "ana", confirm=lambda question: answer)


@pytest.mark.parametrize("answer", NOT_YES)
def test_consolidate_promotes_nothing_without_an_explicit_yes(store, answer):
    report = consolidate_with(answer, store)
    assert report["promoted"] == {} and report["needs_confirmation"] == ["w1"]
    assert store.list("ana") == []


@pytest.mark.parametrize("answer", YES)
def test_consolidate_promotes_after_an_explicit_yes(store, answer):
    assert consolidate_with(answer, store)["promoted"] == {"w1": "m1"}


# ---------------------------------------------------------------- guardrails: a high-risk tool


def email_with(answer):
    workspace = Workspace()
    model = ScriptedModel(
        [call("send_email", to="ana@example.com", subject="hi", body="x"), say("done")]
    )
    result = g.run_guarded(
        "Email Ana.", model, workspace.tools(), max_risk="high", approve=lambda call, tool: answer
    )
    return workspace, result.trace.text()


@pytest.mark.parametrize("answer", NOT_YES)
def test_a_high_risk_tool_never_runs_without_an_explicit_yes(answer):
    workspace, trace = email_with(answer)
    assert workspace.outbox == [] and "refuse not_approved" in trace


@pytest.mark.parametrize("answer", YES)
def test_a_high_risk_tool_runs_after_an_explicit_yes(answer):
    workspace, trace = email_with(answer)
    assert len(workspace.outbox) == 1 and "allow approved" in trace
