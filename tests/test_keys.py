"""No key is ever shown: keys planted in the shell and in .env, short and long, never appear in
messages, reprs, vars, exception chains, doctor output or the results of a guarded run."""

import dataclasses
import json
import socket

import pytest

from labkit import (
    ChatModel,
    LabkitError,
    ResponsesModel,
    ServiceError,
    UserError,
    connect,
    describe,
    doctor,
    explain,
    load_settings,
    redact,
    user,
)
from labkit import guardrails as g
from labkit.budget import Budget
from labkit.embed import OpenAIEmbedder
from labkit.errors import ToolError
from labkit.keys import KEY_CHECKS, is_placeholder, key_problem, scrub
from labkit.live import openai_client
from labkit.models import ScriptedModel, call, say
from labkit.toolbox import get_weather
from labkit.tools import tool

from fake_server import FakeServer

KEYS = {  # what learners configure, from a local server's key to OpenAI's
    "3 characters": "k3y",
    "6 characters": "Zq9-x2",
    "long, local": "local-server-secret-4711",
    "OpenAI-style": "sk-proj-PLANTEDkey0123456789abcdefXYZ",
}


@pytest.fixture(
    params=[
        (k, place, name)
        for k in KEYS
        for place in ("shell", ".env")
        for name in ("OPENAI_API_KEY", "LABKIT_API_KEY")
    ],
    ids=lambda p: f"{p[0]} in {p[1]} as {p[2]}",
)
def planted(request, tmp_path, monkeypatch):
    """A key configured the way a learner would: exported in the shell, or written in .env."""
    label, place, name = request.param
    key = KEYS[label]
    if place == "shell":
        monkeypatch.setenv(name, key)
    else:
        (tmp_path / ".env").write_text(f"# my settings\nLABKIT_MODE=offline\n{name}={key}\n")
        monkeypatch.setenv("LABKIT_ENV_FILE", str(tmp_path / ".env"))
    return key


def error_texts(error):
    """str, repr, args and notes of an error and of every exception reachable from it."""
    texts, seen, todo = [], set(), [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        texts += [str(e), repr(e), *map(repr, e.args), *getattr(e, "__notes__", [])]
        todo += [e.__cause__, e.__context__, *(a for a in e.args if isinstance(a, BaseException))]
    return texts


def object_texts(value, seen=None):
    """repr() of an object and of everything vars() shows, into labkit's own objects."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    texts = [repr(value)]
    if dataclasses.is_dataclass(value):
        texts.append(repr(dataclasses.asdict(value)))
    for attribute in getattr(value, "__dict__", {}).values():
        if type(attribute).__module__.startswith("labkit"):
            texts += object_texts(attribute, seen)
        else:
            texts.append(repr(attribute))
    return texts


def every_text(value, seen=None):
    """Every string reachable from a run result: dataclass fields, attributes, dicts, lists."""
    seen = set() if seen is None else seen
    if isinstance(value, str):
        return [value]
    if id(value) in seen or callable(value) or value is None or isinstance(value, int | float):
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in every_text(k, seen) + every_text(v, seen)]
    if isinstance(value, list | tuple | set):
        return [s for v in value for s in every_text(v, seen)]
    return [s for v in getattr(value, "__dict__", {}).values() for s in every_text(v, seen)]


# ---------------------------------------------------------------- one redaction function


@pytest.mark.parametrize(
    "template",
    [
        "Incorrect API key provided: {}.",
        "Authorization: {}",
        '{{"api_key": "{}"}}',
        "http://127.0.0.1:8000/v1?key={}",
        "{}",
    ],
)
def test_every_configured_key_is_redacted_whatever_its_length(planted, template):
    assert planted not in redact(template.format(planted))
    assert "[redacted]" in redact(template.format(planted))


def test_a_short_key_is_scrubbed_where_it_stands_alone_not_inside_other_words(monkeypatch):
    monkeypatch.setenv("LABKIT_API_KEY", "k3y")
    assert redact("the key k3y was refused") == "the key [redacted] was refused"
    assert redact("k3ys and ak3y are other words") == "k3ys and ak3y are other words"


def test_the_placeholder_from_env_example_is_not_a_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-...")
    assert redact("write OPENAI_API_KEY=sk-... in .env") == "write OPENAI_API_KEY=sk-... in .env"


def test_a_key_on_an_unparsable_env_line_is_still_scrubbed(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("LABKIT_MODE=offline\nLABKIT_API_KEY local-server-secret-4711\n")
    monkeypatch.setenv("LABKIT_ENV_FILE", str(tmp_path / ".env"))
    assert redact("the server said local-server-secret-4711") == "the server said [redacted]"
    with pytest.raises(UserError, match="line 2") as caught:
        load_settings()
    assert not any("local-server-secret-4711" in t for t in error_texts(caught.value))


@pytest.mark.parametrize(
    "make_error",
    [
        lambda key: UserError(f"bad setting near {key}"),
        lambda key: ServiceError(f"a proxy echoed {key}", 502),
        lambda key: ToolError(f"lookup of {key} failed", "not_found"),
        lambda key: LabkitError("two", f"arguments: {key}"),
    ],
    ids=["UserError", "ServiceError", "ToolError", "LabkitError"],
)
def test_labkit_errors_hold_no_configured_key_in_their_args(planted, make_error):
    assert not any(planted in text for text in error_texts(make_error(planted)))


# ---------------------------------------------------------------- live models


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
@pytest.mark.parametrize("fault", ["401", "500", "truncated"])
@pytest.mark.parametrize("key", [KEYS["3 characters"], KEYS["OpenAI-style"]])
def test_no_exception_reachable_from_a_live_error_holds_the_key(cls, fault, key):
    with FakeServer() as server:  # its 401 echoes the key it was sent
        model = cls(base_url=server.url, api_key=key, key_name="LABKIT_API_KEY")
        server.fail_next(fault)
        with pytest.raises(LabkitError) as caught:
            model.respond([user("hi")])
    assert not any(key in text for text in error_texts(caught.value))
    assert caught.value.__context__ is None and caught.value.__cause__ is None


@pytest.mark.parametrize(
    "shell, key",
    [
        ({"LABKIT_MODE": "live", "OPENAI_API_KEY": KEYS["OpenAI-style"]}, KEYS["OpenAI-style"]),
        (
            {
                "LABKIT_MODE": "live",
                "LABKIT_BASE_URL": "http://127.0.0.1:9/v1",
                "LABKIT_API": "chat",
                "LABKIT_API_KEY": KEYS["3 characters"],
            },
            KEYS["3 characters"],
        ),
    ],
    ids=["OpenAI", "local server"],
)
def test_no_labkit_object_shows_the_key_in_vars_or_repr(monkeypatch, shell, key):
    for name, value in shell.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    objects = [
        settings,
        connect(),
        OpenAIEmbedder(settings=settings),
        ChatModel(base_url="http://127.0.0.1:9/v1", api_key=key, key_name="LABKIT_API_KEY"),
    ]
    assert settings.api_key == key  # the key is there, only out of sight
    for thing in objects:
        assert not any(key in text for text in object_texts(thing)), type(thing).__name__


# ---------------------------------------------------------------- credentials in URLs

CREDENTIAL_URLS = [  # a base URL, and what of it must never be printed
    ("http://alice7:pa55w0rd@127.0.0.1:8000/v1", ["alice7", "pa55w0rd"]),
    ("http://T0kenOnly123@127.0.0.1:8000/v1", ["T0kenOnly123"]),
    ("http://u5er:pa/55@127.0.0.1:8000/v1", ["u5er", "pa/55"]),
    ("https://proxy.example/v1?api-key=Qs3cr3tQ&region=eu", ["Qs3cr3tQ", "eu"]),
    ("https://proxy.example/v1?Qs3cr3tQ", ["Qs3cr3tQ"]),
    ("http://127.0.0.1:8000/v1#fr4gment-t0ken", ["fr4gment-t0ken"]),
]


@pytest.mark.parametrize("url, hidden", CREDENTIAL_URLS)
def test_doctor_never_prints_credentials_in_a_url(capsys, url, hidden):
    doctor({"LABKIT_ENV_FILE": "none", "LABKIT_BASE_URL": url, "LABKIT_API": "chat"})
    out = capsys.readouterr().out
    assert "endpoint    LABKIT_BASE_URL" in out and "***" in out
    assert not any(secret in out for secret in hidden), out


@pytest.mark.parametrize(
    "url", ["ftp://alice7:pa55w0rd@host/v1", "http://alice7:pa55w0rd@host/v 1"]
)
def test_a_refused_base_url_is_named_without_its_credentials(capsys, url):
    environ = {"LABKIT_ENV_FILE": "none", "LABKIT_BASE_URL": url, "LABKIT_API": "chat"}
    assert doctor(environ) is False
    out = capsys.readouterr().out
    assert "problem     LABKIT_BASE_URL=" in out and "pa55w0rd" not in out and "alice7" not in out


@pytest.mark.parametrize("cls", [ResponsesModel, ChatModel])
def test_a_live_model_shows_its_url_without_credentials(cls):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = cls(base_url=f"http://alice7:pa55w0rd@127.0.0.1:{port}/v1", api_key="k3y")
    with pytest.raises(ServiceError) as caught:
        model.respond([user("hi")])
    said = [
        describe(model),
        explain(caught.value),
        *object_texts(model),
        *error_texts(caught.value),
    ]
    assert not any("pa55w0rd" in text or "alice7" in text for text in said)


# ---------------------------------------------------------------- the guarded loop


def test_the_guarded_loop_scrubs_configured_keys_from_everything_it_returns(planted):
    @tool
    def show_settings() -> dict:
        """Show the settings file, key and all."""
        return {"line": f"OPENAI_API_KEY={planted}", planted: "a key used as a dict key"}

    model = ScriptedModel(
        [call("show_settings"), call("get_weather", city=planted), say(f"Your key is {planted}.")]
    )
    result = g.run_guarded("What is my key?", model, [show_settings, get_weather])
    assert result.status == "completed"
    assert "refuse secret_in_arguments" in result.trace.text()  # get_weather never ran
    outputs = [repr(result), result.trace.text(), result.trace._repr_html_(), *every_text(result)]
    assert not any(planted in text for text in outputs)
    seen = json.dumps([[m.content for m in s.messages] for s in model.seen])
    assert planted not in seen  # the model never read it either


@pytest.mark.parametrize("error", [RuntimeError, UserError, ServiceError])
def test_errors_out_of_the_guarded_loop_keep_no_configured_key_in_their_chain(planted, error):
    class Failing:
        def respond(self, messages, tools):
            raise error(f"the proxy said: {planted}")

    def watch(line):  # a ServiceError from a model is a stop; from a callback, it is raised
        raise error(f"the proxy said: {planted}")

    model = ScriptedModel([say("hi")]) if error is ServiceError else Failing()
    with pytest.raises(LabkitError) as caught:
        g.run_guarded("x", model, [], budget=Budget(watch=watch))
    assert not any(planted in text for text in error_texts(caught.value))
    assert caught.value.__context__ is None


def test_live_models_and_live_embeddings_get_their_client_and_its_key_check_in_one_place():
    settings = load_settings(
        "live", environ={"LABKIT_ENV_FILE": "none", "OPENAI_API_KEY": '"sk-abc"'}
    )
    refused = []
    for make in (
        lambda: openai_client(settings.api_key, key_source=settings.key_source),
        lambda: ResponsesModel(api_key=settings.api_key, key_source=settings.key_source),
        lambda: ChatModel(api_key=settings.api_key, key_source=settings.key_source),
        lambda: OpenAIEmbedder(settings=settings),
    ):
        with pytest.raises(UserError) as caught:
            make()
        refused.append(str(caught.value))
    assert refused == [settings.key_problem()] * 4 and "wrapped in quotes" in refused[0]
    client = openai_client("sk-" + "a" * 40, base_url="http://127.0.0.1:9/v1", timeout=3)
    assert str(client.base_url).startswith("http://127.0.0.1:9/v1") and client.timeout == 3.0


# ---------------------------------------------------------------- labkit.keys on its own


@pytest.mark.parametrize("text", ["sk-...", "SK...", "your_key_here", "YOUR-KEY-HERE", "changeme"])
def test_the_placeholder_of_env_example_is_known_however_it_is_written(text):
    assert is_placeholder(text)


def test_a_key_is_not_a_placeholder():
    assert not is_placeholder(KEYS["OpenAI-style"])


def test_each_key_check_says_what_is_wrong_and_where_to_fix_it():
    assert all(
        "{name}" in problem and "— " in problem and "{fix}" in problem for _, problem in KEY_CHECKS
    )


@pytest.mark.parametrize(
    "key, first",
    [
        (' "sk-abc" ', "spaces"),
        ('"sk a"', "quotes"),
        ("sk- ...", "a space"),
        ("sk-...", "placeholder"),
    ],
)
def test_the_first_problem_in_the_order_of_the_checks_is_the_one_said(key, first):
    assert first in key_problem(key)


def test_scrub_replaces_the_secrets_it_is_given_and_url_credentials():
    assert scrub("token q1w2e3r4t5y6 here", ["q1w2e3r4t5y6"]) == "token [redacted] here"
    assert scrub("https://ana:pw@host/x?token=t1") == "https://***@host/x?token=[redacted]"
