"""Runs inside benchmarks/.venv-mini (mini-swe-agent 2.4.6 and its dependencies), never in labkit's.

Reads one JSON job from stdin and prints one JSON answer. Jobs:
  {"job": "tasks", "env": {...}, "tasks": [{"id", "cwd", "issue", "commands": [...]}]}
      each task is run by mini-swe-agent's DefaultAgent with its own DeterministicModel replaying
      `commands` (bash, one per step) in LocalEnvironment (a fresh subprocess per command, bash,
      no jail) in `cwd`, then the submit command: steps, messages, exit status, seconds.
  {"job": "overhead", "turns": N, "cwd": ..., "command": ...}
      seconds per turn of DefaultAgent's loop with an environment that answers at once (the loop
      alone) and with LocalEnvironment running `command` each turn.
Only mini-swe-agent's own classes run here; labkit is not importable in this environment.
"""

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mini-config-"))

from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
CONFIG = {
    "system_template": "You are a helpful assistant that can interact with a computer.",
    "instance_template": "{{task}}",
    "cost_limit": 0,  # 0: no limit (the deterministic model charges 1.0 a call)
}


class Instant:
    """An environment that answers every command at once: what is left is the loop's cost."""

    def execute(self, action, cwd="", *, timeout=None):
        return {"output": "", "returncode": 0, "exception_info": ""}

    def get_template_vars(self, **kwargs):
        return {}

    def serialize(self):
        return {}


def agent(commands, env, step_limit=0):
    outputs = [make_output(f"THOUGHT: step {n}", [{"command": c}]) for n, c in enumerate(commands)]
    model = DeterministicModel(outputs=outputs)
    return DefaultAgent(model, env, step_limit=step_limit, **CONFIG)


def tasks(job):
    rows = []
    for task in job["tasks"]:
        env = LocalEnvironment(cwd=task["cwd"], env=job["env"], timeout=120)
        bot = agent([*task["commands"], SUBMIT], env)
        started = time.perf_counter()
        info = bot.run(task["issue"])
        rows.append(
            {
                "id": task["id"],
                "exit_status": info.get("exit_status", ""),
                "steps": bot.n_calls,
                "messages": len(bot.messages),
                "seconds": time.perf_counter() - started,
                "outputs": [m["content"][:300] for m in bot.messages if m["role"] == "user"][1:],
            }
        )
    return rows


def overhead(job):
    best = {}
    for name, env in (("instant", Instant()), ("local", LocalEnvironment(cwd=job["cwd"]))):
        for _ in range(job.get("repeat", 3)):
            bot = agent([job["command"]] * job["turns"], env, step_limit=job["turns"])
            started = time.perf_counter()
            bot.run("bench")
            took = (time.perf_counter() - started) / job["turns"]
            best[name] = min(best.get(name, took), took)
    return best


if __name__ == "__main__":
    job = json.load(sys.stdin)
    print(json.dumps({"tasks": tasks, "overhead": overhead}[job["job"]](job)))
