"""Sandbox: run one command in a fresh copy of a repository, and nowhere else.

Built in 11_coding_agent. `Workspace(repo)` copies a repository into a temporary folder (the
original is never touched) and makes it a git repository, so `git diff` is the agent's patch.
`Workspace.run(command)` runs one allow-listed command there: no shell, every path argument inside
the workspace, a scrubbed environment (no keys, HOME inside the workspace), a timeout, an output
cap with a visible marker, and rlimits (memory, file size, CPU time, open files). Where bubblewrap
(`bwrap`) is installed the command also runs in its own namespaces: no network, its own process
ids (all killed with it), the system read-only, only the workspace writable. Without bwrap a
supervisor (REAPER, a child subreaper) kills every process the command left behind, detached
ones too. Left out, and what production uses instead: without bwrap nothing stops code the tests
run from reading or writing outside the workspace or reaching the network, a process that kills
its supervisor first escapes it, and as root RLIMIT_NPROC is ignored. Production uses containers
or microVMs (gVisor, Firecracker) with cgroup limits (pids.max, memory.max) and a network policy.
"""

import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

# argv prefixes a command may start with; "python" is this environment's Python
ALLOWED = (
    ("python", "-m", "pytest"),
    ("ls",),
    ("cat",),
    ("head",),
    ("wc",),
    ("git", "diff"),
    ("git", "status"),
)
SHELL_SIGNS = (";", "|", "&", ">", "<", "`", "$(", "\n")  # no shell runs, so these would mislead
_DURATION = re.compile(r" in \d+\.\d+s\b")  # pytest's timing, removed so runs are reproducible
# Run as `python -c REAPER argv...` without bwrap: a child subreaper (Linux), so a process that
# detaches (a new session, a double fork) becomes its child when its parent dies; when the command
# ends, or on SIGTERM, it kills and reaps every child it has until none is left, then exits as the
# command did.
REAPER = """import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
def children():
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found
def reap(code):
    while kids := children():
        for pid in kids:
            os.kill(pid, signal.SIGKILL)
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    if code < 0:  # killed by a signal: end the same way, so the caller sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)
signal.signal(signal.SIGTERM, lambda *_: reap(-signal.SIGKILL))
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
reap(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
GIT = ["git", "-c", "safe.directory=*", "-c", "user.name=labkit", "-c", "user.email=labkit@local"]


@dataclass(frozen=True)
class Limits:
    """What one command may use. Example: Limits(timeout=5.0, output_chars=2_000)"""

    timeout: float = 60.0  # seconds of wall time, then the process group is killed
    output_chars: int = 6_000  # characters of output the model sees
    memory_mb: int = 1_024  # address space (RLIMIT_AS)
    file_mb: int = 16  # largest file it may write (RLIMIT_FSIZE); output counts too
    cpu_seconds: int = 60  # RLIMIT_CPU
    open_files: int = 256  # RLIMIT_NOFILE
    processes: int = 256  # RLIMIT_NPROC: per user, and ignored for root


@dataclass
class Output:
    """What a command did: its exit code and (capped) output, or why it did not run."""

    command: str
    exit_code: int | None = None
    output: str = ""
    refused: str = ""  # why it did not run; empty when it ran
    timed_out: bool = False
    truncated: bool = False

    def result(self) -> dict:
        """As a tool result the model can read."""
        if self.refused:
            return {"ok": False, "error": "refused", "message": self.refused}
        data = {"exit_code": self.exit_code, "output": self.output}
        return {"ok": True, "data": data | ({"timed_out": True} if self.timed_out else {})}


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here."""
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True
    )
    return probe.returncode == 0


def _rlimits(limits: Limits):
    """The function the child runs before exec: its resource limits."""
    mb = 1024 * 1024

    def apply():
        for which, value in (
            (resource.RLIMIT_AS, limits.memory_mb * mb),
            (resource.RLIMIT_FSIZE, limits.file_mb * mb),
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_NPROC, limits.processes),
        ):
            resource.setrlimit(which, (value, value))

    return apply


class Workspace:
    """A temporary copy of a repository where an agent may read, edit and run commands.

    Example: with Workspace("data/repos/pantry") as ws: ws.run("python -m pytest -q")
    sandbox: "auto" uses bwrap when it works here, "bwrap" requires it, "rlimits" never uses it.
    """

    def __init__(self, repo: str | Path, sandbox: str = "auto", limits: Limits = Limits()):
        repo = Path(repo)
        if not repo.is_dir():
            raise UserError(f"no repository at {repo} — pass the folder of a repository")
        if sandbox not in ("auto", "bwrap", "rlimits"):
            raise UserError(f"sandbox={sandbox!r} — use 'auto', 'bwrap' or 'rlimits'")
        if sandbox == "bwrap" and not bwrap_available():
            raise UserError("bwrap is not usable here — install bubblewrap, or use 'rlimits'")
        self.bwrap = sandbox == "bwrap" or (sandbox == "auto" and bwrap_available())
        self.limits, self.repo = limits, repo
        self.base = Path(tempfile.mkdtemp(prefix="labkit-ws-"))
        self.path = self.base / "repo"  # subtle: resolved, so symlinked /tmp cannot fool inside()
        shutil.copytree(repo, self.path, ignore=shutil.ignore_patterns("__pycache__", ".*cache"))
        self.path = self.path.resolve()
        (self.path / ".home").mkdir()
        self._git("init", "-q")
        self._git("add", "-A")
        self._git("commit", "-q", "-m", "task start", "--no-gpg-sign")

    def _git(self, *args) -> str:
        done = subprocess.run(
            [*GIT, *args], cwd=self.path, capture_output=True, text=True, env=self.env()
        )
        return done.stdout

    def diff(self) -> str:
        """The changes since the copy was made, as a unified diff: the agent's patch."""
        self._git("add", "-A", "--", ".", ":!.home")
        return self._git("diff", "--cached", "--no-color")

    def inside(self, name: str) -> Path:
        """The path `name` names, resolved (symlinks followed); UserError when it is outside.

        Example: ws.inside("pantry/units.py"); ws.inside("../x") raises UserError
        """
        where = (self.path / name).resolve()
        if where != self.path and self.path not in where.parents:
            raise UserError(
                f"{name!r} is outside the workspace — use a path relative to the repository "
                "root, with no '..' and no symlink that leads out"
            )
        return where

    def env(self) -> dict:
        """The environment a command gets: no keys, nothing from the caller but a fixed few."""
        return {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(self.path / ".home"),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            # the course's pytest plugins (nbval, hypothesis, ...) are not the task repository's:
            # loading them cost ~4 s of every test run; a repository that needs one names it (-p)
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }

    def check(self, command: str) -> list[str]:
        """The argv for an allowed command; UserError saying why when it is not allowed."""
        if any(sign in command for sign in SHELL_SIGNS):
            raise UserError(
                "no shell runs here, so ; | & > < ` $( do nothing — send one command at a time"
            )
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise UserError(f"cannot split the command ({exc}) — check its quotes") from None
        if not any(tuple(argv[: len(p)]) == p for p in ALLOWED):
            allowed = ", ".join(" ".join(p) for p in ALLOWED)
            raise UserError(f"{command!r} is not allowed — allowed commands start with: {allowed}")
        for arg in argv[1:]:
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            if not value.startswith("-") or "=" in arg:  # a path, or an option's value
                self.inside(value)  # raises for .., absolute paths and symlinks out
        return [sys.executable, *argv[1:]] if argv[0] == "python" else argv

    def _wrapped(self, argv):
        if not self.bwrap:
            return [sys.executable, "-I", "-S", "-c", REAPER, *argv]
        binds = ["--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc", "/etc"]
        for link in ("/bin", "/lib", "/lib64", "/sbin"):
            if os.path.islink(link):
                binds += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                binds += ["--ro-bind", link, link]
        binds += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for prefix in sorted({sys.prefix, sys.base_prefix}):  # after /tmp: a venv may live there
            binds += ["--ro-bind", prefix, prefix]
        return [
            "bwrap",
            *binds,
            "--bind", str(self.path), str(self.path), "--chdir", str(self.path),
            "--unshare-all", "--die-with-parent", "--new-session",
            *argv,
        ]  # fmt: skip

    def run(self, command: str) -> Output:
        """Run one allowed command in the workspace, within the limits. Never raises for the model.

        Example: ws.run("python -m pytest -q").exit_code  ->  0
        """
        try:
            argv = self.check(command)
        except UserError as exc:
            return Output(command, refused=str(exc))
        limits = self.limits
        # the output goes to a file, so RLIMIT_FSIZE also stops a flood
        with tempfile.TemporaryFile(dir=self.base) as sink:
            proc = subprocess.Popen(
                self._wrapped(argv),
                cwd=self.path,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_rlimits(limits),
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _stop(proc)
            size = sink.seek(0, os.SEEK_END)
            sink.seek(0)
            text = sink.read(limits.output_chars * 4).decode("utf-8", "replace")
        shown = _DURATION.sub(" in N s", text[: limits.output_chars].replace(str(self.path), "."))
        truncated = size > len(text.encode()) or len(text) > limits.output_chars
        if truncated:
            shown += f"\n...[output truncated: showing {limits.output_chars:,} characters]"
        if timed_out:
            shown += f"\n...[stopped: still running after {limits.timeout:g} s, killed]"
        code = None if timed_out else proc.returncode
        return Output(command, code, shown, timed_out=timed_out, truncated=truncated)

    def close(self) -> None:
        """Delete the workspace."""
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _stop(proc, grace: float = 5.0) -> None:
    """End a command: ask a running supervisor (or bwrap) to stop, so it kills what it holds; then
    kill the process group, in case anything in it lingers, and reap the command."""
    if proc.poll() is None:
        proc.terminate()  # REAPER kills every process it holds; bwrap takes its namespace along
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
