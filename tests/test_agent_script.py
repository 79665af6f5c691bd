"""labkit/agent_script.py through `python -m labkit agent`: offline on its script with stdin fed,
live against the fake model server (and a fake Wikipedia, both on 127.0.0.1), and no key in
anything it prints."""

import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import labkit.__main__ as cli
from labkit import agent_script
from labkit.memory import MemoryStore

from fake_server import FakeServer

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "sk-planted-DO-NOT-LEAK-0123456789abcdefXYZ"


def talk(monkeypatch, capsys, db, *lines):
    """Run the agent with these lines typed, one per prompt; (exit code, stdout, stderr)."""
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    code = cli.main(["agent", "--db", str(db)])
    out, err = capsys.readouterr()
    return code, out, err


def remembered(db):
    with MemoryStore(db) as store:
        return [m.content for m in store.list("me")]


# ---------------------------------------------------------------- offline: a script plays the model


def test_offline_the_script_answers_three_lines_and_says_it_is_a_script(
    monkeypatch, capsys, tmp_path
):
    db = tmp_path / "agent.sqlite3"
    code, out, err = talk(monkeypatch, capsys, db, "How long?", "Who was Ada?", "yes", "Hi", "yes")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        agent_script.OFFLINE,
        'you>   ran days_between({"start": "2026-01-01", "end": "2026-12-25"})',
        'agent> {"days": 358}',
        "you> Allow wikipedia_summary (high risk)?",
        '  title: "Ada Lovelace"',
        "  it sends data off the machine, to: a place no argument names",
        "(yes/no) agent> offline: no request was sent (LABKIT_MODE=live sends it)",
        "you> May I remember this about you: 'My name is Ada.'? (yes/no)   ran "
        'remember({"id": "name", "content": "My name is Ada.", "kind": "fac...)',
        'agent> {"status": "created", "id": "name", "message": "remembered"}',
        "That was the whole script.",
    ]
    assert remembered(db) == ["My name is Ada."]


def test_offline_a_no_keeps_the_request_and_the_memory_from_happening(
    monkeypatch, capsys, tmp_path
):
    db = tmp_path / "agent.sqlite3"
    code, out, _ = talk(monkeypatch, capsys, db, "a", "b", "no", "c", "sure")
    assert code == 0 and "wikipedia_summary was not run" in out and "ran wikipedia" not in out
    assert "ran remember" not in out and remembered(db) == []  # only an explicit yes approves


def test_an_empty_line_ends_the_conversation(monkeypatch, capsys, tmp_path):
    code, out, _ = talk(monkeypatch, capsys, tmp_path / "agent.sqlite3", "", "never read")
    assert code == 0 and out.splitlines() == [agent_script.OFFLINE, "you> "]


def test_python_m_labkit_agent_runs_in_a_terminal(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "agent", "--db", str(tmp_path / "agent.sqlite3")],
        input="How long?\n\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("offline: a scripted model plays the agent")
    assert 'agent> {"days": 358}' in done.stdout


# ---------------------------------------------------------------- live: the fake server plays it


class _Wikipedia(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.paths.append(self.path)
        body = json.dumps({"title": "Paris", "extract": "Paris is the capital of France."})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


@pytest.fixture
def live(monkeypatch):
    """The fake model server (it calls the first tool offered: wikipedia_summary) and a fake
    Wikipedia, both on 127.0.0.1; a key planted for the model server."""
    wikipedia = ThreadingHTTPServer(("127.0.0.1", 0), _Wikipedia)
    wikipedia.paths = []
    threading.Thread(target=wikipedia.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setattr(
        agent_script, "SUMMARY_URL", f"http://127.0.0.1:{wikipedia.server_address[1]}/summary/"
    )
    with FakeServer() as server:
        for name, value in {
            "LABKIT_MODE": "live",
            "LABKIT_BASE_URL": server.url,
            "LABKIT_API": "chat",
            "LABKIT_API_KEY": PLANTED,
        }.items():
            monkeypatch.setenv(name, value)
        yield server, wikipedia.paths
    wikipedia.shutdown()
    wikipedia.server_close()


def test_live_the_http_tool_runs_after_a_yes_and_the_model_reads_its_result(
    live, monkeypatch, capsys, tmp_path
):
    server, fetched = live
    code, out, err = talk(monkeypatch, capsys, tmp_path / "a.sqlite3", "About Paris?", "yes")
    assert (code, err) == (0, "") and fetched == ["/summary/Paris"]
    assert out.startswith("live: ") and "(Chat Completions API)" in out.splitlines()[0]
    assert 'ran wikipedia_summary({"title": "Paris"})' in out
    assert "Paris is the capital of France." in out.splitlines()[-2]  # the model's answer
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {PLANTED}"  # it was used
    assert PLANTED not in out and PLANTED[:16] not in out


def test_live_without_a_yes_no_request_leaves_the_machine(live, monkeypatch, capsys, tmp_path):
    _, fetched = live
    code, out, _ = talk(monkeypatch, capsys, tmp_path / "a.sqlite3", "About Paris?", "ok")
    assert code == 0 and fetched == [] and "wikipedia_summary was not run" in out


def test_live_a_rejected_key_is_one_line_without_the_key(live, monkeypatch, capsys, tmp_path):
    server, _ = live
    server.fail_next("401")  # the fake 401 echoes the whole key back
    code, out, err = talk(monkeypatch, capsys, tmp_path / "a.sqlite3", "About Paris?")
    assert code == 2 and err.startswith("error: 401") and err.count("\n") == 1
    assert PLANTED not in out + err and PLANTED[:16] not in out + err
