"""The agent loop: call the model, run the tools it asks for, repeat until it answers or a limit stops it.

Built in 04_loop. `run()` is the loop (its steps are numbered in its docstring) and returns a
RunResult with one stop reason and a trace. `run_react()` is the same loop over the ReAct text
protocol; `plan_and_execute()` plans steps first, then runs each. `evaluate()` scores the frozen
scenario set in data/evals/loop_scenarios.json.
Deliberately left out: guardrails (05_guardrails plugs in through `guard`), retrying model calls,
streaming, async and parallel tool execution, durable state (07_runtime).
"""
import json
import re
import time
from dataclasses import dataclass, field, replace

from .config import REPO_ROOT, explain
from .errors import ModelBehaviorError, ServiceError, UserError
from .models import ScriptedModel, Step, ToolCall, Usage, check_pairing, tool_message, user
from .models import system as system_message
from .tools import ToolRegistry, execute, failure, result_text, tool
from .trace import Trace, clip, describe_call

STOP_REASONS = ("completed", "empty_output", "model_incomplete", "turn_limit", "tool_limit",
                "budget_exhausted", "permission_denied", "repeated_action", "parse_error",
                "needs_reconcile", "service_error",
                # 07_runtime's run_agent: a policy step is not a model turn; a goal can be left unverified
                "step_limit", "unverified", "cancelled")
DEFAULT_SYSTEM = ("You are a careful assistant. Use a tool when it helps. When a tool result says "
                  '"ok": false, read its message and fix your call. Answer briefly and say where facts came from.')
NEXT_STEPS = {                          # what a person can do next, per stop reason
    "completed": "nothing: the task is answered",
    "empty_output": "the model said nothing — run again; if it repeats, rephrase the task or raise max_output_tokens",
    "model_incomplete": "the reply was cut short — raise max_output_tokens or shorten the input, then run again",
    "turn_limit": "raise max_turns or split the task; `unfinished` says what is left",
    "tool_limit": "raise max_calls or narrow the task; `unfinished` lists the calls not run",
    "permission_denied": "ask the user to approve the refused tool, or do the task without it",
}


@dataclass(frozen=True)
class Decision:
    """What a guard decided: "allow", "refuse" (the call is not run; the model reads why) or "stop"."""
    action: str               # "allow" | "refuse" | "stop"
    reason: str = ""          # stop: a stop reason from STOP_REASONS; refuse: the error kind the model sees
    message: str = ""         # one line: why, and for a refusal what the model should do instead


class Guard:
    """The seam for 05_guardrails. Subclass it; every method's default lets the loop go on.

    before_model(run) and before_tool(run, call, tool) return None or a Decision (`run` is the
    RunResult so far: turns, tool_calls, usage, messages; `tool` is None for an unknown name);
    after_tool(run, call, result) returns the result the model will read (e.g. wrapped as
    untrusted data). Every Decision and every changed result is recorded in the trace.
    """

    def before_model(self, run):
        return None

    def before_tool(self, run, call, tool):
        return None

    def after_tool(self, run, call, result):
        return result


@dataclass
class RunResult:
    status: str = "running"   # a stop reason from STOP_REASONS once the run ends
    answer: str = ""          # the final text, only when status == "completed"
    turns: int = 0            # model calls made
    tool_calls: int = 0       # tool calls answered with a result
    usage: Usage = field(default_factory=Usage)
    elapsed: float = 0.0      # seconds, measured with the clock passed to run()
    trace: Trace = field(default_factory=Trace)
    completed: list = field(default_factory=list)     # tool calls that succeeded: ['get_weather({...})']
    unfinished: list = field(default_factory=list)    # what is not done, one line each
    next_step: str = ""       # what a person can do next
    messages: list = field(default_factory=list)      # the whole history, every call paired with its output
    tool_failures: int = 0    # results with "ok": false
    task: str = ""
    failed: dict = field(default_factory=dict, repr=False)    # tool name -> last failure not yet recovered

    def __repr__(self):
        tokens = f"{self.usage.total_tokens}{' (estimated)' if self.usage.estimated else ''}"
        lines = [f"status:     {self.status}", f"answer:     {clip(self.answer, 90)!r}",
                 f"turns:      {self.turns}   tool calls: {self.tool_calls}   failed: {self.tool_failures}"
                 f"   tokens: {tokens}"]
        lines += [f"completed:  {c}" for c in self.completed] + [f"unfinished: {u}" for u in self.unfinished]
        return "\n".join(lines + [f"next step:  {self.next_step}"])


def next_action(reply):
    """What the loop does with a reply: "model_incomplete", "run_tools", "empty_output" or "completed".

    Example: next_action(Reply("", [ToolCall("call_1", "calculate", "{}")]))  ->  "run_tools"
    """
    if reply.status != "completed":
        return "model_incomplete"       # subtle: never run calls from a cut-short reply
    if reply.tool_calls:
        return "run_tools"
    return "completed" if reply.text.strip() else "empty_output"


def _consult(run, decision, where, actions=("allow", "refuse", "stop")):
    """Record a guard's decision; return it when it refuses or stops, None when it allows."""
    if decision is None:
        return None
    if decision.action not in actions:
        raise UserError(f"guard returned action {decision.action!r} {where} — use {' or '.join(actions)}")
    if decision.action == "stop" and decision.reason not in STOP_REASONS:
        raise UserError(f"guard stop reason {decision.reason!r} is not one of {', '.join(STOP_REASONS)}")
    run.trace.add("guard", run.turns, f"{where}: {decision.action} {decision.reason} {decision.message}".strip(),
                  action=decision.action, reason=decision.reason, message=decision.message)
    return None if decision.action == "allow" else decision


def _record(run, call, result, elapsed=0.0):
    """Append one call's result to the history (paired by call_id) and the trace; count it."""
    run.tool_calls += 1
    run.messages.append(tool_message(call, result if isinstance(result, str) else result_text(result)))
    run.trace.tool(run.turns, call, result, elapsed)
    ok = not isinstance(result, dict) or result.get("ok", False)
    if ok:
        run.completed.append(describe_call(call))
        run.failed.pop(call.name, None)
    else:
        run.tool_failures += 1
        run.failed[call.name] = f"failed: {describe_call(call)} -> {result.get('error')}"


def _finish(run, reason, message, clock, calls=()):
    """End the run: answer unanswered calls with "not_run", write the stop, the report and the time."""
    answered = {m.tool_call_id for m in run.messages if m.role == "tool"}
    for call in [c for c in calls if c.id not in answered]:   # subtle: an unanswered call makes the history unsendable
        run.messages.append(tool_message(call, result_text(failure("not_run", f"not run: the run stopped ({reason})"))))
        run.trace.add("tool", run.turns, f"{describe_call(call)} -> not run ({reason})", call_id=call.id)
        run.unfinished.append(f"not run: {describe_call(call)}")
    run.status = reason
    run.trace.stop(run.turns, reason, message)
    if reason != "completed":
        run.unfinished += list(run.failed.values()) + [f"no final answer yet for: {clip(run.task, 70)}"]
    run.next_step = NEXT_STEPS.get(reason, message)
    run.elapsed = clock() - run.elapsed
    return run


def _call_tool(run, call, registry, guard, clock):
    """Step 5 for one call. Returns a Decision when the run must stop, else None."""
    tool = registry.tools.get(call.name)
    decision = _consult(run, guard.before_tool(run, call, tool), f"before {call.name}")
    if decision and decision.action == "stop":
        return decision
    started = clock()
    result = failure(decision.reason or "refused", decision.message) if decision else execute(call, registry)
    checked = guard.after_tool(run, call, result)
    if checked is not result:
        run.trace.add("guard", run.turns, f"after {call.name}: result changed", result=checked)
    _record(run, call, checked, clock() - started)
    if isinstance(result, dict) and result.get("error") == "permission_denied":
        return Decision("stop", "permission_denied", result["message"])
    return None


def run(task, model, tools, max_turns=6, max_calls=8, system=None, history=(), guard=None,
        clock=time.perf_counter):
    """Run the agent loop on one task until the model answers or a limit stops it.

    1. Start the history: the system prompt, earlier messages (paired; system messages in them are
       dropped, so a finished run's `messages` can be passed on), the task as a user message.
    2. Before each model call ask the guard, then check max_turns (stop: turn_limit).
    3. Call the model with the history and the tools; add its reply to the trace and the history.
    4. Decide with next_action(reply): cut short -> model_incomplete; no calls -> completed with
       the text as answer, or empty_output when there is no text.
    5. For each tool call, in order: check max_calls (stop: tool_limit), ask the guard, execute it
       (bad arguments and crashes become results the model reads), let the guard see the result,
       append it paired by call_id. A permission_denied result stops the run.
    6. Go back to 2.
    Every stop answers the calls still pending with a "not_run" result, so the history stays paired.
    Example: run("Weather in Paris?", ScriptedModel([call("get_weather", city="Paris"), say("14 °C")]),
                 [get_weather]).status  ->  "completed"
    """
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    guard = guard or Guard()
    history = [m for m in history if m.role != "system"]   # subtle: a finished run's messages start with one
    check_pairing(history)
    result = RunResult(trace=Trace(clock), task=task, elapsed=clock())     # elapsed holds the start until the end
    result.messages = [system_message(DEFAULT_SYSTEM if system is None else system), *history, user(task)]
    while True:
        decision = _consult(result, guard.before_model(result), "before model", ("allow", "stop"))
        if decision:
            return _finish(result, decision.reason, decision.message, clock)
        if result.turns >= max_turns:
            return _finish(result, "turn_limit", f"used all {max_turns} turns", clock)
        result.turns += 1
        started = clock()
        try:
            reply = model.respond(result.messages, list(registry))
        except ServiceError as exc:
            return _finish(result, "service_error", explain(exc), clock)
        result.usage = result.usage + (reply.usage or Usage())
        result.trace.model(result.turns, reply, clock() - started)
        result.messages.append(reply.to_message())
        action = next_action(reply)
        if action != "run_tools":
            result.answer = reply.text.strip() if action == "completed" else ""
            return _finish(result, action, reply.incomplete_reason or "", clock, reply.tool_calls)
        for call in reply.tool_calls:
            if result.tool_calls >= max_calls:
                return _finish(result, "tool_limit", f"more than {max_calls} tool calls", clock, reply.tool_calls)
            decision = _call_tool(result, call, registry, guard, clock)
            if decision:
                return _finish(result, decision.reason, decision.message, clock, reply.tool_calls)


# ---------------------------------------------------------------- the ReAct text protocol

REACT_PROMPT = """Answer the task. You can use these tools:
{tools}

Work step by step. In each reply write either one action:

Thought: what you will do next, and why
Action: the tool name
Action Input: the arguments, as one JSON object

or, when you know the answer:

Thought: why you are done
Finish[your answer]

After an action you get "Observation: <the tool result as JSON>". Write one action per reply and
never write an Observation yourself."""


def describe_tools(registry):
    """One line per tool for a text prompt: name(argument: type, ...): description."""
    lines = []
    for t in registry:
        args = ", ".join(f"{name}: {schema.get('type')}" for name, schema in t.parameters["properties"].items())
        lines.append(f"- {t.name}({args}): {t.description}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ReactStep:
    kind: str                 # "action" | "finish"
    thought: str = ""
    tool: str = ""            # action: the tool name
    arguments: str = "{}"     # action: the raw JSON text, parsed and validated later by execute()
    answer: str = ""          # finish: the final answer


def parse_react(text):
    """Read one ReAct reply; tolerant of prose around it, code fences and case drift.

    Raises ModelBehaviorError (with what to write instead) when there is no Action or Finish.
    Example: parse_react('Thought: sum\\nAction: calculate\\nAction Input: {"expression": "2+2"}')
             ->  ReactStep("action", "sum", "calculate", '{"expression": "2+2"}')
    """
    text = re.sub(r"```[A-Za-z]*", "", text or "")
    text = re.split(r"(?im)^\s*observation\s*:", text)[0]      # subtle: what follows is invented
    thought = re.search(r"(?im)^\s*thought\s*:\s*(.*)$", text)
    thought = thought.group(1).strip() if thought else ""
    action = re.search(r"(?im)^\s*action\s*:\s*[`'\"]?([A-Za-z0-9_-]+)", text)
    finish = re.search(r"(?is)\bfinish\s*\[(.*)\]", text) or re.search(r"(?is)final answer\s*:\s*(.+)", text)
    if action and (not finish or action.start() < finish.start()):
        given = re.search(r"(?is)action[\s_]*input\s*:\s*(.*)", text[action.end():])
        raw = given.group(1).strip() if given else ""
        start = raw.find("{")
        try:                            # cut the JSON object out of any prose after it
            raw = raw[start:json.JSONDecoder().raw_decode(raw, start)[1]] if start >= 0 else raw
        except ValueError:
            pass                        # execute() will explain what is wrong with it
        return ReactStep("action", thought, action.group(1), raw.strip() or "{}")
    if finish and finish.group(1).strip():
        return ReactStep("finish", thought, answer=finish.group(1).strip())
    raise ModelBehaviorError("no Action or Finish[...] found in the reply — write 'Action: <tool>' and "
                             "'Action Input: {...}', or 'Finish[<answer>]'")


def run_react(task, model, tools, max_turns=6, max_calls=8, clock=time.perf_counter):
    """The loop over the ReAct text protocol: tools are described in the prompt, not sent as tools.

    A reply that cannot be parsed is answered with an Observation saying how to fix it; two in a
    row stop the run (parse_error). Example: run_react("2+2?", model, [calculate]).answer
    """
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    result = RunResult(trace=Trace(clock), task=task, elapsed=clock())
    result.messages = [system_message(REACT_PROMPT.format(tools=describe_tools(registry))), user(task)]
    unreadable = 0
    while True:
        if result.turns >= max_turns:
            return _finish(result, "turn_limit", f"used all {max_turns} turns", clock)
        result.turns += 1
        try:
            reply = model.respond(result.messages, ())     # no structured tools: the protocol is text
        except ServiceError as exc:
            return _finish(result, "service_error", explain(exc), clock)
        result.usage = result.usage + (reply.usage or Usage())
        result.trace.model(result.turns, reply)
        result.messages.append(reply.to_message())
        if reply.status != "completed":
            return _finish(result, "model_incomplete", reply.incomplete_reason or "", clock)
        try:
            step = parse_react(reply.text)
        except ModelBehaviorError as exc:
            unreadable += 1
            if unreadable == 2:
                return _finish(result, "parse_error", "two replies in a row could not be parsed", clock)
            result.trace.add("note", result.turns, f"unparsable reply: {exc}")
            result.messages.append(user(f"Observation: {exc}"))
            continue
        unreadable = 0
        if step.kind == "finish":
            result.answer = step.answer
            return _finish(result, "completed", "", clock)
        if result.tool_calls >= max_calls:
            return _finish(result, "tool_limit", f"more than {max_calls} tool calls", clock)
        call = ToolCall(f"react_{result.tool_calls + 1}", step.tool, step.arguments)
        outcome = execute(call, registry)
        _record(result, call, outcome)
        result.messages[-1] = user("Observation: " + result_text(outcome))   # text protocol: no tool role
        if outcome.get("error") == "permission_denied":
            return _finish(result, "permission_denied", outcome["message"], clock)


# ---------------------------------------------------------------- plan-and-execute

PLANNER_PROMPT = """Break the task into at most {max_steps} short steps, each doable with these tools:
{tools}
Reply with a numbered list of steps and nothing else. The last step answers the task."""
EXECUTOR_PROMPT = "Task: {task}\nPlan: {plan}\nNow do step {number} of {total} only: {step}"


def parse_plan(text, max_steps=5):
    """The steps of a numbered (or bulleted) list. Example: parse_plan("1. a\\n2. b")  ->  ["a", "b"]"""
    steps = [s.strip() for s in re.findall(r"(?m)^\s*(?:\d+[.):]|[-*•])\s+(.+)$", text or "")]
    if not steps:
        raise ModelBehaviorError("the plan has no numbered steps — reply with '1. ...', '2. ...'")
    if len(steps) > max_steps:
        raise ModelBehaviorError(f"the plan has {len(steps)} steps; the limit is {max_steps} — merge steps")
    return steps


def plan_and_execute(task, model, tools, max_steps=5, max_turns=4, max_calls=8, clock=time.perf_counter):
    """Ask the model for a plan, then run() each step with the history so far.

    max_turns and max_calls apply to each step. The answer is the last step's answer.
    Example: plan_and_execute("Pack for London?", model, [get_weather, read_doc]).completed
    """
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    result = RunResult(trace=Trace(clock), task=task, elapsed=clock())
    result.messages = [system_message(PLANNER_PROMPT.format(max_steps=max_steps, tools=describe_tools(registry))),
                       user(task)]
    try:
        reply = model.respond(result.messages, ())
    except ServiceError as exc:
        result.turns = 1
        return _finish(result, "service_error", explain(exc), clock)
    result.turns, result.usage = 1, result.usage + (reply.usage or Usage())
    result.trace.model(1, reply)
    result.messages.append(reply.to_message())
    try:
        steps = parse_plan(reply.text, max_steps)
    except ModelBehaviorError as exc:
        return _finish(result, "parse_error", str(exc), clock)
    history = result.messages[1:]
    for number, step in enumerate(steps, 1):
        result.trace.add("note", result.turns, f"step {number}/{len(steps)}: {step}")
        prompt = EXECUTOR_PROMPT.format(task=task, plan="; ".join(steps), number=number, total=len(steps), step=step)
        part = run(prompt, model, registry, max_turns, max_calls, history=history, clock=clock)
        result.trace.events += [replace(e, turn=e.turn + result.turns) for e in part.trace.events if e.kind != "stop"]
        result.turns += part.turns
        result.tool_calls += part.tool_calls
        result.tool_failures += part.tool_failures
        result.usage = result.usage + part.usage
        result.messages = part.messages
        history = part.messages[1:]
        if part.status != "completed":
            result.unfinished = [f"step {n}: {s}" for n, s in enumerate(steps[number - 1:], number)]
            return _finish(result, part.status, f"step {number} stopped: {part.status}", clock)
        result.completed.append(f"step {number}: {step} -> {clip(part.answer, 60)}")
        result.answer = part.answer
    return _finish(result, "completed", "", clock)


# ---------------------------------------------------------------- scenarios and the evaluation table

RATES = {"EUR": 1.0, "GBP": 0.86, "JPY": 163.0, "USD": 1.08}    # invented teaching data


@tool
def exchange_rate(currency: str) -> dict:
    """How many units of a currency one euro buys, from fixed teaching data (not live rates).

    Args:
        currency: a three-letter currency code, e.g. "JPY"
    """
    # A deliberate bug for the lesson: an unknown code raises KeyError instead of a helpful ToolError.
    return {"currency": currency, "per_euro": RATES[currency.upper()], "source": "fixed teaching data"}


EVALS = REPO_ROOT / "data" / "evals" / "loop_scenarios.json"


def scenario_tools():
    """The tools a scenario may name, by name (the docs tools read data/docs)."""
    from .tools import calculate, get_weather, list_docs, read_doc
    return {t.name: t for t in (calculate, get_weather, list_docs, read_doc, exchange_rate)}


def script_step(data):
    """A scripted Step from its JSON form: {"say": ...}, {"call": name, "arguments": {...}},
    {"raw_call": name, "arguments": "..."}, {"incomplete": text, "reason": ...} or {"turn": [...]}."""
    if "say" in data:
        return Step(text=data["say"])
    if "call" in data:
        return Step(calls=((data["call"], json.dumps(data["arguments"], ensure_ascii=False)),))
    if "raw_call" in data:
        return Step(calls=((data["raw_call"], data["arguments"]),))
    if "incomplete" in data:
        return Step(text=data["incomplete"], status="incomplete", incomplete_reason=data.get("reason"))
    if "turn" in data:
        parts = [script_step(d) for d in data["turn"]]
        return Step(" ".join(p.text for p in parts if p.text), sum((p.calls for p in parts), ()))
    raise UserError(f"scenario step {data!r} is not a step — use say, call, raw_call, incomplete or turn")


@dataclass
class Scenario:
    name: str
    task: str
    tools: list               # tool names, see scenario_tools()
    script: list              # [Step, ...]: what the scripted model says
    expect_status: str        # the stop reason the scripted run must end with
    answer_contains: list     # words a successful answer contains (case-insensitive)
    trace: list               # the expected trace lines of the scripted run
    max_turns: int = 6
    max_calls: int = 8
    about: str = ""


def load_scenarios(path=EVALS):
    """The frozen scenario set. Example: [s.name for s in load_scenarios()]"""
    data = json.loads(open(path, encoding="utf-8").read())
    return [Scenario(s["name"], s["task"], s["tools"], [script_step(d) for d in s["script"]], s["expect_status"],
                     s.get("answer_contains", []), s.get("trace", []), s.get("max_turns", 6), s.get("max_calls", 8),
                     s.get("about", "")) for s in data["scenarios"]]


def run_scenario(scenario, model=None, clock=time.perf_counter):
    """Run one scenario on its scripted model (or on `model`, e.g. a live one)."""
    tools = [scenario_tools()[name] for name in scenario.tools]
    model = model if model is not None else ScriptedModel(scenario.script)
    return run(scenario.task, model, tools, scenario.max_turns, scenario.max_calls, clock=clock)


def succeeded(scenario, result):
    """Task success: completed, and the answer has every expected word."""
    return result.status == "completed" and all(w.casefold() in result.answer.casefold()
                                                for w in scenario.answer_contains)


@dataclass
class Report:
    rows: list                # [(scenario name, RunResult, success), ...]

    def summary(self):
        results = [r for _, r, _ in self.rows]
        calls = sum(r.tool_calls for r in results)
        return {"scenarios": len(results), "success_rate": sum(ok for *_, ok in self.rows) / len(results),
                "mean_turns": sum(r.turns for r in results) / len(results),
                "tool_failure_rate": sum(r.tool_failures for r in results) / calls if calls else 0.0,
                "tokens": sum(r.usage.total_tokens for r in results)}

    def __repr__(self):
        head = f"{'scenario':<24} {'status':<17} {'turns':>5} {'calls':>5} {'failed':>6} {'tokens':>6}  success"
        lines = [head] + [f"{name:<24} {r.status:<17} {r.turns:>5} {r.tool_calls:>5} {r.tool_failures:>6} "
                          f"{r.usage.total_tokens:>6}  {'yes' if ok else 'no'}" for name, r, ok in self.rows]
        s = self.summary()
        return "\n".join(lines + [f"success rate {s['success_rate']:.0%}   mean turns {s['mean_turns']:.1f}   "
                                  f"tool failure rate {s['tool_failure_rate']:.0%}   tokens {s['tokens']}"])


def evaluate(scenarios, model_for=None):
    """Run every scenario and score it. model_for(scenario) picks the model (default: its script).

    Example: evaluate(load_scenarios())   # offline; model_for=lambda s: connect(script=s.script) for live
    """
    rows = []
    for scenario in scenarios:
        result = run_scenario(scenario, model_for(scenario) if model_for else None)
        rows.append((scenario.name, result, succeeded(scenario, result)))
    return Report(rows)


# ---------------------------------------------------------------- 04_loop hands-on task

def _task():
    from .check import Case, Task
    from .models import Reply
    weather = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    return Task("decide what the loop does with a reply (next_action)", [
        Case("a plain answer", (Reply("It is 14 °C."),), "completed", "text and no tool calls: the model is done"),
        Case("one tool call", (Reply("", [weather]),), "run_tools", "any tool call means: run the tools"),
        Case("text and a tool call", (Reply("Checking.", [weather]),), "run_tools",
             "text next to a call is commentary; the calls still have to run"),
        Case("nothing at all", (Reply(""),), "empty_output", "no text and no calls is empty_output, not an answer"),
        Case("only whitespace", (Reply(" \n "),), "empty_output", "strip the text before deciding it is an answer"),
        Case("cut short", (Reply("The answer is", status="incomplete", incomplete_reason="max_output_tokens"),),
             "model_incomplete", "check reply.status first: a cut-short reply is not an answer"),
        Case("cut short with a call", (Reply("", [weather], status="incomplete"),), "model_incomplete",
             "a call from a cut-short reply may have truncated arguments: never run it"),
    ], reference=next_action)


TASK = _task()
