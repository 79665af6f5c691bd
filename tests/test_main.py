"""labkit.__main__: `python -m labkit memory ...`, one line per
problem."""

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import labkit.__main__ as cli
from labkit import UserError
from labkit.memory import ManualClock, MemoryStore, Refused

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def clock():
    return ManualClock()


# ---------------------------------------------------------------- the command line

ENTRY_POINTS = {
    "python -m labkit memory": ["-m", "labkit", "memory"],
}


def run_cli(*args, db, entry="python -m labkit memory"):
    result = subprocess.run(
        [sys.executable, *ENTRY_POINTS[entry], *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    return result.returncode, result.stdout, result.stderr


def test_the_command_line_writes_once_and_names_its_help(tmp_path):
    db = tmp_path / "cli.sqlite3"
    runs = [run_cli("set", "Prefers tea", "--id", "drink", db=db) for _ in range(2)]
    assert runs == [
        (0, "created drink: remembered\n", ""),
        (0, "unchanged drink: already stored; its TTL starts again\n", ""),
    ]
    code, _, err = run_cli("list", "--bogus", db=db)
    assert code == 2 and "see python -m labkit memory --help" in err


@pytest.mark.parametrize(
    "module, command", [("labkit.memory", "memory"), ("labkit.evals", "evals")]
)
def test_running_a_lesson_module_names_the_command_line(module, command):
    """python -m labkit.memory is not the command line (memory cannot import labkit/__main__.py,
    which imports it): it says which command is."""
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and not done.stdout
    assert f"command line is python -m labkit {command} " in done.stderr


def test_the_top_level_command_line_names_its_commands():
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "invalid choice: 'nope'" in done.stderr
    assert done.stderr.count("\n") == 1 and "see python -m labkit --help" in done.stderr


def test_the_command_line_sets_lists_deletes_and_exports(tmp_path):
    db = tmp_path / "cli.sqlite3"
    assert run_cli("set", "Prefers metric units", "--id", "units", db=db)[:2] == (
        0,
        "created units: remembered\n",
    )
    code, out, _ = run_cli("set", "Prefers imperial units", "--id", "units", db=db)
    assert code == 0 and out.startswith("replaced units: replaced 'Prefers metric units'")
    code, out, _ = run_cli("list", db=db)
    assert out == (
        "units  preference  'Prefers imperial units'  importance 0.5, expires in 90 days\n"
        "1 memory for tenant 'me'\n"
    )
    code, out, _ = run_cli("export", db=db)
    data = json.loads(out)
    assert data["memories"][0]["history"][0]["content"] == "Prefers metric units"
    assert run_cli("list", "--tenant", "bob", db=db)[1] == "0 memories for tenant 'bob'\n"
    assert run_cli("delete", "units", db=db)[:2] == (0, "deleted units\n")
    assert run_cli("list", db=db)[1] == "0 memories for tenant 'me'\n"


def test_the_command_line_gives_the_library_errors(tmp_path, clock):
    db = tmp_path / "cli.sqlite3"
    with MemoryStore(":memory:", clock=clock) as store:
        with pytest.raises(Refused) as library:
            store.write("me", "x", confirmed=True, ttl_days=0)
        with pytest.raises(UserError) as missing:
            store.delete("me", "nope")
    code, out, err = run_cli("set", "x", "--ttl-days", "0", db=db)
    assert (code, out, err) == (2, "", f"error: {library.value}\n")
    code, out, err = run_cli("delete", "nope", db=db)
    assert (code, err) == (2, f"error: {missing.value}\n")
    code, _, err = run_cli("set", "x", "--kind", "mood", db=db)
    assert code == 2 and "kind 'mood' is unknown — use one of preference" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("folder", ["notebooks", "elsewhere"])  # e.g. a Jupyter terminal
def test_the_default_store_is_in_the_repository_root_from_any_folder(folder, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks" if folder == "notebooks" else tmp_path)
    assert cli.memory_parser().parse_args(["list"]).db == str(ROOT / ".runtime" / "memory.sqlite3")


def test_the_command_line_uses_its_default_store_and_says_where_it_is(
    tmp_path, monkeypatch, capsys
):
    with pytest.raises(SystemExit):
        cli.memory_main(["list", "--help"])
    assert "in the repository root, whatever folder you run from" in " ".join(
        capsys.readouterr().out.split()
    )
    # main() uses that default (pointed at tmp_path here, so the test leaves the real store alone)
    monkeypatch.setattr(cli, "CLI_PATH", tmp_path / ".runtime" / "memory.sqlite3")
    assert cli.memory_main(["set", "Prefers tea", "--id", "drink"]) == 0
    assert (tmp_path / ".runtime" / "memory.sqlite3").is_file()
    assert "created drink" in capsys.readouterr().out


def run_raw(*args):
    """The command line with raw arguments (bytes too, as a shell passes them): code, out, err."""
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "memory", *args], capture_output=True, timeout=60, cwd=ROOT
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def another_programs_database(path):
    sqlite3.connect(path).execute("CREATE TABLE operations (operation_id TEXT)").connection.commit()
    return path


CLI_PROBLEMS = {  # case: (arguments given tmp_path, what the one line must say)
    "a file that is not a database": (
        lambda t: ["list", "--db", write(t / "notes.txt", "hello")],
        "not a SQLite database",
    ),
    "a folder": (lambda t: ["list", "--db", t], "is a folder, not a file"),
    "/dev/null": (lambda t: ["list", "--db", "/dev/null"], "not a regular file"),
    "a folder that does not exist": (
        lambda t: ["list", "--db", t / "typo" / "memory.sqlite3"],
        "does not exist",
    ),
    "a file where the folder should be": (
        lambda t: ["list", "--db", write(t / "f", "x") / "m.db"],
        "is not a folder",
    ),
    "another program's database": (
        lambda t: ["list", "--db", another_programs_database(t / "r")],
        "SQLite database of something else",
    ),
    "a name too long": (lambda t: ["list", "--db", t / ("x" * 5000)], "cannot be used"),
    "bad bytes in the content": (
        lambda t: [b"set", b"caf\xe9", b"--db", t / "m.sqlite3"],
        "UTF-8 cannot encode",
    ),
    "bad bytes in the tenant": (
        lambda t: [b"list", b"--tenant", b"\xff", b"--db", t / "m.sqlite3"],
        "tenant holds",
    ),
    "bad bytes in an id": (lambda t: [b"delete", b"\xff", b"--db", t / "m.sqlite3"], "id holds"),
    "bad bytes as the command": (lambda t: [b"\xff"], "invalid choice"),
    "a missing argument": (lambda t: ["set", "--db", t / "m.sqlite3"], "required: content"),
}


def write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", CLI_PROBLEMS)
def test_the_command_line_explains_every_problem_in_one_line_never_a_traceback(tmp_path, case):
    arguments, says = CLI_PROBLEMS[case]
    arguments = arguments(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run_raw(*arguments)
    assert "Traceback" not in err
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert " — " in err and says in err  # what is wrong — what to do
    assert sorted(tmp_path.rglob("*")) == before  # no folder, no store made on the way


def test_a_refused_database_of_another_program_is_left_unchanged(tmp_path):
    path = another_programs_database(tmp_path / "runtime.db")
    run_raw("set", "Prefers tea", "--db", path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    assert tables.fetchall() == [("operations",)]


def test_the_command_line_says_when_it_cannot_create_the_default_folder(tmp_path):
    default = write(tmp_path / "file", "x") / ".runtime" / "memory.sqlite3"  # under a file
    script = (
        "import sys; from pathlib import Path; import labkit.__main__ as cli; "
        f"cli.CLI_PATH = Path({str(default)!r}); sys.exit(cli.memory_main(['list']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert (done.returncode, done.stdout) == (2, "") and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "cannot create the folder" in done.stderr
    assert "pass --db" in done.stderr


# A stand-in for llama.cpp's server: answers /v1/models and, like it mid-generation, ignores
# SIGTERM. The port comes from the test.
STUBBORN_SERVER = """
import http.server, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Models).serve_forever()
"""


def test_the_local_server_is_stopped_even_when_it_ignores_sigterm(monkeypatch):
    import socket

    monkeypatch.setattr(cli, "STOP_GRACE", 0.5)  # the same path as 10 s, without the wait
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-c", STUBBORN_SERVER, str(port)]
    with cli.local_server(port, wait=30, command=command) as server:
        assert server.poll() is None and cli._answers(port)
    assert server.poll() is not None  # killed after the grace period, not left running
    assert not cli._answers(port)


CHATTY_SERVER = """
import http.server, sys, threading
for n in range(2100):  # what llama.cpp prints while it loads a model
    print(f"llama_model_loader: - kv {n}", file=sys.stderr if n % 2 else sys.stdout)
class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Models)
threading.Timer(1.5, server.shutdown).start()  # then it exits, as if Ctrl+C had stopped it
server.serve_forever()
"""


def test_make_local_model_prints_where_it_serves_and_keeps_the_logs_in_a_file(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "local-model.log"
    command = [sys.executable, "-c", CHATTY_SERVER, str(port)]
    assert cli.local_model_main(["--port", str(port)], command=command, log=log) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[0].startswith("starting SmolLM2-135M-Instruct")
    assert printed[1].startswith(f"serving on http://127.0.0.1:{port}/v1 (Ctrl+C stops it).")
    assert "LABKIT_PROVIDER=local" in printed[1]
    assert log.read_text().count("llama_model_loader") == 2100
