"""Streaming and structured output through the real openai SDK against the fake server on
127.0.0.1: typed events from both APIs, the loop on a stream, a stream cut off mid-way, the
scripted model's stream, and strict JSON-schema output honoured, ignored and checked."""

import json

import pytest

from labkit import (
    ChatModel,
    ModelBehaviorError,
    ResponsesModel,
    ScriptedModel,
    UserError,
    call,
    collect,
    run,
    say,
    user,
)
from labkit.models import CUT, Completed, TextDelta, ToolCallDelta
from labkit.probe import VERDICT  # a yes/no schema: the one the probe asks servers to honour
from labkit.stream import shown
from labkit.toolbox import get_weather

from fake_server import FakeServer

APIS = [ResponsesModel, ChatModel]
KEY = "sk-planted-stream-key-0123456789abcdef"


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def make(cls, server):
    return cls("m", base_url=server.url, api_key=KEY, key_name="LABKIT_API_KEY")


@pytest.mark.parametrize("cls", APIS)
def test_text_arrives_as_deltas_and_ends_with_the_whole_reply(server, cls):
    events = list(make(cls, server).stream([user("hello big world")]))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["fake ", "model ", "heard: ", "hello ", "big ", "world"]
    assert isinstance(events[-1], Completed)
    assert events[-1].reply.text == "fake model heard: hello big world"
    assert events[-1].reply.usage.total_tokens == 18  # usage arrives with the stream's end
    assert server.requests[0]["body"]["stream"] is True


@pytest.mark.parametrize("cls", APIS)
def test_tool_call_arguments_arrive_in_pieces(server, cls):
    events = list(make(cls, server).stream([user("Weather?")], [get_weather]))
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {(e.index, e.name) for e in pieces} == {(0, "get_weather")}
    assert json.loads("".join(e.arguments for e in pieces)) == {"city": "Paris"}
    (whole,) = events[-1].reply.tool_calls
    assert whole.id == pieces[0].id and json.loads(whole.arguments) == {"city": "Paris"}


@pytest.mark.parametrize("cls", APIS)
def test_a_streamed_reply_equals_the_reply_sent_whole(server, cls):
    model = make(cls, server)
    streamed = collect(model.stream([user("Weather?")], [get_weather]))
    whole = model.respond([user("Weather?")], [get_weather])
    assert streamed.tool_calls[0].arguments == whole.tool_calls[0].arguments
    assert (streamed.text, streamed.status, streamed.usage) == (
        whole.text,
        whole.status,
        whole.usage,
    )


@pytest.mark.parametrize("cls", APIS)
def test_the_loop_on_a_stream_gives_the_same_result(server, cls):
    plain = run("Weather in Paris?", make(cls, server), [get_weather])
    seen = []
    streamed = run("Weather in Paris?", make(cls, server), [get_weather], stream=seen.append)
    assert (streamed.status, streamed.answer, streamed.turns, streamed.tool_calls) == (
        plain.status,
        plain.answer,
        plain.turns,
        plain.tool_calls,
    )
    assert streamed.usage == plain.usage and streamed.completed == plain.completed
    assert any(isinstance(e, ToolCallDelta) for e in seen)


@pytest.mark.parametrize("cls", APIS)
def test_a_stream_cut_mid_way_ends_as_model_incomplete_with_nothing_run(server, cls):
    ran = []

    def weather(city: str) -> dict:
        """Weather for a city."""
        ran.append(city)
        return {"city": city}

    from labkit import tool

    server.fail_next("cut")  # the first turn's stream, a tool call, is cut half-way
    result = run("Weather in Paris?", make(cls, server), [tool(weather)], stream=True)
    assert result.status == "model_incomplete" and ran == []
    assert result.messages[-1].tool_calls == []  # no half-sent call in the history
    assert "cut short" in result.next_step


@pytest.mark.parametrize("cls", APIS)
def test_a_cut_text_stream_keeps_the_text_so_far_marked_incomplete(server, cls):
    server.fail_next("cut")
    reply = collect(make(cls, server).stream([user("one two three four five six")]))
    assert (reply.status, reply.incomplete_reason, reply.tool_calls) == ("incomplete", CUT, [])
    assert "fake model heard: one two three four five six".startswith(reply.text)


def test_the_scripted_model_streams_its_words():
    model = ScriptedModel([say("It is 14 °C in Paris."), call("get_weather", city="Oslo")])
    events = list(model.stream([user("Weather?")]))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is 14 °C in Paris."
    assert len([e for e in events if isinstance(e, TextDelta)]) == 6
    reply = collect(model.stream([user("And Oslo?")]))
    assert reply.tool_calls[0].name == "get_weather"


def test_shown_passes_every_event_through_and_prints_the_text_outside_jupyter(capsys):
    model = ScriptedModel([say("pong pong")])
    reply = collect(shown(model.stream([user("ping")])))
    assert reply.text == "pong pong" and capsys.readouterr().out == "pong pong\n"


@pytest.mark.parametrize("cls", APIS)
def test_structured_output_is_asked_for_strictly_and_honoured(server, cls):
    reply = make(cls, server).respond([user("Is Paris in France?")], output_schema=VERDICT)
    assert json.loads(reply.text) == {"answer": "yes"}
    body = server.requests[0]["body"]
    sent = body["text"]["format"] if cls is ResponsesModel else body["response_format"]
    wrapped = sent if cls is ResponsesModel else sent["json_schema"]
    assert sent["type"] == "json_schema" and wrapped["strict"] is True
    assert wrapped["name"] == "verdict" and wrapped["schema"] == VERDICT.schema


@pytest.mark.parametrize("cls", APIS)
def test_a_server_that_ignores_the_schema_meets_the_validator(cls):
    from labkit.cite import ANSWER_SCHEMA, parse_answer

    with FakeServer(json_schema=False) as server:
        reply = make(cls, server).respond([user("Why jitter?")], output_schema=ANSWER_SCHEMA)
    with pytest.raises(ModelBehaviorError, match="the answer is not JSON"):
        parse_answer(reply.text)


@pytest.mark.parametrize(
    "enforce, text, outcome",
    [
        (True, '{"answer": "yes"}', '{"answer": "yes"}'),
        (True, '{"answer": "maybe"}', "at answer: 'maybe' is not one of"),
        (True, "yes", "the text is not JSON"),
        (False, "yes", "yes"),
    ],
    ids=["matches", "wrong value", "not JSON", "a server ignoring the schema"],
)
def test_the_scripted_model_honours_an_output_schema_or_says_why_not(enforce, text, outcome):
    model = ScriptedModel([say(text)], enforce_schema=enforce)
    try:
        said = model.respond([user("Is Paris in France?")], output_schema=VERDICT).text
    except UserError as error:
        said = str(error)
    assert outcome in said
