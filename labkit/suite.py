"""A frozen task suite run per agent version: trajectory metrics, baselines and a regression gate.

Built in 10_evals (with labkit.evals for scoring and labkit.stats for the numbers). `run_suite`
runs every task through the 05 guarded loop and scores its answer; a SuiteReport is one version's
table (success, turns, tool failures, stop reasons, tokens, estimated cost, latency); `gate`
compares a run with a stored baseline, case by case, and fails a significant drop.
Left out, and what production uses: repeated runs per task (pass@k), parallel execution, run
histories and dashboards (Inspect, promptfoo, LangSmith).
"""

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .budget import PRICES, Budget
from .errors import UserError
from .evals import score_answer
from .guardrails import run_guarded
from .models import Model, ScriptedModel
from .stats import Comparison, compare, format_p
from .trace import clip

MAX_FILE_BYTES = 20_000_000  # a suite or baseline larger than this is refused, never read whole


@dataclass
class EvalTask:
    """One task of a frozen suite: the question, the tools offered, the truth, whether the answer
    must cite, and each agent version's script (what that version says to it, offline)."""

    id: str
    task: str
    tools: list  # labkit Tools
    answer: str  # the truth, for quasi_exact_match
    cite: bool = False  # the answer must cite the documents it used
    scripts: dict = field(default_factory=dict)  # version name -> [Step]


@dataclass(frozen=True)
class Version:
    """An agent version: a name and its system prompt (live, the prompt is what differs)."""

    name: str
    system: str
    about: str = ""


@dataclass(frozen=True)
class Outcome:
    id: str
    success: bool  # the run completed and its answer passed
    status: str  # the run's stop reason
    turns: int
    tool_calls: int
    tool_failures: int
    tokens: int
    cost: float | None  # USD, estimated with PRICES; None for a model without a price
    seconds: float  # how long the run took
    final: str  # the answer that was scored
    calls: tuple = ()  # each tool call in order: (name, arguments, "ok" or its error kind)


def run_task(
    task: EvalTask,
    model: Model,
    version: Version,
    sources: dict[str, str] | None = None,
    max_turns: int = 6,
    clock: Callable[[], float] = time.perf_counter,
    tool_choice: str | Callable[[int], str] = "auto",
) -> Outcome:
    """Run one task through the 05 guarded loop and score it: success is an answer that passes
    score_answer (with `sources` when the task must cite); a run stopped by a limit has none.
    tool_choice: the run's policy, as for run_guarded (e.g. "required-first").

    Example: run_task(task, ScriptedModel(task.scripts["v1"]), v1).success  ->  True
    """
    result = run_guarded(
        task.task,
        model,
        task.tools,
        budget=Budget(max_turns=max_turns),
        system=version.system,
        clock=clock,
        tool_choice=tool_choice,
    )
    score = score_answer(result.answer, task.answer, sources if task.cite else None)
    results = [e.detail for e in result.trace.events if e.kind == "tool" and "result" in e.detail]
    return Outcome(
        task.id,
        score.passed,  # a run that did not complete has no answer (loop.run), so it fails
        result.status,
        result.turns,
        result.tool_calls,
        result.tool_failures,
        result.usage.total_tokens,
        float(result.budget.spent.cost) if result.budget.model in PRICES else None,
        result.elapsed,
        score.final,
        tuple((r["name"], r["arguments"], _kind(r["result"])) for r in results),
    )


def _kind(result) -> str:
    """A tool result in one word: "ok", or its error kind (e.g. "invalid_arguments")."""
    if not isinstance(result, dict):
        return "error"
    return "ok" if result.get("ok", False) else str(result.get("error", "error"))


def _money(cost):
    return "n/a" if cost is None else f"{cost:.5f}"


@dataclass
class SuiteReport:
    """One agent version's outcomes on a suite; it shows as one table of trajectory metrics."""

    version: str
    outcomes: list  # [Outcome], in suite order

    def successes(self) -> list[bool]:
        return [o.success for o in self.outcomes]

    def summary(self) -> dict:
        o, costs = self.outcomes, [x.cost for x in self.outcomes]
        return {
            "version": self.version,
            "cases": len(o),
            "successes": sum(x.success for x in o),
            "mean_turns": sum(x.turns for x in o) / len(o),
            "tool_failures": sum(x.tool_failures for x in o),
            "stops": dict(Counter(x.status for x in o).most_common()),
            "tokens": sum(x.tokens for x in o),
            "cost": None if None in costs else sum(costs),
            "median_seconds": sorted(x.seconds for x in o)[len(o) // 2],
        }

    def __repr__(self):
        lines = [
            f"{'task':<5} {'success':<7} {'stop':<16} {'turns':>5} {'calls':>5} {'failed':>6} "
            f"{'tokens':>6} {'cost $':>8}  {'final answer':<26} latency"
        ]
        lines += [
            f"{o.id:<5} {'yes' if o.success else 'no':<7} {o.status:<16} {o.turns:>5} "
            f"{o.tool_calls:>5} {o.tool_failures:>6} {o.tokens:>6} {_money(o.cost):>8}  "
            f"{clip(repr(o.final), 26):<26} {o.seconds * 1000:.1f} ms"
            for o in self.outcomes
        ]
        return "\n".join(lines + [summary_table([self]).splitlines()[1]])


def summary_table(reports: list) -> str:
    """One line per agent version: success, turns, tool failures, stops, tokens, cost, latency.

    Example: print(summary_table([run_suite(tasks, v1), run_suite(tasks, v2)]))
    """
    lines = [
        f"{'version':<8} {'success':<12} {'turns':>5} {'failed':>6} {'tokens':>6} "
        f"{'cost $':>8}  {'stops':<40} median latency"
    ]
    for r in reports:
        s = r.summary()
        stops = ", ".join(f"{k} {v}" for k, v in s["stops"].items())
        rate = s["successes"] / s["cases"]
        lines.append(
            f"{s['version']:<8} {s['successes']:>2}/{s['cases']:<2} ({rate:>4.0%})"
            f" {s['mean_turns']:>5.1f} {s['tool_failures']:>6} {s['tokens']:>6} "
            f"{_money(s['cost']):>8}  {stops:<40} {s['median_seconds'] * 1000:.1f} ms"
        )
    return "\n".join(lines)


def run_suite(
    tasks: list[EvalTask],
    version: Version,
    model_for: Callable[[EvalTask], Model] | None = None,
    sources: dict[str, str] | None = None,
    max_turns: int = 6,
    clock: Callable[[], float] = time.perf_counter,
) -> SuiteReport:
    """Run every task with one agent version. model_for(task) picks the model; by default each
    task's script for this version, on a ScriptedModel.

    Example: run_suite(tasks, v1)        # live: model_for=lambda t: connect(script=t.scripts["v1"])
    """
    outcomes = []
    for task in tasks:
        if model_for is None and version.name not in task.scripts:
            raise UserError(
                f"task {task.id} has no script for version {version.name!r} — add one to the "
                "suite, or pass model_for (e.g. a live model)"
            )
        model = model_for(task) if model_for else ScriptedModel(task.scripts[version.name])
        outcomes.append(run_task(task, model, version, sources, max_turns, clock))
    return SuiteReport(version.name, outcomes)


# ---------------------------------------------------------------- the regression gate


def save_baseline(report: SuiteReport, path: str | Path) -> None:
    """Store a run's per-case successes as the baseline later runs are gated against.

    Example: save_baseline(run_suite(tasks, v1), "agent_suite.baseline.json")
    """
    data = {"version": report.version, "cases": {o.id: o.success for o in report.outcomes}}
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_json(path: str | Path, what: str, fix: str, limit: int = MAX_FILE_BYTES) -> Any:
    """A JSON file's value, read at most `limit` bytes (a device file cannot fill memory); any
    problem is one UserError naming `what` and how to `fix` it.

    Example: read_json("data/evals/agent_suite.json", "the suite", "give a suite file")["name"]
    """
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"no {what} file {str(path)!r} — {fix}") from None
    except OSError as exc:
        raise UserError(f"{what} {str(path)!r} cannot be read ({exc.strerror}) — {fix}") from None
    if len(data) > limit:
        raise UserError(f"{what} {str(path)!r} is over {limit:,} bytes — {fix}")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        problem = clip(exc, 80) if isinstance(exc, ValueError) else "it is nested too deep"
    raise UserError(f"{what} {str(path)!r} is not JSON ({problem}) — {fix}")


def load_baseline(path: str | Path) -> dict:
    """A stored baseline: {"version": name, "cases": {task id: success}}, checked.

    Example: load_baseline("data/evals/agent_suite.baseline.json")["version"]  ->  "v1"
    """
    data = read_json(path, "baseline", "record one with --save FILE")
    cases = data.get("cases") if isinstance(data, dict) else None
    version = data.get("version", "?") if isinstance(data, dict) else None
    if (
        not isinstance(cases, dict)
        or not cases
        or not all(isinstance(v, bool) for v in cases.values())
        or not isinstance(version, str)
    ):
        raise UserError(
            f"baseline {str(path)!r} is not a baseline — it needs "
            '{"version": ..., "cases": {"t01": true, ...}}; record it again with --save'
        )
    return data


@dataclass
class GateResult:
    passed: bool
    comparison: Comparison
    regressed: list  # task ids the baseline passed and this run failed
    message: str

    def __str__(self):
        return self.message


def gate(report: SuiteReport, baseline: dict, alpha: float = 0.05) -> GateResult:
    """Fail when this run's success is significantly below the baseline's, on the same cases.

    Paired by task id; McNemar's exact test on the cases that changed (labkit.stats.compare). A
    drop that is not significant passes, and the message says how many cases got worse.
    Example: gate(run_suite(tasks, v3), load_baseline(path)).passed  ->  False
    """
    old, new = baseline["cases"], {o.id: o.success for o in report.outcomes}
    if old.keys() != new.keys():
        only_old, only_new = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
        raise UserError(
            f"the baseline and this run hold different cases (only in the baseline: "
            f"{only_old or 'none'}; only in this run: {only_new or 'none'}) — record a new "
            "baseline with --save"
        )
    ids = sorted(old)
    c = compare([old[i] for i in ids], [new[i] for i in ids], alpha)
    regressed = [i for i in ids if old[i] and not new[i]]
    passed, p = c.verdict != "worse", format_p(c.p_value, alpha)  # p never misreads at alpha
    verdict = (
        f"PASS: no significant drop below the baseline (p = {p} >= {alpha})"
        if passed and c.verdict != "better"
        else f"PASS: success rose significantly (p = {p} < {alpha})"
        if passed
        else f"FAIL: success dropped significantly below the baseline (p = {p} < {alpha})"
    )
    lines = [
        f"baseline {baseline.get('version', '?')}: {sum(old.values())}/{len(ids)} passed; this "
        f"run {report.version}: {sum(new.values())}/{len(ids)} passed",
        str(c),
        f"got worse: {', '.join(regressed) or 'none'}",
        verdict,
    ]
    return GateResult(passed, c, regressed, "\n".join(lines))
