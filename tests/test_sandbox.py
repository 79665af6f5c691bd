"""labkit.sandbox: the escape attempts of stage 11, each run with the sandbox on and shown to work
with it off (a bare subprocess in a throwaway folder), so every test here can fail.

Command-level attempts (.., absolute paths, a symlink out, an option that writes a file, a command
off the allowlist, shell syntax) are refused before anything runs, in either mode. Code-level
attempts (the tests the agent runs are arbitrary code) are contained by bwrap; with the rlimits
fallback some of them get out, and test_code_escapes pins exactly which, as the lesson says. No
process is left behind after a run, a timeout or an error in labkit itself, in either mode.
"""

import dataclasses
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.errors import UserError
from labkit.sandbox import Limits, Workspace, bwrap_available
from labkit.swe import REPOS

PANTRY = REPOS / "pantry"
BWRAP = bwrap_available()
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap (bwrap) is not installed/usable")
KEY = "sk-test-escape-0123456789abcdef"


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A throwaway folder outside every workspace, writable by anyone (like /tmp), with a secret."""
    root = tmp_path_factory.mktemp("outside")
    root.chmod(0o777)
    (root / "secret.txt").write_text("s3cret")
    (root / "ws").mkdir()
    return root


@pytest.fixture(scope="module", params=["bwrap", "rlimits"])
def ws(request):
    if request.param == "bwrap" and not BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed/usable")
    with Workspace(PANTRY, request.param, Limits(timeout=20.0)) as w:
        yield w


def lingering(folder: Path, grace: float = 3.0) -> list[int]:
    """Live processes tied to `folder` (seen from outside any namespace): working in it, or with
    it in their environment (every sandboxed command has HOME inside its workspace, and a child
    that moves elsewhere keeps it), after up to `grace` seconds for killed ones to finish dying.
    Zombies are not counted: they run nothing, and their parent reaps them."""
    deadline = time.monotonic() + grace
    while (found := _in(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _in(folder):
    inside, mark = (str(folder), f"{folder}/"), f"={folder}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(proc / "cwd")
            environ = (proc / "environ").read_bytes()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if state in "ZX":
            continue
        if cwd in inside or cwd.startswith(inside[1]) or mark in environ:
            found.append(int(proc.name))
    return found


# ---------------------------------------------------------------- refused before anything runs

COMMANDS = {
    "dot-dot": "cat ../secret.txt",
    "absolute path": "cat {outside}/secret.txt",
    "symlink out": "cat leak.txt",
    "option that writes": "git diff --no-index --output={outside}/pwned.txt README.md README.md",
    "not on the allowlist": "rm -rf {outside}/ws",
    "shell syntax": "ls; cat ../secret.txt",
}


@pytest.mark.parametrize("name", COMMANDS)
def test_command_escape_refused_on_possible_off(name, ws, outside):
    command = COMMANDS[name].format(outside=outside)
    (ws.path / "leak.txt").unlink(missing_ok=True)
    (ws.path / "leak.txt").symlink_to(outside / "secret.txt")
    (outside / "ws" / "leak.txt").unlink(missing_ok=True)
    (outside / "ws" / "leak.txt").symlink_to(outside / "secret.txt")
    (outside / "ws" / "README.md").write_text("x\n")
    on = ws.run(command)
    assert on.refused and on.exit_code is None
    assert not (outside / "pwned.txt").exists() and (outside / "ws").exists()
    # off: the same command, bare, from a folder beside the secret
    off = subprocess.run(
        command if name == "shell syntax" else shlex.split(command),
        shell=name == "shell syntax",
        cwd=outside / "ws",
        capture_output=True,
        text=True,
    )
    escaped = "s3cret" in off.stdout or (outside / "pwned.txt").exists()
    escaped = escaped or not (outside / "ws").exists()
    (outside / "pwned.txt").unlink(missing_ok=True)
    (outside / "ws").mkdir(exist_ok=True)
    assert escaped, off


def test_inside_refuses_a_path_out_with_a_fix():
    with Workspace(PANTRY, "rlimits") as w, pytest.raises(UserError, match="relative to the"):
        w.inside("../../etc/passwd")


# ---------------------------------------------------------------- code the tests run

ATTEMPTS = {  # code the agent could put in a test file; it writes what it got to RESULT
    "key": "got = os.environ.get('OPENAI_API_KEY', '')",
    "home": "got = os.path.expanduser('~')",
    "read outside": "got = open(OUTSIDE + '/secret.txt').read()",
    "write outside": "open(OUTSIDE + '/pwned.txt', 'w').write('x'); got = 'wrote'",
    "network": "socket.create_connection(('127.0.0.1', PORT), timeout=2); got = 'connected'",
    "detach": (  # a child in its own session that outlives the command by a second
        "subprocess.Popen([sys.executable, '-c', DETACHED, RESULT, str(os.getpid())], "
        "start_new_session=True); got = 'spawned'"
    ),
    "memory": "b = bytes(2 << 30); got = 'allocated'",  # calloc: held, zero-filled when touched
    "file size": "open(RESULT + '.big', 'wb').write(b'0' * (64 << 20)); got = 'wrote'",
}
PRELUDE = "import os, socket, subprocess, sys\n"
# subtle: the parent's pid comes as an argument; read here, the parent may have gone already
DETACHED = """import os, sys, time
os.chdir("/")
while os.getppid() == int(sys.argv[2]):
    time.sleep(0.05)
time.sleep(1)
open(sys.argv[1] + ".alive", "w").write("alive")
"""


def escaped(name, got: str, ws_path: Path, outside: Path, result: Path) -> bool:
    """Whether an attempt got out, judged from outside the sandbox."""
    return {
        "key": KEY in got,
        "home": not got.startswith(str(ws_path)),
        "read outside": "s3cret" in got,
        "write outside": (outside / "pwned.txt").exists(),
        "network": got == "connected",
        "detach": Path(f"{result}.alive").exists(),
        "memory": got == "allocated",
        "file size": got == "wrote",
    }[name]


def attempt_file(name, outside, port, result):
    """A test file that makes one attempt and writes what it got to `result`."""
    return (
        f"{PRELUDE}DETACHED = {DETACHED!r}\n"
        f"OUTSIDE, PORT, RESULT = {str(outside)!r}, {port}, {str(result)!r}\n\n\n"
        f"def test_it():\n    try:\n        {ATTEMPTS[name]}\n    except Exception as exc:\n"
        "        got = type(exc).__name__\n    open(RESULT, 'w').write(got)\n"
    )


@pytest.fixture(scope="module")
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def run_attempts(runner, folder, outside, port):
    """Plant every attempt, run them with runner(files), and judge each from outside."""
    files = []
    for number, name in enumerate(ATTEMPTS):
        result = folder / f"result_{number}.txt"
        result.unlink(missing_ok=True)
        path = folder / "tests" / f"test_escape_{number}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(attempt_file(name, outside, port, result))
        files.append((name, path, result))
    runner([p for _, p, _ in files])
    time.sleep(2.5)  # a detached child writes 1 s after the command ended, if still alive
    out = {}
    for name, _, result in files:
        got = result.read_text() if result.exists() else ""
        out[name] = escaped(name, got, folder, outside, result)
    (outside / "pwned.txt").unlink(missing_ok=True)
    return out


def test_code_escapes(ws, outside, listener, monkeypatch):
    """With bwrap every attempt is contained; with rlimits only these four get out."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the caller has a key: the command must not see it

    def sandboxed(files):
        names = " ".join(str(f.relative_to(ws.path)) for f in files)
        done = ws.run(f"python -m pytest -q -p no:cacheprovider {names}")
        assert done.exit_code is not None, done.output

    got = run_attempts(sandboxed, ws.path, outside, listener)
    let_out = {"read outside", "write outside", "network"} if not ws.bwrap else set()
    assert {name for name, out in got.items() if out} == let_out
    assert lingering(ws.path) == []


@pytest.mark.soak  # a negative control for the grader above, ~10 s: make test-all runs it
def test_code_escapes_possible_off(outside, listener, monkeypatch, tmp_path):
    """The same attempts run bare in a throwaway folder all get out: the test above can fail."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def bare(files):
        for f in files:
            code = f.read_text() + "\ntest_it()\n"
            # no pipes: a detached child holding one open would block the wait
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            subprocess.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60, **quiet)

    got = run_attempts(bare, tmp_path, outside, listener)
    assert [name for name, out in got.items() if not out] == []
    for pid in lingering(tmp_path):  # none should be left, but never leave one
        os.kill(pid, 9)


# ---------------------------------------------------------------- floods, hangs, forks, CPU

STOPS = {
    "output flood": ("print('x' * (8 << 20))", Limits(timeout=30.0, output_chars=2_000)),
    "hang": ("import time; time.sleep(60)", Limits(timeout=3.0)),
    "fork bomb": (
        "import os, time\nfor _ in range(100):\n    if os.fork() == 0:\n        time.sleep(60)\n"
        "        os._exit(0)\ntime.sleep(60)",
        Limits(timeout=4.0),
    ),
    "cpu": (
        "import time\nwhile time.process_time() < 3: pass\nprint('finished')",
        Limits(timeout=30.0, cpu_seconds=1),
    ),
}


@pytest.mark.parametrize("name", STOPS)
def test_stopped_cleanly(name, ws):
    code, limits = STOPS[name]
    (ws.path / "tests" / "test_stop.py").write_text(
        "def test_it():\n" + "".join(f"    {line}\n" for line in code.splitlines())
    )
    saved, ws.limits = ws.limits, limits
    try:
        done = ws.run("python -m pytest -q -s -p no:cacheprovider tests/test_stop.py")
    finally:
        ws.limits = saved
    assert lingering(ws.path) == []
    if name == "output flood":
        assert done.truncated and "[output truncated" in done.output
        assert len(done.output) < limits.output_chars + 200
    elif name == "cpu":
        assert done.exit_code != 0 and "finished" not in done.output and not done.timed_out
    else:
        assert done.timed_out and done.exit_code is None and "[stopped" in done.output


# the bare runs wait out each limit: the soak trials (make test-all) hold the slow ones
BARE = [n if n == "output flood" else pytest.param(n, marks=pytest.mark.soak) for n in STOPS]


@pytest.mark.parametrize("name", BARE)
def test_each_stop_is_possible_off(name, tmp_path):
    """The same code as a bare subprocess with the same timeout is not stopped: the test above can
    fail (output to a file: children keep a pipe open)."""
    code, limits = STOPS[name]
    with open(tmp_path / "out.txt", "w") as sink:
        bare = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=sink)
        try:
            bare.wait(timeout=limits.timeout)
            out = (tmp_path / "out.txt").read_text()
            possible = len(out) > 8_000_000 if name == "output flood" else "finished" in out
        except subprocess.TimeoutExpired:
            bare.kill()
            bare.wait()
            possible = True  # still running at the deadline
    if name == "fork bomb":  # a bare kill reaches only the parent: the children outlive it
        survivors = lingering(tmp_path, grace=0)
        possible = len(survivors) >= 100
        for pid in survivors:
            os.kill(pid, 9)
    assert possible


SPAWNS = """import os, subprocess, sys, time
for session in (False, True):  # one child in the command's group, one detached
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                     start_new_session=session)
print("spawned", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["run", "timeout", "error"])
def test_no_process_is_left_after_a_run_a_timeout_or_an_error(how, ws, monkeypatch):
    """A command that leaves two children (one in a new session) behind; it ends by itself
    ("run"), hangs past its timeout, or labkit is interrupted while it waits ("error")."""
    code = SPAWNS.rsplit("time.sleep(60)", 1)[0] if how == "run" else SPAWNS
    body = "".join(f"    {line}\n" for line in code.splitlines())
    (ws.path / "tests" / "test_spawns.py").write_text(f"def test_it():\n{body}")
    command = "python -m pytest -q -s -p no:cacheprovider tests/test_spawns.py"
    started, waited = [], subprocess.Popen.wait

    def interrupted(proc, timeout=None):
        if timeout is None or started:  # after the one Ctrl+C, labkit's clean-up waits for real
            return waited(proc, timeout)
        deadline = time.monotonic() + 30
        while len(_in(ws.path)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # until the command and both its children are running
        started.append(len(_in(ws.path)))
        raise KeyboardInterrupt

    if how == "error":
        monkeypatch.setattr(subprocess.Popen, "wait", interrupted)
    saved, ws.limits = ws.limits, Limits(timeout=5.0 if how == "timeout" else 30.0)
    try:
        if how == "error":
            with pytest.raises(KeyboardInterrupt):
                ws.run(command)
            assert started[0] >= 3  # there was something to leave behind
        else:
            done = ws.run(command)
            assert "spawned" in done.output and done.timed_out is (how == "timeout")
    finally:
        ws.limits = saved
    assert lingering(ws.path) == []


def test_environment_is_scrubbed_and_home_inside(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Workspace(PANTRY, "rlimits") as w:
        env = w.env()
        assert not [k for k in env if "KEY" in k or k.startswith("OPENAI")]
        assert Path(env["HOME"]).parent == w.path


def test_the_course_pytest_plugins_stay_out_of_the_task_repository():
    """nbval, hypothesis, xdist are this course's, not pantry's: its test runs load none of them."""
    with Workspace(PANTRY, "rlimits") as w:
        header = w.run("python -m pytest --co -p no:cacheprovider").output
    assert "collected" in header and "nbval" not in header and "hypothesis" not in header


def test_workspace_copy_leaves_the_repository_unchanged():
    before = {p: p.read_bytes() for p in PANTRY.rglob("*") if p.is_file()}
    with Workspace(PANTRY, "rlimits") as w:
        (w.path / "pantry" / "units.py").write_text("broken\n")
        (w.path / "new.py").write_text("x = 1\n")
        assert "+broken" in w.diff()
        base = w.base
    assert {p: p.read_bytes() for p in PANTRY.rglob("*") if p.is_file()} == before
    assert not base.exists()


def test_limits_are_a_dataclass_a_learner_can_change():
    assert dataclasses.replace(Limits(), timeout=1.0).timeout == 1.0


@pytest.mark.parametrize("sandbox", ["nope", "docker"])
def test_bad_sandbox_name_says_what_to_use(sandbox):
    with pytest.raises(UserError, match="use 'auto', 'bwrap' or 'rlimits'"):
        Workspace(PANTRY, sandbox)


def test_python_is_bound_after_the_fresh_tmp_so_a_venv_under_tmp_still_runs():
    """A clone in /tmp keeps its .venv there: a --tmpfs /tmp laid over the bind would hide it."""
    with Workspace(PANTRY, "rlimits") as w:
        w.bwrap = True  # only builds the argv; nothing runs
        argv = w._wrapped(["python", "-V"])
    tmp = argv.index("--tmpfs")
    for prefix in {sys.prefix, sys.base_prefix}:
        at = [i for i in range(len(argv) - 2) if argv[i : i + 3] == ["--ro-bind", prefix, prefix]]
        assert at and at[0] > tmp, f"{prefix} is bound before /tmp is replaced"
