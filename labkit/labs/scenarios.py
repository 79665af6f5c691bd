"""04_loop: the frozen scenarios (data/evals/loop_scenarios.json), their tools (with
exchange_rate's deliberate bug) and the evaluation table.

Outside the lessons (see labkit.labs).
"""

import json
import time
from dataclasses import dataclass

from ..config import EVALS_DIR
from ..errors import UserError
from ..loop import run
from ..models import (
    Model,
    ScriptedModel,
    call,
    incomplete,
    raw_call,
    say,
    turn,
)
from ..toolbox import calculate, get_weather, list_docs, read_doc
from ..tools import tool
from ..trace import clip

# ---------------------------------------------------------------- 04_loop: scenarios

RATES = {"EUR": 1.0, "GBP": 0.86, "JPY": 163.0, "USD": 1.08}  # invented teaching data


@tool
def exchange_rate(currency: str) -> dict:
    """How many units of a currency one euro buys, from fixed teaching data (not live rates).

    Args:
        currency: a three-letter currency code, e.g. "JPY"
    """
    # A deliberate bug for the lesson: an unknown code raises KeyError instead of a helpful
    # ToolError.
    return {
        "currency": currency,
        "per_euro": RATES[currency.upper()],
        "source": "fixed teaching data",
    }


SCENARIOS = EVALS_DIR / "loop_scenarios.json"


def scenario_tools():
    """The tools a scenario may name, by name (the docs tools read data/docs)."""
    return {t.name: t for t in (calculate, get_weather, list_docs, read_doc, exchange_rate)}


STEP_SHAPES = {  # each step's keys and the types they must have
    "say": {"say": str},
    "call": {"call": str, "arguments": dict},
    "raw_call": {"raw_call": str, "arguments": str},
    "incomplete": {"incomplete": str, "reason": (str, type(None))},
    "turn": {"turn": list},
}
STEP_FORMS = {
    "say": '{"say": "text"}',
    "call": '{"call": "name", "arguments": {...}}',
    "raw_call": '{"raw_call": "name", "arguments": "text"}',
    "incomplete": '{"incomplete": "text", "reason": "max_output_tokens"}',
    "turn": '{"turn": [step, ...]}',
}


def script_step(data):
    """A scripted Step from its JSON form: {"say": ...}, {"call": name, "arguments": {...}},
    {"raw_call": name, "arguments": "..."}, {"incomplete": text, "reason": ...} or {"turn": [...]}.

    Example: script_step({"call": "get_weather", "arguments": {"city": "Paris"}})
    """
    kind = next((k for k in STEP_SHAPES if isinstance(data, dict) and k in data), None)
    wrong = [
        k for k, want in STEP_SHAPES.get(kind, {}).items() if not isinstance(data.get(k), want)
    ]
    if wrong:
        raise UserError(
            f"scenario step {clip(repr(data), 80)}: its {wrong[0]!r} has the wrong type — "
            f"a {kind} step is {STEP_FORMS[kind]}"
        )
    if kind == "say":
        return say(data["say"])
    if kind == "call":
        return call(data["call"], **data["arguments"])
    if kind == "raw_call":
        return raw_call(data["raw_call"], data["arguments"])
    if kind == "incomplete":
        return incomplete(data["incomplete"], data.get("reason"))
    if kind == "turn":
        return turn(*map(script_step, data["turn"]))
    raise UserError(
        f"scenario step {clip(repr(data), 80)} is not a step — use say, call, raw_call, "
        "incomplete or turn"
    )


@dataclass
class Scenario:
    name: str
    task: str
    tools: list  # tool names, see scenario_tools()
    script: list  # [Step, ...]: what the scripted model says
    expect_status: str  # the stop reason the scripted run must end with
    answer_contains: list  # words a successful answer contains (case-insensitive)
    trace: list  # the expected trace lines of the scripted run
    max_turns: int = 6
    max_calls: int = 8
    about: str = ""


def load_scenarios(path=SCENARIOS):
    """The frozen scenario set. Example: [s.name for s in load_scenarios()]"""
    data = json.loads(open(path, encoding="utf-8").read())
    return [
        Scenario(
            s["name"],
            s["task"],
            s["tools"],
            [script_step(d) for d in s["script"]],
            s["expect_status"],
            s.get("answer_contains", []),
            s.get("trace", []),
            s.get("max_turns", 6),
            s.get("max_calls", 8),
            s.get("about", ""),
        )
        for s in data["scenarios"]
    ]


def run_scenario(scenario, model: Model | None = None, clock=time.perf_counter):
    """Run one scenario on its scripted model (or on `model`, e.g. a live one)."""
    tools = [scenario_tools()[name] for name in scenario.tools]
    model = model if model is not None else ScriptedModel(scenario.script)
    return run(scenario.task, model, tools, scenario.max_turns, scenario.max_calls, clock=clock)


def succeeded(scenario, result):
    """Task success: completed, and the answer has every expected word."""
    return result.status == "completed" and all(
        w.casefold() in result.answer.casefold() for w in scenario.answer_contains
    )


@dataclass
class ScenarioReport:
    rows: list  # [(scenario name, RunResult, success), ...]

    def summary(self):
        results = [r for _, r, _ in self.rows]
        calls = sum(r.tool_calls for r in results)
        return {
            "scenarios": len(results),
            "success_rate": sum(ok for *_, ok in self.rows) / len(results),
            "mean_turns": sum(r.turns for r in results) / len(results),
            "tool_failure_rate": sum(r.tool_failures for r in results) / calls if calls else 0.0,
            "tokens": sum(r.usage.total_tokens for r in results),
        }

    def __repr__(self):
        head = (
            f"{'scenario':<24} {'status':<17} {'turns':>5} {'calls':>5} {'failed':>6} "
            f"{'tokens':>6}  success"
        )
        lines = [head] + [
            f"{name:<24} {r.status:<17} {r.turns:>5} {r.tool_calls:>5} {r.tool_failures:>6} "
            f"{r.usage.total_tokens:>6}  {'yes' if ok else 'no'}"
            for name, r, ok in self.rows
        ]
        s = self.summary()
        return "\n".join(
            lines
            + [
                f"success rate {s['success_rate']:.0%}   mean turns {s['mean_turns']:.1f}   "
                f"tool failure rate {s['tool_failure_rate']:.0%}   tokens {s['tokens']}"
            ]
        )


def evaluate_scenarios(scenarios, model_for=None):
    """Run every scenario and score it. model_for(scenario) picks the model (default: its script).

    Example: evaluate_scenarios(load_scenarios())   # offline; model_for=lambda s:
    connect(script=s.script) for live
    """
    rows = []
    for scenario in scenarios:
        result = run_scenario(scenario, model_for(scenario) if model_for else None)
        rows.append((scenario.name, result, succeeded(scenario, result)))
    return ScenarioReport(rows)
