"""10_evals: the frozen tool-call set and its table, the agent suite, the judges' human labels,
plots.

Outside the lessons (see labkit.labs).
"""

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..config import DOCS_DIR, EVALS_DIR
from ..errors import ServiceError, UserError
from ..evals import Match, ast_match
from ..models import (
    Model,
    ToolSpec,
    user,
)
from ..stats import bootstrap_ci
from ..suite import EvalTask, Version, read_json, run_suite
from .scenarios import scenario_tools, script_step

# ---------------------------------------------------------------- 10_evals: frozen sets and plots

TOOL_CALLS = EVALS_DIR / "tool_calls.json"
AGENT_SUITE = EVALS_DIR / "agent_suite.json"
JUDGE_LABELS = EVALS_DIR / "judge_labels.json"
BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array"}  # the rest: JSON Schema's


def load_tool_cases(path=TOOL_CALLS):
    """The frozen tool-call set, each case with its BFCL function docs in place of their names.

    Example: load_tool_cases()[0]["functions"][0]["name"]  ->  "calculate_triangle_area"
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    docs = {f["name"]: f for f in data["functions"]}
    return [{**c, "functions": [docs[name] for name in c["functions"]]} for c in data["cases"]]


def bfcl_tool(doc) -> ToolSpec:
    """A BFCL function doc as a tool spec an API accepts: BFCL's type names made JSON Schema's,
    not strict (an optional parameter stays optional).

    Example: bfcl_tool(load_tool_cases()[0]["functions"][0]).parameters["type"]  ->  "object"
    """

    def schema(s):
        s = {k: v for k, v in s.items() if not (k == "type" and v == "any")}
        s["type"] = BFCL_TYPES.get(s.get("type"), s.get("type"))
        if "items" in s:
            s["items"] = schema(s["items"])
        if "properties" in s:
            s["properties"] = {k: schema(v) for k, v in s["properties"].items()}
        return {k: v for k, v in s.items() if v is not None}

    return ToolSpec(doc["name"], doc.get("description", ""), schema(doc["parameters"]), False)


def model_calls(model: Model):
    """calls_for(case) asking `model` the case's question with its functions as tools.

    Example: tool_call_table(load_tool_cases(), model_calls(connect()))
    """
    return lambda case: (
        model.respond(
            [user(case["question"])], [bfcl_tool(d) for d in case["functions"]]
        ).tool_calls
    )


@dataclass
class ToolCallReport:
    rows: list  # [(case, Match)]

    def accuracy(self, category=None):
        rows = [m for c, m in self.rows if category in (None, c["category"])]
        return sum(m.ok for m in rows) / len(rows)

    def __repr__(self):
        lines = [f"{'category':<12} {'cases':>5} {'match':>6} {'accuracy':>9}  failed rules"]
        for category in ("simple", "multiple", "parallel", "irrelevance", None):
            rows = [m for c, m in self.rows if category in (None, c["category"])]
            kinds = Counter(m.kind for m in rows if not m.ok).most_common()
            lines.append(
                f"{category or 'all':<12} {len(rows):>5} {sum(m.ok for m in rows):>6} "
                f"{self.accuracy(category):>9.0%}  {', '.join(f'{k} {n}' for k, n in kinds)}"
            )
        return "\n".join(lines)


def tool_call_table(cases, calls_for=None) -> ToolCallReport:
    """AST-match every case: its scripted output, or calls_for(case) (e.g. model_calls(model)).

    A service failure counts as a miss, named service_error.
    Example: tool_call_table(load_tool_cases()).accuracy("parallel")  ->  0.5
    """
    rows = []
    for case in cases:
        try:
            calls = calls_for(case) if calls_for else case["output"]
        except ServiceError as exc:
            rows.append((case, Match(False, "service_error", str(exc))))
            continue
        rows.append((case, ast_match(calls, case["ground_truth"], case["functions"])))
    return ToolCallReport(rows)


@dataclass
class Suite:
    name: str
    about: str
    current: str  # the version under development: what the gate checks by default
    max_turns: int
    versions: dict  # name -> Version
    tasks: list  # [EvalTask]
    sources: dict  # handbook documents by name: what a task that must cite may cite

    def version(self, name=None):
        name = name or self.current
        if name not in self.versions:
            raise UserError(
                f"suite {self.name} has no version {name!r} — use one of {', '.join(self.versions)}"
            )
        return self.versions[name]

    def run(self, name=None, model_for=None, clock=time.perf_counter):
        """Run one version on every task (model_for: e.g. a live model for each task)."""
        version = self.version(name)
        return run_suite(self.tasks, version, model_for, self.sources, self.max_turns, clock)


def load_suite(path=AGENT_SUITE) -> Suite:
    """A task suite from its JSON file (a path, or a name in data/evals such as "agent_suite").

    Example: load_suite().run("v1").summary()["successes"]  ->  18
    """
    path = Path(path)
    if not path.exists() and (EVALS_DIR / f"{path}.json").exists():
        path = EVALS_DIR / f"{path}.json"
    fix = "give a suite file, or a name in data/evals such as agent_suite"
    data = read_json(path, "suite", fix)
    problem = _suite_problem(data)
    if problem:
        raise UserError(f"{path.name} is not a suite: {problem} — {fix}")
    tools = scenario_tools()
    tasks = []
    for t in data["tasks"]:
        unknown = [name for name in t["tools"] if name not in tools]
        if unknown:
            raise UserError(f"task {t['id']} names unknown tools {unknown} — use {list(tools)}")
        try:
            scripts = {v: [script_step(s) for s in steps] for v, steps in t["scripts"].items()}
        except RecursionError:
            raise UserError(f"task {t['id']}: its script is nested too deep — {fix}") from None
        tools_of = [tools[name] for name in t["tools"]]
        tasks.append(
            EvalTask(t["id"], t["task"], tools_of, t["answer"], t.get("cite", False), scripts)
        )
    versions = {
        name: Version(name, v["system"], v.get("about", "")) for name, v in data["versions"].items()
    }
    sources = {
        p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS_DIR.glob("handbook-*.md"))
    }
    return Suite(
        data["name"], data["about"], data["current"], data["max_turns"], versions, tasks, sources
    )


SUITE_SHAPE = {"name": str, "about": str, "current": str, "max_turns": int, "versions": dict}
TASK_SHAPE = {"id": str, "task": str, "tools": list, "answer": str, "scripts": dict}


def _suite_problem(data) -> str | None:
    """What makes `data` not a suite, in a few words; None when its shape is right."""
    if not isinstance(data, dict):
        return "it is not a JSON object"
    return _shape_problem(data) or _versions_problem(data) or _tasks_problem(data.get("tasks"))


def _shape_problem(data) -> str | None:
    """Each SUITE_SHAPE key of its type (a bool is no int), max_turns 1 to 100; or None."""
    for key, kind in SUITE_SHAPE.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            return f"{key!r} is missing or not {kind.__name__}"
    if not 0 < data["max_turns"] <= 100:
        return f"max_turns is {data['max_turns']}; give 1 to 100"
    return None


def _versions_problem(data) -> str | None:
    """Each version a system prompt (and an about) in text, the current one among them; or None."""
    for name, v in data["versions"].items():
        if not (isinstance(v, dict) and isinstance(v.get("system"), str)):
            return f"version {name!r} has no system prompt (text)"
        if not isinstance(v.get("about", ""), str):
            return f"version {name!r}: about is not text"
    if data["current"] not in data["versions"]:
        return f"current version {data['current']!r} is not among its versions"
    return None


def _tasks_problem(tasks) -> str | None:
    """Tasks given, each id once, each task of the right shape; or None."""
    if not isinstance(tasks, list) or not tasks:
        return "'tasks' is missing or empty"
    ids = [t.get("id") if isinstance(t, dict) else None for t in tasks]
    twice = next((i for i in ids if i is not None and ids.count(i) > 1), None)
    if twice is not None:
        return f"task id {twice!r} appears twice"
    return next((p for p in (_task_problem(i, t) for i, t in enumerate(tasks)) if p), None)


def _task_problem(i, t) -> str | None:
    """What makes task `i` not a task, or None."""
    wrong = [k for k, kind in TASK_SHAPE.items() if not isinstance(t, dict) or
             not isinstance(t.get(k), kind)]  # fmt: skip
    if wrong:
        return f"task {i + 1}: {wrong[0]!r} is missing or not {TASK_SHAPE[wrong[0]].__name__}"
    cite = t.get("cite", False)
    if not all(isinstance(n, str) for n in t["tools"]) or not isinstance(cite, bool):
        return f"task {t['id']}: tools must be names and cite true or false"
    if not all(isinstance(steps, list) for steps in t["scripts"].values()):
        return f"task {t['id']}: each script must be a list of steps"
    return None


def load_judge_labels(path=JUDGE_LABELS):
    """The human labels for judges: {"items": [{id, question, reference, answer, human}], "pairs":
    [{id, kind, question, reference, a, b, human}]}.

    Example: load_judge_labels()["items"][0]["human"]  ->  "pass"
    """
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _pyplot():
    """matplotlib's pyplot, without its one-time "building the font cache" notice on stderr (it
    would make a notebook's first run differ from every later one)."""
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    return plt


def plot_success(reports):
    """Success per agent version with 95% bootstrap intervals (bars, error bars).

    Example: fig = plot_success([suite.run("v1"), suite.run("v2")])
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = [r.version for r in reports]
    cis = [bootstrap_ci(r.successes()) for r in reports]
    rates = [c.estimate for c in cis]
    spread = [[c.estimate - c.low for c in cis], [c.high - c.estimate for c in cis]]
    ax.bar(names, rates, color="#7a9cc6")
    ax.errorbar(names, rates, yerr=spread, fmt="none", ecolor="black", capsize=8)
    ax.set(ylim=(0, 1.05), xlabel="agent version", ylabel="task success (share of tasks)")
    ax.set_title(f"Success on {len(reports[0].outcomes)} tasks, with 95% bootstrap intervals")
    fig.tight_layout()
    return fig


def plot_cost(reports):
    """Estimated cost of the whole suite against success, one point per agent version.

    Example: fig = plot_cost([suite.run("v1"), suite.run("v2")])
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for r in reports:
        s = r.summary()
        x, y = (s["cost"] or 0) * 1000, s["successes"] / s["cases"]
        ax.scatter([x], [y], s=60, color="#7a9cc6", edgecolor="black")
        ax.annotate(r.version, (x, y), textcoords="offset points", xytext=(8, 4))
    ax.margins(x=0.15)  # room for the labels of the outermost points
    ax.set(ylim=(0, 1.05), xlabel="estimated cost of the suite (USD per 1,000 runs)")
    ax.set(ylabel="task success (share of tasks)")
    ax.set_title("Cost against success (estimated prices, scripted token counts)")
    fig.tight_layout()
    return fig
