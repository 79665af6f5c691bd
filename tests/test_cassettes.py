"""labkit.cassettes: record a live run through the real SDK (fake server on 127.0.0.1), replay it
offline, stop at the first request that differs, and never write a key into a cassette."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import ScriptedModel, UserError, connect, describe, explain, run, say, user
from labkit.cassettes import Replayer, canonical_request, load, request_fingerprint
from labkit.models import collect
from labkit.toolbox import calculate, get_weather

from fake_server import FakeServer

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "execute_notebooks", ROOT / ".ci" / "execute_notebooks.py"
)
execute_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_notebooks)

SHELL_KEY = "sk-planted-shell-key-0123456789abcdefABCD"
FILE_KEY = "sk-planted-dotenv-key-9876543210zyxwvuQRST"
TASK = "What is the weather in Paris?"


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def recording(server, tmp_path, monkeypatch):
    """A live setup aimed at the fake server that records into tmp_path; keys planted in the
    shell (the key for this server) and in .env (an OpenAI key that must stay home)."""
    env_file = tmp_path / ".env"
    env_file.write_text(f"OPENAI_API_KEY={FILE_KEY}\n")
    for name, value in {
        "LABKIT_ENV_FILE": str(env_file),
        "LABKIT_MODE": "record",
        "LABKIT_BASE_URL": server.url,
        "LABKIT_API": "chat",
        "LABKIT_API_KEY": SHELL_KEY,
        "OPENAI_MODEL": "tiny-test-model",
        "LABKIT_CASSETTE_DIR": str(tmp_path),
    }.items():
        monkeypatch.setenv(name, value)
    return tmp_path


def record_run(name, task=TASK):
    model = connect(cassette=name)
    return run(task, model, [get_weather, calculate], max_turns=4)


def test_record_then_replay_gives_the_same_run(recording, monkeypatch):
    live = record_run("weather")
    monkeypatch.setenv("LABKIT_MODE", "replay")
    replayed = record_run("weather")
    assert live.turns == 2 and live.tool_calls == 1  # the fake server called the tool once
    assert (replayed.status, replayed.answer, replayed.turns) == (live.status, live.answer, 2)
    assert [m.content for m in replayed.messages] == [m.content for m in live.messages]
    assert replayed.usage == live.usage  # recorded usage, not an estimate


def test_a_cassette_is_readable_json_lines_with_a_label(recording):
    record_run("weather")
    header, *entries = [json.loads(line) for line in (recording / "weather.jsonl").open()]
    assert header["model"] == "tiny-test-model" and header["api"] == "chat"
    assert header["provider"] == "custom" and len(header["date"]) == 10
    assert [
        e["reply"]["tool_calls"][0][1] if e["reply"]["tool_calls"] else e["reply"]["text"][:4]
        for e in entries
    ] == ["get_weather", "fake"]
    assert entries[1]["raw"]["object"] == "chat.completion"  # the JSON the SDK returned


def test_no_key_reaches_a_cassette(recording, server):
    model = connect(cassette="secrets")
    model.respond([user(f"my key is {SHELL_KEY} and the other {FILE_KEY}")])
    text = (recording / "secrets.jsonl").read_text()
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {SHELL_KEY}"  # it was sent
    assert SHELL_KEY not in text and FILE_KEY not in text
    assert SHELL_KEY[:16] not in text and "authorization" not in text.lower()
    assert "[redacted]" in text  # the pasted keys were scrubbed, not dropped


def test_replay_names_the_first_message_that_differs(recording, monkeypatch):
    record_run("weather")
    monkeypatch.setenv("LABKIT_MODE", "replay")
    with pytest.raises(UserError) as caught:
        record_run("weather", task="What is the weather in Rome?")
    line = explain(caught.value)
    assert "cassette weather, request 1: message 2 (user)" in line
    assert "character 24: recorded 'Paris?', now 'Rome?'" in line
    assert "make cassettes NB=notebooks/weather.ipynb" in line


def test_replay_stops_when_asked_for_more_than_was_recorded(recording, monkeypatch):
    connect(cassette="one").respond([user("ping")])
    monkeypatch.setenv("LABKIT_MODE", "replay")
    model = connect(cassette="one")
    model.respond([user("ping")])
    with pytest.raises(UserError, match="holds 1 replies and was asked for one more"):
        model.respond([user("ping"), user("again")])


def test_a_cell_run_again_replays_from_its_first_request(recording, monkeypatch):
    record_run("weather")
    monkeypatch.setenv("LABKIT_MODE", "replay")
    first, again = record_run("weather"), record_run("weather")
    assert first.answer == again.answer and again.status == "completed"


def test_replay_is_labelled_and_streams_the_recorded_words(recording, monkeypatch):
    connect(cassette="ping").respond([user("ping")])
    monkeypatch.setenv("LABKIT_MODE", "replay")
    model = connect(cassette="ping")
    assert describe(model).startswith("replay: replaying a recording of tiny-test-model (http://")
    reply = collect(model.stream([user("ping")]))
    assert reply.text == "fake model heard: ping"


def test_replay_without_a_cassette_stays_scripted_and_a_missing_one_says_how_to_record(
    recording, monkeypatch
):
    monkeypatch.setenv("LABKIT_MODE", "replay")
    assert connect(script=[say("pong")]).respond([user("ping")]).text == "pong"
    with pytest.raises(UserError, match="no cassette 09_mcp .*make cassettes NB=notebooks/09_mcp"):
        connect(cassette="09_mcp")


def test_the_fingerprint_changes_with_anything_the_model_would_see():
    base = canonical_request([user("ping")], [get_weather])
    assert request_fingerprint(base) == request_fingerprint(
        canonical_request([user("ping")], [get_weather])
    )
    for changed in (
        canonical_request([user("ping ")], [get_weather]),
        canonical_request([user("ping")], [calculate]),
        canonical_request([user("ping")], [get_weather], max_output_tokens=50),
    ):
        assert request_fingerprint(changed) != request_fingerprint(base)


def test_a_damaged_cassette_is_refused_clearly(tmp_path):
    (tmp_path / "bad.jsonl").write_text("not json\n")
    with pytest.raises(UserError, match="not a labkit cassette"):
        load(tmp_path / "bad.jsonl")
    with pytest.raises(UserError, match="not a labkit cassette"):
        Replayer(tmp_path / "bad.jsonl")


DAMAGED = {
    "a truncated line": '{"cassette": 1}\n{"reply": {"text": "po',
    "a header only": None,  # loads; asking it for a reply says it holds none
    "binary": b"\x00\xff\xfe\x80",
    "deep nesting": '{"cassette": 1}\n' + "[" * 100_000 + "]" * 100_000,
    "a line that is not an object": '{"cassette": 1}\n3',
    "a reply of the wrong type": '{"cassette": 1}\n'
    '{"fingerprint": "f", "request": [], "reply": {"text": 5}}',
    "usage as text": '{"cassette": 1}\n'
    '{"fingerprint": "f", "request": [], "reply": {"usage": ["3", 1, 4]}}',
    "no fingerprint": '{"cassette": 1}\n{"request": [], "reply": {}}',
    "an error that is not [kind, message]": '{"cassette": 1}\n'
    '{"fingerprint": "f", "request": [], "error": "boom"}',
}


@pytest.mark.parametrize("case", DAMAGED)
def test_every_damaged_cassette_ends_in_one_line_saying_how_to_record_it(case, tmp_path):
    path = tmp_path / "09_mcp.jsonl"
    data = DAMAGED[case] if DAMAGED[case] is not None else '{"cassette": 1}\n'
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(UserError) as refused:
        Replayer(path).respond([user("ping")])
    message = str(refused.value)
    assert "make cassettes NB=notebooks/09_mcp.ipynb" in message
    assert len(message.splitlines()) == 1


def test_a_recorded_guarded_run_keeps_none_of_what_the_run_redacts(tmp_path, monkeypatch):
    from labkit.cassettes import Recorder
    from labkit.guardrails import run_guarded

    token, secret = "ghp_" + "t0k3n" * 8, "hunter-correct-horse"
    monkeypatch.setenv("DEPLOY_GITHUB_TOKEN", token)
    url = "https://api.example.com/items?api_key=k9k9k9k9k9k9&page=2"
    model = ScriptedModel([say(f"Fetched {url} with {token} and {secret}.")])
    path = tmp_path / "guarded.jsonl"
    header = {"cassette": 1, "model": "m", "server": "s", "date": "d"}
    result = run_guarded(f"Fetch {url}, key {secret}", Recorder(model, path, header), [],
                         secrets=[secret])  # fmt: skip
    written = path.read_text(encoding="utf-8")
    for value in (token, secret, "k9k9k9k9k9k9"):
        assert value not in written
        assert value not in result.answer
    assert "api_key=[redacted]" in written


def test_a_failed_live_call_is_recorded_and_replays_as_the_same_error(
    recording, server, monkeypatch
):
    from labkit import ServiceError

    server.fail_next("500")
    with pytest.raises(ServiceError) as live:
        connect(cassette="failing").respond([user("ping")])
    monkeypatch.setenv("LABKIT_MODE", "replay")
    with pytest.raises(ServiceError) as replayed:
        connect(cassette="failing").respond([user("ping")])
    assert str(replayed.value) == str(live.value) and "500 server error" in str(live.value)


def _notebook_text(path):
    """Each code cell's printed text, without the line saying which model answered."""
    import nbformat

    cells = nbformat.read(path, as_version=4).cells
    said = [
        "\n".join(str(o.get("text", o.get("data", {}))) for o in c.outputs)
        for c in cells
        if c.cell_type == "code"
    ]
    return [re.sub(r"(?m)^(live|replay): .*$", "", text) for text in said]


def test_a_notebook_recorded_live_replays_under_strict_nbval(tmp_path):
    """04_loop recorded against the fake server, then executed in replay mode: its outputs match
    the live run's exactly (only the line naming the model differs), and strict nbval re-running
    it in replay mode passes: the recorded model's words are a regression test."""
    import shutil

    from offline_env import offline_environ

    tapes, live_copy, replay_copy = tmp_path / "cassettes", tmp_path / "live", tmp_path / "replay"
    for folder in (tapes, live_copy, replay_copy):
        folder.mkdir()
    source = ROOT / "notebooks" / "04_loop.ipynb"
    for folder in (live_copy, replay_copy):
        shutil.copy(source, folder / source.name)
    replay_env = {**offline_environ(), "LABKIT_MODE": "replay", "LABKIT_CASSETTE_DIR": str(tapes)}
    with FakeServer() as server:
        record_env = {
            **replay_env,
            "LABKIT_MODE": "record",
            "LABKIT_BASE_URL": server.url,
            "LABKIT_API": "chat",
            "OPENAI_MODEL": "tiny-test-model",
        }
        execute_notebooks.execute(live_copy / source.name, record_env)
        assert server.requests, "record mode sent nothing to the server"
    assert (tapes / "04_loop.jsonl").is_file()
    execute_notebooks.execute(replay_copy / source.name, replay_env)
    replayed = (replay_copy / source.name).read_text()
    assert "replay: replaying a recording of tiny-test-model" in replayed  # not the script
    assert _notebook_text(replay_copy / source.name) == _notebook_text(live_copy / source.name)
    nbval = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--nbval-sanitize-with",
            str(ROOT / "tests" / "sanitize.cfg"),
            str(replay_copy),
        ],
        cwd=ROOT,
        env=replay_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert nbval.returncode == 0, nbval.stdout[-3000:]
    assert " passed" in nbval.stdout.splitlines()[-1]


def test_the_committed_cassettes_hold_no_secret():
    """Every cassette in data/cassettes: a labkit cassette, nothing key-like, no header sent."""
    tapes = sorted((ROOT / "data" / "cassettes").glob("*.jsonl"))
    assert tapes, "no committed cassette"
    for tape in tapes:
        text = tape.read_text(encoding="utf-8")
        assert load(tape).header["model"]
        assert not re.search(r"sk-[A-Za-z0-9_\-]{8,}|Bearer\s|authorization", text, re.I), tape


# ---------------------------------------------------------------- tool_choice

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def test_auto_leaves_the_fingerprint_as_it_was_before_tool_choice():
    request = canonical_request(
        [user("What is the weather in Paris?")], [WEATHER], tool_choice="auto"
    )
    assert "tool_choice" not in request
    assert request_fingerprint(request) == "sha256:8189f1f455660d6a"  # as labkit computed it before


@pytest.mark.parametrize("choice", ["required", "none", "get_weather"])
def test_a_tool_choice_is_part_of_the_fingerprint(choice):
    auto = request_fingerprint(canonical_request([user("ping")], [WEATHER]))
    assert (
        request_fingerprint(canonical_request([user("ping")], [WEATHER], tool_choice=choice))
        != auto
    )


def test_a_forced_run_records_and_replays_and_a_changed_choice_stops_replay(recording, monkeypatch):
    live = run(TASK, connect(cassette="forced"), [get_weather], tool_choice="required-first")
    entries = load(recording / "forced.jsonl").entries
    assert live.completed == ['get_weather({"city": "Paris"})'] and len(entries) == 2
    monkeypatch.setenv("LABKIT_MODE", "replay")
    replayed = run(TASK, connect(cassette="forced"), [get_weather], tool_choice="required-first")
    assert (replayed.answer, replayed.turns) == (live.answer, 2)
    with pytest.raises(UserError, match="the output schema or the tool_choice differ"):
        run(TASK, connect(cassette="forced"), [get_weather], tool_choice="none")


def test_a_bad_tool_choice_is_refused_and_never_recorded(recording, monkeypatch):
    model = connect(cassette="bad")
    with pytest.raises(UserError, match="'always' is not allowed"):
        model.respond([user("ping")], [get_weather], tool_choice="always")
    assert load(recording / "bad.jsonl").entries == []
    model.respond([user("ping")])
    monkeypatch.setenv("LABKIT_MODE", "replay")
    with pytest.raises(UserError, match="'always' is not allowed"):
        connect(cassette="bad").respond([user("ping")], [get_weather], tool_choice="always")
