"""Stage 11: the sandbox's cost per command, the loop's overhead per turn, mini-swe-agent beside.

1. One command three ways, best of several: a bare subprocess.run (what a user would write), the
   sandbox without bwrap (checks, scrubbed environment, rlimits, the REAPER supervisor) and with
   bwrap (namespaces). Ratios against the bare run.
2. The loop's own cost per turn with a model that answers at once, each turn one read_file call:
   04's loop.run, and coding.solve (the guard's permission decision, the context remade each
   turn, read-only calls through the thread group); mini-swe-agent's DefaultAgent with an
   environment that answers at once, and with its LocalEnvironment (a fresh bash per command).
3. mini-swe-agent on the same tasks, offline: its own DeterministicModel replays the commands
   labkit's scripted model sends, as bash (grep, sed -n, git apply, python -m pytest), in a fresh
   copy of the repository; both patches are scored by SWE-bench's rule (labkit.swe.evaluate).
mini-swe-agent is not in labkit's lock: it pulls in litellm, openai, datasets, pandas, pyarrow,
boto3, textual and more (82 packages, ~167 MB of wheels), for a loop of about a hundred lines.
The benchmark makes its own environment, benchmarks/.venv-mini (gitignored), once:
`pip install mini-swe-agent==2.4.6` (set PIP_FIND_LINKS to install from a folder of wheels).
Run: python -m benchmarks coding   (about five minutes; the task rows run every test suite)
"""

import json
import shlex
import subprocess
import sys
import time
import venv
from pathlib import Path

from labkit import loop
from labkit.coding import CodingGuard, coding_tools, solve
from labkit.labs.coding import run_task, script
from labkit.models import Reply, ToolCall, Usage
from labkit.patches import Edits
from labkit.sandbox import Workspace, bwrap_available
from labkit.swe import REPOS, evaluate, load_tasks

HERE = Path(__file__).resolve().parent
MINI = HERE / ".venv-mini"
MINI_PYTHON = MINI / "bin" / "python"
PANTRY = REPOS / "pantry"
COMMANDS = ("ls", "cat README.md", "git status --short", "python -m pytest -q tests/test_units.py")


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


# ---------------------------------------------------------------- 1. the sandbox per command


def sandbox_table(repeat=5):
    modes = ["rlimits"] + (["bwrap"] if bwrap_available() else [])
    print(
        f"{'command':42} {'bare ms':>8} " + " ".join(f"{m + ' ms':>10} {'ratio':>6}" for m in modes)
    )
    with Workspace(PANTRY, "rlimits") as ws:
        spaces = {m: Workspace(PANTRY, m) for m in modes}
        try:
            for command in COMMANDS:
                argv = ws.check(command)
                bare = best(
                    lambda argv=argv: subprocess.run(
                        argv, cwd=ws.path, capture_output=True, env=ws.env()
                    ),
                    repeat,
                )
                cells = []
                for m in modes:
                    took = best(lambda m=m, c=command: spaces[m].run(c), repeat)
                    cells.append(f"{took * 1e3:10.1f} {took / bare:5.1f}x")
                print(f"{command:42} {bare * 1e3:8.1f} " + " ".join(cells))
        finally:
            for space in spaces.values():
                space.close()
    print("bare: subprocess.run(argv) in the same folder and environment, nothing else\n")


# ---------------------------------------------------------------- 2. the loop per turn


class Instant:
    """A model that answers at once: turns-1 replies each calling read_file, then an answer."""

    def __init__(self, turns):
        args = json.dumps({"path": "pantry/units.py", "start": 1, "end": 5})
        self.replies = [
            Reply("", [ToolCall(f"call_{i}", "read_file", args)], Usage(50, 10, 60))
            for i in range(turns - 1)
        ] + [Reply("done", [], Usage(50, 2, 52))]
        self.position = 0

    def respond(self, messages, tools=(), **options):
        self.position += 1
        return self.replies[self.position - 1]


def loop_table(turns=40, repeat=5):
    with Workspace(PANTRY, "rlimits") as ws:
        tools = coding_tools(ws, Edits())

        def plain():
            done = loop.run("bench", Instant(turns), tools, max_turns=turns, max_calls=turns)
            assert done.status == "completed" and done.turns == turns

        def agent():
            done = solve("bench", Instant(turns), ws, CodingGuard("default"), turns, turns)
            assert done.result.status == "completed" and done.turns == turns

        ours = {
            "loop.run (04)": best(plain, repeat) / turns,
            "coding.solve": best(agent, repeat) / turns,
        }
    mini = mini_job({"job": "overhead", "turns": turns, "cwd": str(PANTRY),
                     "command": "sed -n 1,5p pantry/units.py"})  # fmt: skip
    base = ours["loop.run (04)"]
    print(f"{'loop, per turn (a model that answers at once)':52} {'µs':>9} {'ratio':>6}")
    rows = list(ours.items())
    if mini:
        rows += [
            ("mini-swe-agent, environment answers at once", mini["instant"]),
            ("mini-swe-agent, LocalEnvironment (bash each turn)", mini["local"]),
        ]
    for name, seconds in rows:
        print(f"{name:52} {seconds * 1e6:9.0f} {seconds / base:5.1f}x")
    print("labkit's turns call read_file in-process; mini's LocalEnvironment runs sed in bash\n")


# ---------------------------------------------------------------- 3. mini-swe-agent on the tasks


def ensure_mini() -> bool:
    """benchmarks/.venv-mini with mini-swe-agent 2.4.6, made once; False (and why) if it cannot."""
    if MINI_PYTHON.exists():
        return True
    print("making benchmarks/.venv-mini: pip install mini-swe-agent==2.4.6 (once)")
    venv.create(MINI, with_pip=True)
    done = subprocess.run(
        [str(MINI_PYTHON), "-m", "pip", "install", "-q", "mini-swe-agent==2.4.6"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"mini-swe-agent could not be installed: {done.stderr.strip()[-300:]}")
        return False
    return True


def mini_job(job: dict):
    if not ensure_mini():
        return None
    done = subprocess.run(
        [str(MINI_PYTHON), str(HERE / "mini_driver.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=1_800,
    )
    if done.returncode != 0:
        print(f"mini-swe-agent's run failed: {done.stderr.strip()[-500:]}")
        return None
    return json.loads(done.stdout)


def as_bash(name: str, args: dict) -> str:
    """One labkit tool call as the bash command a bash-only agent sends instead."""
    q = shlex.quote
    if name == "grep":
        return f"grep -rnE {q(args['pattern'])} {q(args.get('path') or '.')} --include='*.py'"
    if name == "read_file":
        if args.get("start") is None and args.get("end") is None:
            return f"cat -n {q(args['path'])}"
        return f"sed -n '{args.get('start') or 1},{args.get('end') or '$'}p' {q(args['path'])}"
    if name == "list_files":
        return f"find {q(args['path'])} -type f"
    if name == "run":
        return args["command"]
    if args.get("patch"):
        return f"git apply <<'EOF'\n{args['patch']}EOF"
    edit = (
        f"import pathlib; p = pathlib.Path({args['path']!r}); t = p.read_text(); "
        f"assert t.count({args['search']!r}) == 1; p.write_text(t.replace({args['search']!r}, "
        f"{args['replace']!r}))"
    )
    return f"python -c {q(edit)}"


def commands(task) -> list[str]:
    """The bash commands of the task's script up to its first answer: mini-swe-agent has no stop
    hook, so the steps a stop hook would send the agent back for are never reached."""
    out = []
    for step in script(task):
        if not step.calls:
            break
        out += [as_bash(name, json.loads(args)) for name, args in step.calls]
    return out


def tasks_table():
    tasks = load_tasks()
    spaces = [Workspace(PANTRY, "rlimits") for _ in tasks]
    try:
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # python: labkit's, pytest
        jobs = [
            {"id": t["instance_id"], "cwd": str(ws.path), "issue": t["problem_statement"],
             "commands": commands(t)}
            for t, ws in zip(tasks, spaces, strict=True)
        ]  # fmt: skip
        jobs.append({"id": "outside", "cwd": str(spaces[0].path), "issue": "look around",
                     "commands": ["ls .. /etc/hostname"]})  # fmt: skip
        mini = mini_job({"job": "tasks", "env": env, "tasks": jobs})
        if mini is None:
            return
        print(f"{'task':10} {'labkit v2':>10} {'turns':>5} {'msgs':>5}   "
              f"{'mini-swe-agent':>14} {'steps':>5} {'msgs':>5}")  # fmt: skip
        for task, ws, row in zip(tasks, spaces, mini, strict=False):
            _, ours, said = run_task(task, "v2", "rlimits")
            theirs = evaluate(task, ws.diff(), "rlimits")
            print(
                f"{task['instance_id']:10} {'yes' if said.resolved else 'no':>10} {ours.turns:5} "
                f"{len(ours.result.messages):5}   {'yes' if theirs.resolved else 'no':>14} "
                f"{row['steps']:5} {row['messages']:5}"
            )
        outside = mini[-1]
        seen = outside["outputs"][0].replace("\n", " ")[:70]
        refused = spaces[0].run("ls ..").refused
        print(f"\n'ls .. /etc/hostname': mini-swe-agent ran it: {seen}")
        print(f"labkit's run tool: {refused[:90]}")
    finally:
        for ws in spaces:
            ws.close()
    print(
        "Differences: mini sends bash only (one string per step, run by a fresh `bash -c`, no "
        "jail, the caller's whole environment), has no permission layer (no deny/ask rules, no "
        "modes), "
        "and keeps one linear history with no stop hook, so pantry-7's broken first fix is "
        "submitted; labkit's typed tools are validated, decided and sandboxed, and its stop hook "
        "sends the agent back."
    )


def main():
    print("-- 1. the sandbox's cost per command")
    sandbox_table()
    print("-- 2. the agent's loop overhead per turn")
    loop_table()
    print("-- 3. mini-swe-agent beside labkit on the frozen tasks (offline, deterministic models)")
    tasks_table()


if __name__ == "__main__":
    main()
