"""SWE-bench's rule, run for real: a task is resolved when its tests say so in the sandbox.

Built in 11_coding_agent. A task (data/evals/coding_tasks.json) is an issue, a reference patch, a
test patch and two lists of test ids. `evaluate(task, patch)` applies the patch to a fresh copy of
the repository, then the test patch, runs every test in the sandbox and applies the rule:
resolved when every FAIL_TO_PASS test passes and every PASS_TO_PASS test still does. A task whose
`expected` is "refuse" is resolved by an empty patch with every PASS_TO_PASS test passing.
Left out: SWE-bench's per-repository containers and log parsers; here one repository, pytest only.
"""

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from . import patches
from .budget import PRICES_AS_OF, estimated_cost
from .config import DEFAULT_MODEL
from .errors import LabkitError
from .loop import RunResult
from .sandbox import Limits, Workspace

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "data" / "evals" / "coding_tasks.json"
REPOS = ROOT / "data" / "repos"
REPORT = ".pytest-report.xml"


def load_tasks(path: str | Path = TASKS) -> list[dict]:
    """The frozen coding tasks. Example: load_tasks()[0]["instance_id"]  ->  "pantry-1" """
    return json.loads(Path(path).read_text())["tasks"]


def test_results(xml_text: str) -> dict:
    """{test id: "passed" | "failed" | "error" | "skipped"} from pytest's JUnit XML report.

    Example: test_results(report)["tests/test_units.py::test_kg_to_g"]  ->  "passed"
    """
    results = {}
    for case in ET.fromstring(xml_text).iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
        results[f"{module}.py::{case.get('name')}"] = outcome
    return results


@dataclass
class TaskVerdict:
    """What the tests said about one patch for one task."""

    resolved: bool
    fail_to_pass: list = field(default_factory=list)  # FAIL_TO_PASS ids still not passing
    pass_to_pass: list = field(default_factory=list)  # PASS_TO_PASS ids broken
    note: str = ""  # why it is not resolved when no test says so (a patch that does not apply)
    output: str = ""  # the end of pytest's output

    def __str__(self):
        if self.resolved:
            return "resolved"
        counts = (
            ("FAIL_TO_PASS failing", self.fail_to_pass),
            ("PASS_TO_PASS broken", self.pass_to_pass),
        )
        broke = [f"{len(ids)} {what}" for what, ids in counts if ids]
        return "not resolved: " + ", ".join(broke + ([self.note] if self.note else []))


def resolved(results: dict, fail_to_pass: list, pass_to_pass: list) -> bool:
    """SWE-bench's rule: every FAIL_TO_PASS and every PASS_TO_PASS test passed; a test missing
    from the results, an error or a skip counts as not passing; tests not listed do not count.

    Example: resolved({"t::a": "passed", "t::b": "failed"}, ["t::a"], [])  ->  True
    """
    return all(results.get(t) == "passed" for t in [*fail_to_pass, *pass_to_pass])


def verdict(results: dict, task: dict, patch: str = "", output: str = "") -> TaskVerdict:
    """The rule over a task's test results, with what failed; a task to refuse needs no patch.

    Example: verdict({"t::a": "passed"}, {"FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": []})
    """
    f2p = [t for t in task["FAIL_TO_PASS"] if results.get(t) != "passed"]
    p2p = [t for t in task["PASS_TO_PASS"] if results.get(t) != "passed"]
    refused = task.get("expected") == "refuse"
    note = "a task to refuse, and the patch is not empty" if refused and patch.strip() else ""
    ok = resolved(results, task["FAIL_TO_PASS"], task["PASS_TO_PASS"]) and not note
    return TaskVerdict(ok, f2p, p2p, note, output)


def evaluate(task: dict, patch: str, sandbox: str = "auto") -> TaskVerdict:
    """Apply `patch`, then the task's test patch, to a fresh copy; run the tests; apply the rule.

    Example: evaluate(task, task["patch"]).resolved  ->  True
    """
    limits = Limits(timeout=120.0)
    with Workspace(REPOS / task["repo"], sandbox, limits) as ws:
        try:
            for diff in (patch, task["test_patch"]):
                if diff.strip():
                    patches.apply_diff(ws, diff)
        except LabkitError as exc:
            return TaskVerdict(
                False, list(task["FAIL_TO_PASS"]), [], f"patch does not apply: {exc}"
            )
        done = ws.run(f"python -m pytest -q --tb=line -p no:cacheprovider --junitxml={REPORT}")
        report = ws.path / REPORT
        results = test_results(report.read_text()) if report.exists() else {}
    return verdict(results, task, patch, done.output[-1_500:])


def stop_hook(
    task: dict, ws: Workspace, sandbox: str = "auto"
) -> Callable[[RunResult], str | None]:
    """An on_stop hook (labkit.coding.Hooks) that runs the task's tests on the workspace's patch
    and, while they fail, sends the agent back with what failed.

    Example: Hooks(on_stop=stop_hook(task, ws))
    """

    def on_stop(run: RunResult) -> str | None:
        said = evaluate(task, ws.diff(), sandbox)
        if said.resolved:
            return None
        failing = ", ".join(said.fail_to_pass + said.pass_to_pass) or said.note
        return (
            f"Not done yet: the task's tests say {said}. Failing: {failing}.\n"
            f"{said.output.strip()}\nFix the code (undo what broke a test), then say done."
        )

    return on_stop


def patch_size(patch: str) -> str:
    """Lines added and removed. Example: patch_size(diff)  ->  "+1 -1" """
    lines = patch.splitlines()
    plus = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    minus = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return f"+{plus} -{minus}"


def table(rows: list, priced_as: str = DEFAULT_MODEL) -> str:
    """One line per task: id, kind, verdict, turns, tool calls, tokens, cost, patch size.

    rows: (task, CodingRun, TaskVerdict). Cost is an ESTIMATE: the run's tokens at the prices of
    `priced_as` (labkit.budget.PRICES). Example: print(table(rows))
    """
    head = f"{'task':10} {'kind':9} {'resolved':8} {'turns':>5} {'calls':>5} {'tokens':>6}"
    lines = [head + f" {'cost $':>9}  patch"]
    total: Fraction | int = 0
    for task, done, said in rows:
        mark = "yes" if said.resolved else "no"
        cost = estimated_cost(priced_as, done.usage.input_tokens, done.usage.output_tokens) or 0
        total += cost
        lines.append(
            f"{task['instance_id']:10} {task['kind']:9} {mark:8} {done.turns:5} "
            f"{done.tool_calls:5} {done.usage.total_tokens:6} {float(cost):9.6f}  "
            f"{patch_size(done.patch)}"
        )
    solved = sum(1 for _, _, said in rows if said.resolved)
    sources = {done.usage.source for _, done, _ in rows} or {"reported"}
    counted = "reported by the server" if sources == {"reported"} else "counted by labkit"
    return "\n".join(
        lines
        + [
            f"resolved {solved}/{len(rows)}; tokens {counted}; cost ${float(total):.6f}, an "
            f"ESTIMATE at {priced_as} prices ({PRICES_AS_OF})"
        ]
    )
