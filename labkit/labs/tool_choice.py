"""10_evals: the agent suite under three tool_choice policies, in one table.

Outside the lessons (see labkit.labs). Every task runs once per policy: "auto" (the model decides),
"required-first" (a tool call required on turn 1, auto after) and "by name" (turn 1 forced to the
tool the version's script calls first: the right tool by construction, so what it measures is the
arguments). Per policy: the right first tool, valid arguments (parsed, and fit the schema), task
success (each with its 95% bootstrap interval), the calls the tools ran without error, tokens; then
each forced policy against auto on the same cases (McNemar).
Recorded from SmolLM2 by `make tool-choice-table`; 10_evals replays the cassette.
"""

from dataclasses import dataclass

from ..models import ScriptedModel
from ..stats import bootstrap_ci, compare
from ..suite import run_task
from ..trace import clip

POLICIES = ("auto", "required-first", "by name")
# the result kinds of arguments labkit could not accept: not JSON, not the schema, not text
ARGUMENT_ERRORS = ("invalid_json", "invalid_arguments", "invalid_text", "malformed_call")
CASSETTE = "10_tool_choice"  # data/cassettes/10_tool_choice.jsonl


def first_tool(task, version: str) -> str | None:
    """The tool a version's script calls first (the reference trajectory), or None.

    Example: first_tool(load_suite().tasks[0], "v2")  ->  "get_weather"
    """
    return next((step.calls[0][0] for step in task.scripts.get(version, []) if step.calls), None)


def choice_for(policy: str, task, version: str):
    """The run's tool_choice for one task under a policy: "by name" names its first tool."""
    return first_tool(task, version) if policy == "by name" else policy


@dataclass
class PolicyRow:
    policy: str
    outcomes: list  # [suite.Outcome], in suite order
    right_tool: list  # per task: the first call is the reference's first tool
    valid: list  # per task: it called a tool and every call's arguments parsed and fit the schema

    def success(self) -> list:
        return [o.success for o in self.outcomes]


@dataclass
class PolicyReport:
    version: str
    rows: list  # [PolicyRow], in POLICIES order

    def __repr__(self):
        n = len(self.rows[0].outcomes)
        head = (
            f"{'policy':<15} {'right tool':<24} {'valid arguments':<24} {'success':<24} "
            f"{'calls ran ok':>12} {'tokens':>6}"
        )
        lines = [f"{n} tasks, version {self.version}", head]
        for r in self.rows:
            cells = [_rate(r.right_tool), _rate(r.valid), _rate(r.success())]
            made = [c[2] for o in r.outcomes for c in o.calls]
            calls = f"{made.count('ok')}/{len(made)}"
            tokens = sum(o.tokens for o in r.outcomes)
            lines.append(f"{r.policy:<15} " + " ".join(f"{c:<24}" for c in cells)
                         + f" {calls:>12} {tokens:>6}")  # fmt: skip
        auto = self.rows[0]
        for r in self.rows[1:]:
            right = compare(auto.right_tool, r.right_tool)
            lines.append(f"{r.policy} vs auto, right tool: {right}")
            lines.append(f"{r.policy} vs auto, success: {compare(auto.success(), r.success())}")
        return "\n".join(lines)


def _rate(values) -> str:
    i = bootstrap_ci(values)
    return f"{sum(values):>2}/{len(values)} {i.estimate:>4.0%} [{i.low:.0%}, {i.high:.0%}]"


def policy_table(suite, model_for=None, version: str = "v2", policies=POLICIES) -> PolicyReport:
    """Run every task of `suite` once per policy; model_for(task) gives a model (default: the
    version's script, which obeys any of the three policies).

    Example: print(policy_table(load_suite(), lambda t: connect(mode="replay", cassette=CASSETTE)))
    """
    v, rows = suite.version(version), []
    for policy in policies:
        outcomes, right, valid = [], [], []
        for task in suite.tasks:
            model = model_for(task) if model_for else ScriptedModel(task.scripts[version])
            choice = choice_for(policy, task, version)
            o = run_task(task, model, v, suite.sources, suite.max_turns, tool_choice=choice)
            outcomes.append(o)
            right.append(bool(o.calls) and o.calls[0][0] == first_tool(task, version))
            valid.append(bool(o.calls) and all(c[2] not in ARGUMENT_ERRORS for c in o.calls))
        rows.append(PolicyRow(policy, outcomes, right, valid))
    return PolicyReport(version, rows)


def calls_made(report: PolicyReport, policy: str) -> list:
    """Every tool call of one policy's runs, as "task: tool(arguments) -> ok or error kind".

    Example: calls_made(policy_table(load_suite()), "by name")[0]
             ->  't01: get_weather({"city": "Paris"}) -> ok'
    """
    row = next(r for r in report.rows if r.policy == policy)
    return [f"{o.id}: {n}({clip(a, 60)}) -> {k}" for o in row.outcomes for n, a, k in o.calls]
