"""Provider presets (LABKIT_PROVIDER) and the endpoint probe, through the real openai SDK against
fake servers on 127.0.0.1: each key reaches only its own preset's endpoint."""

import dataclasses
import json
import socket

import pytest

from labkit import (
    ServiceError,
    UserError,
    config,
    connect,
    doctor,
    explain,
    load_settings,
    probe,
    redact,
    user,
)
from labkit.probe import recommend

from fake_server import FakeServer

# The presets as the README documents them: name -> (base URL, API, key variable)
DOCUMENTED = {
    "openai": ("https://api.openai.com/v1", "responses", "OPENAI_API_KEY"),
    "local": ("http://127.0.0.1:8011/v1", "chat", "LABKIT_API_KEY"),
    "ollama": ("http://127.0.0.1:11434/v1", "chat", "LABKIT_API_KEY"),
    "vllm": ("http://127.0.0.1:8000/v1", "chat", "LABKIT_API_KEY"),
    "lmstudio": ("http://127.0.0.1:1234/v1", "chat", "LABKIT_API_KEY"),
    "llamacpp": ("http://127.0.0.1:8080/v1", "chat", "LABKIT_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "chat", "DEEPSEEK_API_KEY"),
    "dashscope": ("https://dashscope.aliyuncs.com/compatible-mode/v1", "chat", "DASHSCOPE_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "chat", "OPENROUTER_API_KEY"),
}
KEYS = {  # one planted key per variable
    "OPENAI_API_KEY": "sk-planted-openai-0123456789abcdefghij",
    "LABKIT_API_KEY": "planted-labkit-key-0123456789abcdefgh",
    "DEEPSEEK_API_KEY": "sk-planted-deepseek-0123456789abcdefg",
    "DASHSCOPE_API_KEY": "sk-planted-dashscope-0123456789abcdef",
    "OPENROUTER_API_KEY": "sk-or-planted-openrouter-0123456789ab",
}


def environ(**settings):
    return {"LABKIT_ENV_FILE": "none", **settings}


@pytest.mark.parametrize("name", DOCUMENTED)
def test_a_preset_sets_the_url_the_api_and_the_key_variable(name):
    s = load_settings(environ=environ(LABKIT_PROVIDER=name.upper(), **KEYS))
    assert (s.base_url, s.api, s.key_name) == DOCUMENTED[name]
    assert s.provider == name and s.api_key == KEYS[s.key_name]


@pytest.mark.parametrize(
    "settings, seconds",
    [
        ({"LABKIT_PROVIDER": "local"}, 300.0),  # a tiny model on 2 shared cores is slow
        ({"LABKIT_PROVIDER": "local", "LABKIT_TIMEOUT": "45"}, 45.0),  # the setting still wins
        ({"LABKIT_PROVIDER": "openai"}, 30.0),
        ({}, 30.0),
    ],
)
def test_the_local_preset_waits_longer_for_a_reply(settings, seconds):
    assert load_settings(environ=environ(**settings)).timeout == seconds


def test_every_preset_is_documented():
    assert set(config.PROVIDERS) == set(DOCUMENTED)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def at_the_fake_server(server, monkeypatch):
    """Point every preset at the fake server, as if it were each endpoint."""
    for name, preset in config.PROVIDERS.items():
        monkeypatch.setitem(
            config.PROVIDERS, name, dataclasses.replace(preset, base_url=server.url, model="m")
        )
    for name, key in KEYS.items():
        monkeypatch.setenv(name, key)
    monkeypatch.setenv("LABKIT_MODE", "live")
    return server


@pytest.mark.parametrize("name", [n for n in DOCUMENTED if n != "openai"])
def test_a_key_is_sent_only_to_its_own_preset(at_the_fake_server, monkeypatch, name):
    monkeypatch.setenv("LABKIT_PROVIDER", name)
    connect().respond([user("ping")])
    (request,) = at_the_fake_server.requests
    own = KEYS[DOCUMENTED[name][2]]
    assert request["headers"]["authorization"] == f"Bearer {own}"
    sent = json.dumps(request)
    assert [k for k in KEYS.values() if k in sent] == [own]


def test_a_preset_with_another_url_gets_only_labkit_api_key(at_the_fake_server, monkeypatch):
    with FakeServer() as elsewhere:
        monkeypatch.setenv("LABKIT_PROVIDER", "deepseek")
        monkeypatch.setenv("LABKIT_BASE_URL", elsewhere.url)
        connect().respond([user("ping")])
        (request,) = elsewhere.requests
    assert request["headers"]["authorization"] == f"Bearer {KEYS['LABKIT_API_KEY']}"
    assert KEYS["DEEPSEEK_API_KEY"] not in json.dumps(request)


@pytest.mark.parametrize(
    "provider, asked, sent",
    [
        ("local", None, 512),  # a tiny model may ramble until its context is full
        ("local", 64, 64),  # connect's own cap wins
        ("ollama", None, None),  # no preset cap: the request carries none
    ],
)
def test_the_local_preset_caps_each_reply(at_the_fake_server, monkeypatch, provider, asked, sent):
    monkeypatch.setenv("LABKIT_PROVIDER", provider)
    connect(max_output_tokens=asked).respond([user("ping")])
    body = at_the_fake_server.requests[0]["body"]
    assert body.get("max_tokens") == sent  # Chat off OpenAI: the cap is sent as max_tokens


def test_a_local_preset_without_a_key_sends_no_key_at_all(at_the_fake_server, monkeypatch):
    monkeypatch.setenv("LABKIT_PROVIDER", "local")
    monkeypatch.delenv("LABKIT_API_KEY")
    connect().respond([user("ping")])
    sent = json.dumps(at_the_fake_server.requests[0])
    assert not [k for k in KEYS.values() if k in sent]


def free_port():
    with socket.socket() as probe_socket:  # a port that nothing listens on
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


@pytest.mark.parametrize(
    "settings, fix, not_said",
    [
        ({"LABKIT_PROVIDER": "local"}, "start it with `make local-model`", "LABKIT_BASE_URL"),
        ({"LABKIT_PROVIDER": "ollama", "OPENAI_MODEL": "m"}, "is Ollama running", "BASE_URL"),
        ({"LABKIT_BASE_URL": "{url}", "LABKIT_API": "chat"}, "LABKIT_BASE_URL", "make"),
    ],
    ids=["local model not started", "ollama not started", "a server of your own"],
)
def test_nothing_serving_names_what_to_start(monkeypatch, settings, fix, not_said):
    ports = {}
    for name in ("local", "ollama"):  # as if nothing served on the presets' own ports
        ports[name] = url = f"http://127.0.0.1:{free_port()}/v1"
        preset = config.PROVIDERS[name]
        monkeypatch.setitem(config.PROVIDERS, name, dataclasses.replace(preset, base_url=url))
    url = ports.get(settings.get("LABKIT_PROVIDER"), f"http://127.0.0.1:{free_port()}/v1")
    for name, value in {"LABKIT_MODE": "live", **settings}.items():
        monkeypatch.setenv(name, value.format(url=url))
    with pytest.raises(ServiceError) as caught:
        connect().respond([user("ping")])
    line = explain(caught.value)
    assert line.startswith(f"connection failed: could not reach {url} — ") and fix in line
    assert not_said not in line


@pytest.mark.parametrize(
    "fault, said, key",
    [
        ("403_page", "answered with a web page, not the API (no key was sent)", None),
        ("403", "refused a request sent with no key", None),
        ("403_page", "answered with a web page, not the API — a proxy", KEYS["LABKIT_API_KEY"]),
        ("403", "this key may not use model 'm'", KEYS["LABKIT_API_KEY"]),
    ],
    ids=["a page, no key", "JSON, no key", "a page, a key", "JSON, a key"],
)
def test_a_403_blames_a_key_only_when_one_was_sent(
    at_the_fake_server, monkeypatch, fault, said, key
):
    monkeypatch.setenv("LABKIT_PROVIDER", "local")
    if key is None:
        monkeypatch.delenv("LABKIT_API_KEY")
    at_the_fake_server.fail_next(fault)
    with pytest.raises(UserError) as caught:
        connect().respond([user("ping")])
    assert said in explain(caught.value)
    assert ("key may not" in explain(caught.value)) == (fault == "403" and key is not None)


def test_the_probe_without_a_key_says_so_and_sends_nothing(capsys):
    assert probe(environ(LABKIT_MODE="live")) == {}
    assert capsys.readouterr().out == (
        "probe cannot start: OPENAI_API_KEY is not set — put OPENAI_API_KEY=sk-... in .env "
        "(copy .env.example), then restart the kernel\n"
    )


@pytest.mark.parametrize(
    "settings, words",
    [
        (
            {"LABKIT_PROVIDER": "olama"},
            "LABKIT_PROVIDER='olama' (set in the shell) is not a preset",
        ),
        ({"LABKIT_PROVIDER": "deepseek", "LABKIT_MODE": "live"}, "DEEPSEEK_API_KEY is not set"),
        ({"LABKIT_PROVIDER": "ollama", "LABKIT_MODE": "live"}, "set OPENAI_MODEL"),
    ],
    ids=["unknown preset", "cloud preset, no key", "no default model"],
)
def test_a_preset_problem_is_one_clear_line(monkeypatch, settings, words):
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        connect()


def test_doctor_shows_the_active_preset(capsys):
    doctor(environ(LABKIT_PROVIDER="ollama"))
    assert "endpoint    preset ollama (LABKIT_PROVIDER): http://127.0.0.1:11434/v1, API: chat" in (
        capsys.readouterr().out
    )


def test_a_preset_key_is_scrubbed_like_any_key(monkeypatch):
    monkeypatch.setenv("DASHSCOPE_API_KEY", "ds-0123456789abcdef")
    assert redact("echo ds-0123456789abcdef") == "echo [redacted]"


# ---------------------------------------------------------------- the probe

CAPABLE = {
    "speaks": True,
    "tool_call": True,
    "json_schema": True,
    "usage": True,
    "after_tool": True,
}


@pytest.mark.parametrize(
    "capabilities, responses, chat, use",
    [
        ({}, CAPABLE, CAPABLE, "responses"),
        ({"apis": ("chat",)}, {"speaks": False}, CAPABLE, "chat"),
        ({"loops": True}, {**CAPABLE, "after_tool": False}, CAPABLE, "chat"),
        (
            {"tool_calls": False, "json_schema": False, "usage": False},
            {**CAPABLE, "tool_call": False, "json_schema": False, "usage": False},
            {**CAPABLE, "tool_call": False, "json_schema": False, "usage": False},
            "responses",
        ),
        ({"apis": ()}, {"speaks": False}, {"speaks": False}, ""),
    ],
    ids=["everything", "chat only", "loops on tool outputs", "text only", "neither API"],
)
def test_the_probe_finds_what_a_server_supports(capsys, capabilities, responses, chat, use):
    with FakeServer(**capabilities) as server:
        found = probe(environ(LABKIT_BASE_URL=server.url, LABKIT_API="chat", OPENAI_MODEL="m"))
    assert {c: ok for c, (ok, _) in found["responses"].items()} == responses
    assert {c: ok for c, (ok, _) in found["chat"].items()} == chat
    assert recommend(found) == use
    printed = capsys.readouterr().out
    assert (f"use: LABKIT_API={use}" if use else "neither API answered") in printed


def test_the_probe_names_a_loop_in_its_table(capsys):
    with FakeServer(loops=True) as server:
        probe(environ(LABKIT_BASE_URL=server.url, LABKIT_API="chat", OPENAI_MODEL="m"))
    assert "responses: answers after a tool output: called the tool again: a loop" in (
        capsys.readouterr().out
    )
