"""Messages, the scripted model, request previews, the live adapters' request bodies."""

import inspect
import json
from pathlib import Path

import pytest

from labkit import (
    ChatModel,
    Message,
    ResponsesModel,
    ScriptedModel,
    ToolCall,
    UserError,
    call,
    cassettes,
    collect,
    connect,
    describe,
    incomplete,
    raw_call,
    request_preview,
    say,
    system,
    tokens,
    tool_message,
    turn,
    user,
)
from labkit.cassettes import Recorder, Replayer
from labkit.live import read_output
from labkit.models import (
    CappedModel,
    Model,
    NamedModel,
    Reply,
    StreamingModel,
    check_pairing,
    estimate_tokens,
)

KEY = "sk-test-0123456789abcdefghij"
WEATHER = {
    "name": "get_weather",
    "description": "d",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def test_scripted_model_replays_its_steps_in_order():
    model = ScriptedModel([call("get_weather", city="北京"), say("It is 18 °C.")])
    first = model.respond([user("weather in Beijing?")], [WEATHER])
    assert first.text == "" and first.tool_calls == [
        ToolCall("call_1", "get_weather", '{"city": "北京"}')
    ]
    second = model.respond([user("weather in Beijing?")], [WEATHER])
    assert second.text == "It is 18 °C." and second.tool_calls == []
    assert model.unused() == [] and repr(model) == "ScriptedModel(2 steps, 2 used)"


def test_scripted_model_records_copies_of_what_it_was_shown():
    model = ScriptedModel([say("ok")])
    messages = [system("be brief"), user("hi")]
    model.respond(messages, [WEATHER])
    messages.append(user("later"))  # later edits do not rewrite history
    assert [m.content for m in model.seen[0].messages] == ["be brief", "hi"]
    assert model.seen[0].tools == ["get_weather"]


def test_script_running_out_is_a_clear_error():
    model = ScriptedModel([say("one")])
    model.respond([user("a")])
    with pytest.raises(UserError, match="no step 2: its script has 1 step"):
        model.respond([user("b")])


def test_unused_steps_are_reported():
    model = ScriptedModel([say("a"), call("f", x=1), lambda messages, tools: say("c")])
    model.respond([user("q")])
    assert model.unused() == ['call f({"x": 1})', "<computed step>"]


def test_computed_step_reacts_to_what_it_was_shown():
    model = ScriptedModel([lambda messages, tools: say(f"you said {messages[-1].content!r}")])
    assert model.respond([user("ping")]).text == "you said 'ping'"


def test_computed_step_must_return_a_step():
    model = ScriptedModel([lambda messages, tools: "pong"])
    with pytest.raises(UserError, match="not a step"):
        model.respond([user("ping")])


def test_turn_raw_call_and_incomplete():
    model = ScriptedModel(
        [
            turn(say("Checking both."), call("f", a=1), call("g", b=2)),
            raw_call("f", '{"a": '),
            incomplete("The answer is", "max_output_tokens"),
        ]
    )
    both = model.respond([user("q")])
    assert both.text == "Checking both." and [c.id for c in both.tool_calls] == ["call_1", "call_2"]
    assert model.respond([user("q")]).tool_calls[0].arguments == '{"a": '
    cut = model.respond([user("q")])
    assert (cut.status, cut.incomplete_reason, cut.text) == (
        "incomplete",
        "max_output_tokens",
        "The answer is",
    )


@pytest.mark.parametrize(
    "count_as, source",
    [
        ("gpt-5-mini", "counted"),
        ("gpt-4o", "counted"),
        ("llama3.2", "estimated"),
        (None, "estimated"),
    ],
)
def test_scripted_usage_is_counted_by_labkit_and_never_claims_a_server(count_as, source):
    model = ScriptedModel([say("pong"), say("pong")], count_as=count_as)
    reply = model.respond([user("ping")])
    assert reply.usage.source == source == model.usage.source
    assert reply.usage.input_tokens == tokens.count([user("ping")], count_as)
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens
    model.respond([user("ping")])
    assert model.usage.total_tokens == 2 * reply.usage.total_tokens
    assert model.usage.source == source  # a sum says what its parts are


@pytest.mark.parametrize(
    "text, tokens", [("", 0), ("hello world", 3), ("你好世界", 4), ("abcd", 1)]
)
def test_estimate_tokens(text, tokens):
    assert estimate_tokens(text) == tokens


def history_with_call():
    c = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    return c, [user("weather?"), Message("assistant", "", [c])]


def test_pairing_accepts_a_paired_history():
    c, messages = history_with_call()
    check_pairing(messages + [tool_message(c, "{}"), user("thanks")])


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda c, m: m + [user("next")], "comes before the output"),
        (lambda c, m: m, "have no output yet"),
        (lambda c, m: m + [tool_message(c, "{}"), tool_message(c, "{}")], "already answered"),
        (lambda c, m: [user("q"), tool_message(c, "{}")], "no assistant message"),
        (lambda c, m: m + [Message("robot", "x")], "role 'robot'"),
    ],
)
def test_pairing_errors_say_what_to_append(mutate, words):
    c, messages = history_with_call()
    with pytest.raises(UserError, match=words):
        check_pairing(mutate(c, messages))


def test_request_preview_responses_shape():
    c, messages = history_with_call()
    body = ResponsesModel(api_key=KEY).request_preview(
        [system("s")] + messages + [tool_message(c, "18C")], [WEATHER]
    )
    assert body["store"] is False and body["model"] == "gpt-5-mini"
    assert body["input"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "weather?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ]
    assert body["tools"][0] == {"type": "function", **WEATHER, "strict": True}
    assert "include" not in body
    json.dumps(body)  # it is exactly JSON


def test_request_preview_chat_shape():
    c, messages = history_with_call()
    body = ChatModel(api_key=KEY).request_preview(messages + [tool_message(c, "18C")], [WEATHER])
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",  # not null: llama-cpp-python's server refuses a null content
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    assert body["tools"][0]["function"]["strict"] is True


def test_no_tools_key_when_no_tools():
    assert "tools" not in ResponsesModel(api_key=KEY).request_preview([user("hi")])
    assert "tools" not in ChatModel(api_key=KEY).request_preview([user("hi")])


def test_live_model_refuses_a_bad_key_before_any_request():
    with pytest.raises(UserError, match="quotes"):
        ResponsesModel(api_key=f'"{KEY}"')
    with pytest.raises(UserError, match="not set"):
        ChatModel(api_key=None)


def test_connect_switch(monkeypatch):
    offline = connect(script=[say("pong")])
    assert isinstance(offline, ScriptedModel) and describe(offline).startswith("offline")
    monkeypatch.setenv("LABKIT_MODE", "live")
    with pytest.raises(UserError, match="OPENAI_API_KEY is not set"):
        connect()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    live = connect()
    assert (
        isinstance(live, ResponsesModel)
        and "gpt-5-mini" in describe(live)
        and KEY not in describe(live)
    )
    assert isinstance(connect(mode="offline"), ScriptedModel)


@pytest.mark.parametrize("mode", ["live", "record"])
def test_live_mode_without_a_key_says_why_and_goes_on_with_the_script(monkeypatch, capsys, mode):
    """A notebook's Go live cell (connect with a script) in live mode with no key: one line, then
    the scripted model answers, so Run All reaches the rest of the notebook."""
    monkeypatch.setenv("LABKIT_MODE", mode)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = connect(script=[say("pong")], cassette="01_setup")
    assert isinstance(model, ScriptedModel) and model.respond([user("ping")]).text == "pong"
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("live mode cannot start: OPENAI_API_KEY is not set — put OPENAI_API_KEY")
    assert line.endswith("this cell runs its scripted model instead.")


def test_live_mode_with_a_bad_key_and_no_script_still_raises(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("OPENAI_API_KEY", f'"{KEY}"')
    with pytest.raises(UserError, match="quotes"):
        connect()


def test_read_output_skips_unknown_items_and_reads_refusals():
    items = [
        {"type": "web_search_call", "id": "ws_1"},
        {"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
    ]
    assert read_output(items) == ("I can't help with that.", [])


def test_module_request_preview_needs_no_key(monkeypatch):
    c, messages = history_with_call()
    messages = messages + [tool_message(c, "18C")]
    assert request_preview(messages, [WEATHER]) == ResponsesModel(api_key=KEY).request_preview(
        messages, [WEATHER]
    )
    monkeypatch.setenv("LABKIT_API", "chat")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-test")
    assert request_preview(messages, [WEATHER]) == ChatModel(
        "gpt-test", api_key=KEY
    ).request_preview(messages, [WEATHER])
    with pytest.raises(UserError, match="not an API"):
        request_preview(messages, api="completions")


def test_scripted_model_has_no_output_cap_by_default():
    long = "word " * 400
    reply = ScriptedModel([say(long)]).respond([user("talk")])
    assert ScriptedModel().max_output_tokens is None
    assert (reply.status, reply.text, reply.usage.output_tokens) == (
        "completed",
        long,
        tokens.count(long),
    )


@pytest.mark.parametrize(
    "own, per_call, used", [(None, 5, 5), (5, None, 5), (8, 5, 5), (5, 8, 5), (None, None, 500)]
)
def test_a_cap_given_to_one_call_is_applied_with_the_models_own_the_tighter_wins(
    own, per_call, used
):
    model = ScriptedModel([say("word " * 400)], count_as=None)  # 500 tokens, estimated
    model.max_output_tokens = own
    reply = model.respond([user("talk")], max_output_tokens=per_call)
    assert reply.usage.output_tokens == used and model.max_output_tokens == own


@pytest.mark.parametrize("count_as", ["gpt-5-mini", None])
def test_a_capped_scripted_model_cuts_at_the_longest_text_that_fits(count_as):
    long = "Let me explain at length. " * 50
    model = ScriptedModel([say(long)], count_as=count_as)
    model.max_output_tokens = 5
    cut = model.respond([user("talk")])
    assert long.startswith(cut.text) and cut.usage.output_tokens == tokens.count(cut.text, count_as)
    assert tokens.count(cut.text, count_as) <= 5 < tokens.count(long[: len(cut.text) + 1], count_as)


def test_a_capped_scripted_model_cuts_a_long_reply_like_a_server():
    model = ScriptedModel([say("word " * 400), say("short"), say("你好世界" * 10)], count_as=None)
    model.max_output_tokens = 5
    cut = model.respond([user("talk")])
    assert (cut.status, cut.incomplete_reason) == ("incomplete", "max_output_tokens")
    assert cut.text == ("word " * 400)[:20] and cut.usage.output_tokens == 5 == estimate_tokens(
        cut.text
    )
    assert model.respond([user("again")]).status == "completed"  # a reply that fits is untouched
    chinese = model.respond([user("again")])
    assert chinese.text == "你好世界你" and chinese.usage.output_tokens == 5


def test_a_capped_scripted_model_drops_calls_that_do_not_fit():
    model = ScriptedModel(
        [
            turn(say("Checking."), call("get_weather", city="Paris" * 20)),
            turn(say("Checking."), call("get_weather", city="Paris")),
        ]
    )
    model.max_output_tokens = 10
    cut = model.respond([user("weather?")])
    assert cut.status == "incomplete" and cut.text == "Checking." and cut.tool_calls == []
    assert cut.usage.output_tokens <= 10
    fits = model.respond([user("weather?")])
    assert fits.status == "completed" and [c.name for c in fits.tool_calls] == ["get_weather"]


@pytest.mark.parametrize(
    "base_url, field",
    [(None, "max_completion_tokens"), ("http://127.0.0.1:8011/v1", "max_tokens")],
    ids=["OpenAI", "a local server"],
)
def test_a_chat_cap_is_named_as_the_server_knows_it(base_url, field):
    where = {"base_url": base_url, "key_name": "LABKIT_API_KEY"} if base_url else {}
    body = ChatModel(api_key=KEY, max_output_tokens=64, **where).request_preview([user("hi")])
    assert body[field] == 64 and len([k for k in body if k.startswith("max_")]) == 1


# ---------------------------------------------------------------- tool_choice

CALCULATE = {**WEATHER, "name": "calculate"}


def test_the_scripted_model_records_the_tool_choice_it_was_asked_for():
    model = ScriptedModel([call("get_weather", city="Paris"), say("14 °C"), say("bye")])
    model.respond([user("weather?")], [WEATHER], tool_choice="required")
    collect(model.stream([user("weather?")], [WEATHER], tool_choice="none"))
    model.respond([user("weather?")], [WEATHER])
    assert [s.tool_choice for s in model.seen] == ["required", "none", "auto"]


def test_a_computed_step_can_check_what_it_was_asked_for():
    model = ScriptedModel([lambda messages, tools: say(f"asked for {model.seen[-1].tool_choice}")])
    assert model.respond([user("q")], [WEATHER], tool_choice="none").text == "asked for none"


@pytest.mark.parametrize(
    "step, choice, words",
    [
        (say("It is sunny."), "required", "it calls no tool"),
        (call("get_weather", city="Paris"), "none", "it calls a tool"),
        (call("calculate", expression="1+1"), "get_weather", "it calls calculate, not only"),
        (say("sunny"), "get_weather", "it calls no tool, not only get_weather"),
    ],
)
def test_a_step_that_disobeys_the_tool_choice_is_a_bug_in_the_script(step, choice, words):
    with pytest.raises(UserError, match=f"disobeys tool_choice '{choice}': {words}"):
        ScriptedModel([step]).respond([user("q")], [WEATHER, CALCULATE], tool_choice=choice)
    ignoring = ScriptedModel([step], enforce_tool_choice=False)  # a server that ignores it
    assert ignoring.respond([user("q")], [WEATHER, CALCULATE], tool_choice=choice) is not None


@pytest.mark.parametrize(
    "choice, tools, words",
    [
        ("yes", [WEATHER], '\'yes\' is not allowed — use "auto", "required", "none" or'),
        ("get_time", [WEATHER], "the name of an offered tool (get_weather)"),
        ("get_weather", [], "a tool's name (none were offered)"),
        ("required", [], '"required" with no tools offered'),
        (None, [WEATHER], "None is not allowed"),
        ({"type": "function", "name": "get_weather"}, [WEATHER], "is not allowed — use"),
    ],
)
def test_a_bad_tool_choice_says_what_is_allowed(choice, tools, words):
    for ask in (
        lambda: ScriptedModel([say("x")]).respond([user("q")], tools, tool_choice=choice),
        lambda: ResponsesModel(api_key=KEY).request_preview([user("q")], tools, tool_choice=choice),
        lambda: ChatModel(api_key=KEY).request_preview([user("q")], tools, tool_choice=choice),
    ):
        with pytest.raises(UserError) as caught:
            ask()
        assert words in str(caught.value)


FORCED = {  # what each API is sent: a word is a word; one tool is named its own way
    ("responses", "required"): "required",
    ("responses", "none"): "none",
    ("responses", "get_weather"): {"type": "function", "name": "get_weather"},
    ("chat", "required"): "required",
    ("chat", "none"): "none",
    ("chat", "get_weather"): {"type": "function", "function": {"name": "get_weather"}},
}


@pytest.mark.parametrize("api, choice", list(FORCED))
def test_request_preview_translates_the_tool_choice_for_each_api(api, choice):
    cls = ResponsesModel if api == "responses" else ChatModel
    body = cls(api_key=KEY).request_preview([user("q")], [WEATHER], tool_choice=choice)
    assert body["tool_choice"] == FORCED[api, choice]
    module = request_preview([user("q")], [WEATHER], api, "gpt-5-mini", tool_choice=choice)
    assert module["tool_choice"] == FORCED[api, choice]


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_auto_and_a_choice_without_tools_are_never_sent(cls):
    model = cls(api_key=KEY)
    assert model.request_preview([user("q")], [WEATHER], tool_choice="auto") == (
        model.request_preview([user("q")], [WEATHER])
    )
    assert "tool_choice" not in model.request_preview([user("q")], [WEATHER])
    assert "tool_choice" not in model.request_preview([user("q")], [], tool_choice="none")


# ---------------------------------------------------------------- the Model protocol

CASSETTE = Path(__file__).resolve().parent.parent / "data" / "cassettes" / "01_setup.jsonl"


def every_model(tmp_path):
    """One of each model class labkit has, built offline (no request is sent)."""
    header = {"cassette": 1, "model": "m", "server": "s", "date": "d"}
    live = ResponsesModel(api_key=KEY)
    return {
        "ScriptedModel": ScriptedModel([say("pong")]),
        "ResponsesModel": live,
        "ChatModel": ChatModel(api_key=KEY),
        "Recorder": Recorder(live, tmp_path / "recording.jsonl", header),
        "Replayer": Replayer(CASSETTE),
    }


MODELS = ["ScriptedModel", "ResponsesModel", "ChatModel", "Recorder", "Replayer"]


@pytest.mark.parametrize("name", MODELS)
def test_every_model_class_is_a_model_that_streams_and_caps_its_replies(tmp_path, name):
    model = every_model(tmp_path)[name]
    assert isinstance(model, Model)
    assert isinstance(model, StreamingModel)
    assert isinstance(model, CappedModel)


@pytest.mark.parametrize("name", MODELS)
def test_only_models_that_ask_a_real_model_are_named(tmp_path, name):
    model = every_model(tmp_path)[name]
    assert isinstance(model, NamedModel) == (name != "ScriptedModel")


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("method", ["respond", "stream"])
def test_all_five_models_take_the_protocol_s_one_signature(tmp_path, name, method):
    model = every_model(tmp_path)[name]
    protocol = StreamingModel if method == "stream" else Model
    expected = inspect.signature(getattr(protocol, method)).parameters
    found = inspect.signature(getattr(type(model), method)).parameters
    assert [(p.name, p.kind, p.default) for p in found.values()] == [
        (p.name, p.kind, p.default) for p in expected.values()
    ]


@pytest.mark.parametrize("name", ["ScriptedModel", "Recorder", "Replayer"])
def test_the_same_keywords_reach_every_model(tmp_path, monkeypatch, name):
    monkeypatch.setattr(cassettes, "_cursor", {})  # where replays left off: this test's own
    model = every_model(tmp_path)[name]
    if name == "Recorder":  # recording a scripted model: nothing is sent
        model = Recorder(ScriptedModel([say("pong")]), tmp_path / "r.jsonl", {"cassette": 1})
    messages = [system("Answer in one word."), user("ping")]
    if name == "Replayer":
        messages = [Message(r, t) for r, t in recorded_request()]
    options = dict(max_output_tokens=None, output_schema=None, tool_choice="auto")
    assert isinstance(model.respond(messages, (), **options).text, str)


def recorded_request():
    return json.loads(CASSETTE.read_text(encoding="utf-8").splitlines()[1])["request"]


def test_a_model_of_your_own_needs_only_respond():
    class Echo:
        def respond(self, messages, tools=()):
            return Reply(messages[-1].content)

    assert isinstance(Echo(), Model)
    assert not isinstance(Echo(), StreamingModel)
    assert not isinstance(Echo(), CappedModel)
    assert not isinstance(Echo(), NamedModel)
