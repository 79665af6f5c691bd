"""The live adapters, end to end: the real openai SDK over HTTP to a fake server on 127.0.0.1.

Covers a two-turn tool loop through both APIs, every fault a learner can hit mapped to one clear
line by explain(), a planted key that never appears in any message, repr or traceback, and tool
calls whose name or arguments a server sent as something other than text.
"""

import json
import socket
import traceback

import pytest

from labkit import (
    ChatModel,
    ResponsesModel,
    ServiceError,
    UserError,
    collect,
    connect,
    explain,
    tool_message,
    user,
)
from labkit import guardrails as g
from labkit.config import OFFICIAL_BASE_URL
from labkit.models import choice_to_api
from labkit.toolbox import get_weather

from fake_server import FakeServer

PLANTED = "sk-planted-DO-NOT-LEAK-0123456789abcdefXYZ"
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city (teaching data).",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


@pytest.fixture
def server():
    with FakeServer(slow_seconds=1.5) as s:
        yield s


def make(cls, server, **options):
    return cls(base_url=server.url, api_key=PLANTED, key_name="LABKIT_API_KEY", **options)


def everything_said(error):
    """Every text a learner could see about an error: message, explain, repr, formatted
    traceback."""
    formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return " ".join([str(error), explain(error), repr(error), formatted])


def fake_weather(arguments):
    return {"ok": True, "data": {"city": json.loads(arguments)["city"], "temp_c": 18}}


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_two_turn_tool_loop(server, cls):
    model = make(cls, server)
    messages = [user("What is the weather in Paris?")]
    first = model.respond(messages, [WEATHER])
    assert first.text == "" and [c.name for c in first.tool_calls] == ["get_weather"]
    assert json.loads(first.tool_calls[0].arguments) == {"city": "Paris"}
    messages.append(first.to_message())
    for call in first.tool_calls:
        messages.append(tool_message(call, json.dumps(fake_weather(call.arguments))))
    second = model.respond(messages, [WEATHER])
    assert second.tool_calls == [] and "temp_c" in second.text
    assert model.usage.total_tokens == 36 and model.unreported_turns == 0
    sent = server.requests[-1]["body"]
    if cls is ResponsesModel:
        assert sent["store"] is False
        kinds = [item.get("type", item.get("role")) for item in sent["input"]]
        assert kinds == ["user", "function_call", "function_call_output"]
        assert sent["input"][1]["call_id"] == sent["input"][2]["call_id"] == first.tool_calls[0].id
        assert sent["tools"][0]["strict"] is True and sent["tools"][0]["name"] == "get_weather"
    else:
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
        assert sent["messages"][2]["tool_call_id"] == sent["messages"][1]["tool_calls"][0]["id"]
    assert sent == model.request_preview(messages, [WEATHER])  # the preview is what was POSTed


FAULTS = [  # fault, error class, words the one-line explanation must contain
    ("401", UserError, ["401", "LABKIT_API_KEY"]),
    ("403", UserError, ["403", "permission"]),
    ("404", UserError, ["404", "OPENAI_MODEL"]),
    ("429", ServiceError, ["429", "wait"]),
    ("quota", ServiceError, ["quota", "billing"]),
    ("500", ServiceError, ["500", "try again"]),
    ("503", ServiceError, ["503", "try again"]),
    ("html", ServiceError, ["web page", "/v1"]),
    ("truncated", ServiceError, ["truncated", "JSON"]),
]


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
@pytest.mark.parametrize("fault, error_class, words", FAULTS)
def test_fault_is_explained_without_the_key(server, cls, fault, error_class, words):
    model = make(cls, server)
    server.fail_next(fault)
    with pytest.raises(error_class) as caught:
        model.respond([user("hi")])
    line = explain(caught.value)
    assert "\n" not in line and " — " in line
    for word in words:
        assert word.lower() in line.lower(), line
    assert PLANTED not in everything_said(caught.value)
    assert PLANTED[:20] not in everything_said(caught.value)
    assert len(server.requests) == 1  # no silent retries


def test_the_fake_401_really_echoes_the_key(server):
    """Guard for the test above: the server does put the key in its 401 body, so redaction is
    tested."""
    import openai

    client = openai.OpenAI(api_key=PLANTED, base_url=server.url, max_retries=0)
    server.fail_next("401")
    with pytest.raises(openai.AuthenticationError) as caught:
        client.responses.create(model="m", input="hi")
    assert PLANTED in str(caught.value)


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_timeout(server, cls):
    model = make(cls, server, timeout=0.3)
    server.fail_next("slow")
    with pytest.raises(ServiceError, match="timeout") as caught:
        model.respond([user("hi")])
    assert "0.3 s" in explain(caught.value) and PLANTED not in everything_said(caught.value)


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_connection_refused(cls):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = cls(base_url=f"http://127.0.0.1:{port}/v1", api_key=PLANTED, key_name="LABKIT_API_KEY")
    with pytest.raises(ServiceError, match="connection failed") as caught:
        model.respond([user("hi")])
    assert "running" in explain(caught.value) and PLANTED not in everything_said(caught.value)


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_incomplete_reply_is_returned_and_explained(server, cls):
    server.fail_next("incomplete")
    reply = make(cls, server).respond([user("hi")])
    assert reply.status == "incomplete" and reply.incomplete_reason == "max_output_tokens"
    assert "max_output_tokens" in explain(reply)


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_missing_usage_is_tolerated(server, cls):
    model = make(cls, server)
    server.fail_next("no_usage")
    reply = model.respond([user("hi")])
    assert reply.usage is None and reply.text
    model.respond([user("again")])
    assert model.unreported_turns == 1 and model.usage.total_tokens == 18


def test_reasoning_items_are_dropped_by_default(server):
    model = make(ResponsesModel, server)
    server.fail_next("reasoning")  # the reply carries a bare reasoning item
    messages = [user("weather?")]
    first = model.respond(messages, [WEATHER])
    assert first.reasoning == []
    messages += [first.to_message(), tool_message(first.tool_calls[0], '{"ok": true, "data": 1}')]
    second = model.respond(messages, [WEATHER])  # would be a 404 if the item were replayed
    assert second.text.startswith("fake model heard")
    assert all(i.get("type") != "reasoning" for i in server.requests[-1]["body"]["input"])


def test_a_bare_reasoning_item_is_never_replayed(server):
    import openai

    model = make(ResponsesModel, server, replay_reasoning=True)
    first = model.respond([user("weather?")], [WEATHER])
    message = first.to_message()
    message.reasoning = [{"type": "reasoning", "id": "rs_1", "summary": []}]  # no encrypted_content
    body = model.request_preview(
        [user("weather?"), message, tool_message(first.tool_calls[0], "{}")]
    )
    assert all(item.get("type") != "reasoning" for item in body["input"])
    body["input"].insert(1, message.reasoning[0])  # sent anyway, the API (and the fake) says 404
    with pytest.raises(openai.NotFoundError, match="not persisted"):
        model._client.responses.create(**body)


def test_reasoning_replayed_with_encrypted_content(server):
    model = make(ResponsesModel, server, replay_reasoning=True)
    messages = [user("weather?")]
    first = model.respond(messages, [WEATHER])
    assert first.reasoning and first.reasoning[0]["encrypted_content"].startswith("gAAAA")
    messages += [first.to_message(), tool_message(first.tool_calls[0], '{"ok": true, "data": 1}')]
    second = model.respond(messages, [WEATHER])
    sent = server.requests[-1]["body"]
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["input"][1]["type"] == "reasoning" and sent["input"][1]["encrypted_content"]
    assert second.text.startswith("fake model heard")


def test_local_server_never_receives_the_openai_key(server, monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    monkeypatch.setenv("LABKIT_BASE_URL", server.url)
    monkeypatch.setenv("LABKIT_API", "chat")
    model = connect()
    assert isinstance(model, ChatModel) and model.base_url == server.url
    model.respond([user("hi")])
    assert PLANTED not in json.dumps(server.requests)
    assert server.requests[0]["headers"]["authorization"] == "Bearer no-key-needed"


def test_stray_openai_base_url_is_ignored(server, monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    model = connect()
    assert isinstance(model, ResponsesModel) and model.base_url == OFFICIAL_BASE_URL
    assert str(model._client.base_url).rstrip("/") == OFFICIAL_BASE_URL
    assert PLANTED not in repr(model)


@pytest.mark.parametrize(
    "cls, field", [(ResponsesModel, "max_output_tokens"), (ChatModel, "max_tokens")]
)
def test_max_output_tokens_caps_replies_on_the_server(server, cls, field):
    model = make(cls, server, max_output_tokens=64)
    model.respond([user("hi")])
    assert server.requests[-1]["body"][field] == 64
    assert field not in make(cls, server).request_preview([user("hi")])


@pytest.mark.parametrize(
    "cls, field", [(ResponsesModel, "max_output_tokens"), (ChatModel, "max_tokens")]
)
def test_a_cap_given_to_one_call_reaches_the_server_and_the_tighter_cap_wins(server, cls, field):
    model = make(cls, server, max_output_tokens=64)
    model.respond([user("hi")], max_output_tokens=32)
    model.respond([user("hi")], max_output_tokens=128)
    assert [r["body"][field] for r in server.requests[-2:]] == [32, 64]
    assert model.max_output_tokens == 64


# ---------------------------------------------------------------- tool calls that are not text

SHAPES = [  # fault, the call the adapter reads (name, arguments), words of its problem (None: none)
    ("arguments_object", "get_weather", '{"city": "Paris"}', None),
    ("arguments_list", "get_weather", '["Paris"]', None),
    ("arguments_missing", "get_weather", "{}", None),
    ("name_number", "7", '{"city": "Paris"}', "the tool name is a number, not text"),
    ("name_list", '["get_weather"]', '{"city": "Paris"}', "the tool name is a JSON array"),
    ("name_missing", "", '{"city": "Paris"}', "the call has no tool name"),
]


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
@pytest.mark.parametrize("fault, name, arguments, problem", SHAPES)
def test_adapters_make_arguments_text_and_mark_a_name_they_cannot_read(
    server, cls, fault, name, arguments, problem
):
    server.fail_next(fault)
    [got] = make(cls, server).respond([user("Weather in Paris?")], [WEATHER]).tool_calls
    assert (got.name, got.arguments) == (name, arguments)
    assert got.problem is None if problem is None else problem in got.problem


OUTCOMES = [  # fault, the error the call's result carries (None: the tool ran)
    ("arguments_object", None),
    ("arguments_list", "invalid_json"),
    ("arguments_missing", "invalid_arguments"),
    ("name_number", "malformed_call"),
    ("name_list", "malformed_call"),
    ("name_missing", "malformed_call"),
]


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
@pytest.mark.parametrize("fault, error", OUTCOMES)
def test_a_guarded_run_over_the_sdk_runs_or_refuses_such_calls(server, cls, fault, error):
    server.fail_next(fault)
    result = g.run_guarded("Weather in Paris?", make(cls, server), [get_weather])
    assert result.status == "completed" and result.answer.startswith("fake model heard")
    assert json.loads(result.messages[3].content).get("error") == error
    sent = server.requests[-1]["body"]  # the history went back with every field as text
    if cls is ResponsesModel:
        [call] = [item for item in sent["input"] if item.get("type") == "function_call"]
    else:
        call = sent["messages"][2]["tool_calls"][0]["function"]
    assert isinstance(call["name"], str) and isinstance(call["arguments"], str)


@pytest.mark.parametrize(
    "place, words",
    [
        ("shell", "LABKIT_API_KEY is set in the shell"),
        (".env", "put a valid key in .env line 2 as LABKIT_API_KEY"),
    ],
)
def test_a_rejected_key_is_blamed_where_it_was_set(server, tmp_path, monkeypatch, place, words):
    for name, value in {
        "LABKIT_MODE": "live",
        "LABKIT_BASE_URL": server.url,
        "LABKIT_API": "chat",
    }.items():
        monkeypatch.setenv(name, value)
    if place == "shell":
        monkeypatch.setenv("LABKIT_API_KEY", PLANTED)
    else:
        (tmp_path / ".env").write_text(f"LABKIT_MODE=live\nLABKIT_API_KEY={PLANTED}\n")
        monkeypatch.setenv("LABKIT_ENV_FILE", str(tmp_path / ".env"))
    model = connect()
    server.fail_next("401")
    with pytest.raises(UserError) as caught:
        model.respond([user("hi")])
    assert words in explain(caught.value) and PLANTED not in everything_said(caught.value)


@pytest.mark.parametrize(
    "option, value",
    [
        ("timeout", 0),
        ("timeout", -1.5),
        ("timeout", float("nan")),
        ("timeout", "soon"),
        ("max_retries", -1),
        ("max_retries", 1.5),
    ],
)
def test_a_live_model_refuses_limits_that_cannot_work(option, value):
    with pytest.raises(UserError, match=f"{option}=") as caught:
        ChatModel(base_url="http://127.0.0.1:9/v1", **{option: value})
    assert " — " in str(caught.value)


# ---------------------------------------------------------------- tool_choice over the SDK

CALCULATE = {**WEATHER, "name": "calculate", "description": "Work out a sum (teaching data)."}


def after_one_call(model):
    """A history that ends with a tool output: an "auto" model now answers in text."""
    messages = [user("What is the weather in Paris?")]
    first = model.respond(messages, [WEATHER])
    messages.append(first.to_message())
    messages += [tool_message(c, json.dumps(fake_weather(c.arguments))) for c in first.tool_calls]
    return messages


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
@pytest.mark.parametrize(
    "choice, called",  # the fake model calls its first tool unless told otherwise
    [("auto", []), ("required", ["get_weather"]), ("calculate", ["calculate"])],
)
def test_a_tool_choice_reaches_the_server_after_a_tool_output(
    server, cls, streamed, choice, called
):
    model = make(cls, server)
    messages = after_one_call(model)
    if streamed:
        reply = collect(model.stream(messages, [WEATHER, CALCULATE], tool_choice=choice))
    else:
        reply = model.respond(messages, [WEATHER, CALCULATE], tool_choice=choice)
    assert [c.name for c in reply.tool_calls] == called
    sent = server.requests[-1]["body"]
    assert sent.get("tool_choice") == (
        model.request_preview(messages, [WEATHER, CALCULATE], tool_choice=choice).get("tool_choice")
    )


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_tool_choice_none_gets_text_where_the_model_would_call(server, cls):
    reply = make(cls, server).respond([user("Weather in Paris?")], [WEATHER], tool_choice="none")
    assert reply.tool_calls == [] and reply.text.startswith("fake model heard")
    assert server.requests[-1]["body"]["tool_choice"] == "none"


@pytest.mark.parametrize("cls, other", [(ResponsesModel, "chat"), (ChatModel, "responses")])
def test_the_fake_server_refuses_the_other_apis_way_of_naming_a_tool(server, cls, other):
    """Guard for the tests above: a choice written for the wrong API is a 400, as on OpenAI."""
    model = make(cls, server)
    body = model.request_preview([user("Weather in Paris?")], [WEATHER])
    with pytest.raises(UserError, match="tool_choice"):
        model.send({**body, "tool_choice": choice_to_api("get_weather", other)})


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_a_guarded_run_forced_on_its_first_turn_over_the_sdk(server, cls):
    result = g.run_guarded(
        "Weather in Paris?", make(cls, server), [get_weather], tool_choice="required-first"
    )
    assert result.status == "completed" and result.completed == ['get_weather({"city": "Paris"})']
    sent = [r["body"].get("tool_choice") for r in server.requests]
    assert sent == ["required", None]  # "auto" after the result: nothing sent
    assert PLANTED not in repr(result)
