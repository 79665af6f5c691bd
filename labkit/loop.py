"""The agent loop: call the model, run the tools it asks for, repeat until it answers or a limit
stops it.

Built in 04_loop. `run()` is the loop (its steps are numbered in its docstring) and returns a
RunResult with one stop reason and a trace. A Guard is the seam later stages plug into; its
Decision allows, refuses or stops. `model_turn`, `record` and `finish` are the pieces the other
loops (labkit.patterns: ReAct, plan-and-execute) share with this one.
With stream=True each turn is read from model.stream and collected into the same Reply, so a
streamed run ends as an unstreamed one; a stream cut off mid-way ends the run as model_incomplete.
A tool_choice policy (`turn_choice`) may force a tool call, but never past the first tool result.
Deliberately left out: guardrails (05_guardrails plugs in through `guard`), retrying model calls,
async and parallel tool execution, durable state (07_runtime).
"""

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ServiceError, UserError
from .failures import explain
from .models import (
    Message,
    Model,
    Reply,
    StreamingModel,
    ToolCall,
    Usage,
    check_pairing,
    check_tool_choice,
    collect,
    tool_message,
    user,
)
from .models import system as system_message
from .tools import Tool, as_registry, execute, failure, result_text
from .trace import Trace, clip, describe_call

# What the loop and its guards (05_guardrails) can end a run with; 07's runtime has its own.
STOP_REASONS = (
    "completed",
    "empty_output",
    "model_incomplete",
    "turn_limit",
    "tool_limit",
    "budget_exhausted",
    "permission_denied",
    "repeated_action",
    "parse_error",
    "service_error",
)
DEFAULT_SYSTEM = (
    "You are a careful assistant. Use a tool when it helps. When a tool result says "
    '"ok": false, read its message and fix your call. Answer briefly and say where '
    "facts came from."
)
NEXT_STEPS = {  # what a person can do next, per stop reason
    "completed": "nothing: the task is answered",
    "empty_output": "the model said nothing — run again; if it repeats, rephrase the task or raise "
    "max_output_tokens",
    "model_incomplete": "the reply was cut short — raise max_output_tokens or shorten the input, "
    "then run again",
    "turn_limit": "raise max_turns or split the task; `unfinished` says what is left",
    "tool_limit": "raise max_calls or narrow the task; `unfinished` lists the calls not run",
    "permission_denied": "ask the user to approve the refused tool, or do the task without it",
}


@dataclass(frozen=True)
class Decision:
    """What a guard decided: "allow", "refuse" (not run; the model reads why) or "stop"."""

    action: str  # "allow" | "refuse" | "stop"
    reason: str = ""  # stop: a stop reason from STOP_REASONS; refuse: the error kind
    message: str = ""  # one line: why, and for a refusal what the model should do instead


class Guard:
    """The seam for 05_guardrails. Subclass it; every method's default lets the loop go on.

    before_model(run) and before_tool(run, call, tool) return None or a Decision (`run` is the
    RunResult so far: turns, tool_calls, usage, messages; `tool` is None for an unknown name);
    after_tool(run, call, result) returns the result the model will read (e.g. wrapped as
    untrusted data). Every Decision and every changed result is recorded in the trace.
    """

    def before_model(self, run: "RunResult") -> Decision | None:
        return None

    def before_tool(self, run: "RunResult", call: ToolCall, tool: Tool | None) -> Decision | None:
        return None

    def after_tool(
        self, run: "RunResult", call: ToolCall, result: dict[str, Any] | str
    ) -> dict[str, Any] | str:
        return result


@dataclass
class RunResult:
    status: str = "running"  # a stop reason from STOP_REASONS once the run ends
    answer: str = ""  # the final text, only when status == "completed"
    turns: int = 0  # model calls made
    tool_calls: int = 0  # tool calls answered with a result
    usage: Usage = field(default_factory=Usage)
    elapsed: float = 0.0  # seconds the run took, measured with the clock passed to run()
    trace: Trace = field(default_factory=Trace)
    completed: list = field(default_factory=list)  # calls that succeeded: ['get_weather({...})']
    unfinished: list = field(default_factory=list)  # what is not done, one line each
    next_step: str = ""  # what a person can do next
    messages: list = field(default_factory=list)  # the history, every call paired with its output
    tool_failures: int = 0  # results with "ok": false
    task: str = ""
    # tool name -> last failure not recovered
    failed: dict = field(default_factory=dict, repr=False)
    # the Budget run_guarded metered (a copy of the caller's; labkit.budget); None from run()
    budget: Any = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self):
        mark = "" if self.usage.source == "reported" else f" ({self.usage.source} by labkit)"
        tokens = f"{self.usage.total_tokens}{mark}"
        lines = [
            f"status:     {self.status}",
            f"answer:     {clip(self.answer, 90)!r}",
            f"turns:      {self.turns}   tool calls: {self.tool_calls}   "
            f"failed: {self.tool_failures}   tokens: {tokens}",
        ]
        lines += [f"completed:  {c}" for c in self.completed]
        lines += [f"unfinished: {u}" for u in self.unfinished]
        return "\n".join(lines + [f"next step:  {self.next_step}"])


def next_action(reply: Reply) -> str:
    """What the loop does with a reply: model_incomplete, run_tools, empty_output or completed.

    Example: next_action(Reply("", [ToolCall("call_1", "calculate", "{}")]))  ->  "run_tools"
    """
    if reply.status != "completed":
        return "model_incomplete"  # subtle: never run calls from a cut-short reply
    if reply.tool_calls:
        return "run_tools"
    return "completed" if reply.text.strip() else "empty_output"


POLICIES = ("auto", "none", "required", "required-first")  # or a tool's name, or turn -> choice


def check_policy(
    policy: str | Callable[[int], str], tools: Iterable[Tool | Callable[..., Any]]
) -> None:
    """Refuse a tool_choice policy that is none of POLICIES, an offered tool's name or a function.

    Example: check_policy("required-first", [get_weather])   # passes; check_policy("yes", ...)
             raises UserError saying what is allowed
    """
    names = [t.name for t in as_registry(tools)]
    forcing = policy in POLICIES[2:] or (isinstance(policy, str) and policy in names)
    if callable(policy) or policy in POLICIES[:2] or (forcing and names):
        return
    offered = f"an offered tool's name ({', '.join(names)})" if names else "a tool's name"
    raise UserError(
        f"tool_choice {repr(policy)[:60]} is not a policy for a run — use "
        f'"auto", "none", "required", "required-first", {offered}, or a function turn -> choice'
        + ("" if names else "; forcing a call needs tools, and this run has none")
    )


def turn_choice(
    policy: str | Callable[[int], str], turn: int, run: RunResult, tools: Iterable[object]
) -> str:
    """The tool_choice of one turn (counted from 1) under a run's policy.

    A function gives each turn's choice explicitly. "required-first" is "required" on turn 1 and
    "auto" after. Any other text is that choice on every turn — but a forcing one ("required", a
    tool's name) only until a tool result is in the run: forced again, the model could never
    answer and would call tools until max_turns. Forcing after a result takes a function's choice.
    Example: turn_choice("required-first", 2, result, tools)  ->  "auto"
    """
    if callable(policy):
        choice = policy(turn)
        try:
            return check_tool_choice(choice, tools)
        except UserError as exc:
            raise UserError(f"the tool_choice function, for turn {turn}: {exc}") from None
    if policy == "required-first":
        return "required" if turn == 1 else "auto"
    forcing = policy not in ("auto", "none")
    return "auto" if forcing and run.tool_calls else policy


def _consult(run, decision, where, actions=("allow", "refuse", "stop")):
    """Record a guard's decision; return it when it refuses or stops, None when it allows."""
    if decision is None:
        return None
    if decision.action not in actions:
        raise UserError(
            f"guard returned action {decision.action!r} {where} — use {' or '.join(actions)}"
        )
    if decision.action == "stop" and decision.reason not in STOP_REASONS:
        raise UserError(
            f"guard stop reason {decision.reason!r} is not one of {', '.join(STOP_REASONS)}"
        )
    summary = f"{where}: {decision.action} {decision.reason} {decision.message}".strip()
    run.trace.add(
        "guard",
        run.turns,
        summary,
        action=decision.action,
        reason=decision.reason,
        message=decision.message,
    )
    return None if decision.action == "allow" else decision


def model_turn(
    run: RunResult,
    model: Model,
    tools: Sequence[object],
    started: float,
    clock: Callable[[], float],
    max_output_tokens: int | None = None,
    stream: bool | Callable[..., object] = False,
    tool_choice: str = "auto",
) -> Reply | None:
    """One model turn: call the model with the history, add its usage, trace it, append its reply.

    Returns the reply, or None when the service failed: the run is then finished (service_error).
    stream: True reads the reply from model.stream (a StreamingModel); a function also sees each
    event as it arrives.
    tool_choice: this turn's choice; "auto" is not passed (a model of your own need not know it).
    Example: reply = model_turn(result, model, list(registry), started, clock)
    """
    run.turns += 1
    options: dict[str, Any] = {}
    if max_output_tokens is not None:
        options["max_output_tokens"] = max_output_tokens
    if tool_choice != "auto":
        options["tool_choice"] = tool_choice
    if stream and not isinstance(model, StreamingModel):
        raise UserError(
            f"{type(model).__name__} cannot stream (it has no stream method) — run without "
            "stream=True, or use a model that streams (a StreamingModel)"
        )
    asked = clock()
    try:
        if stream:
            assert isinstance(model, StreamingModel)  # a model that cannot stream is refused above
            watch = stream if callable(stream) else None
            reply = collect(model.stream(run.messages, tools, **options), watch)
        else:
            reply = model.respond(run.messages, tools, **options)
    except ServiceError as exc:
        finish(run, "service_error", explain(exc), started, clock)
        return None
    run.usage = run.usage + (reply.usage or Usage())
    event = run.trace.model(run.turns, reply, clock() - asked)
    if tool_choice != "auto":  # the trace says which turns were forced (or told "none")
        event.detail["tool_choice"] = tool_choice
        event.summary += f"  (tool_choice {tool_choice})"
    run.messages.append(reply.to_message())
    return reply


def record(
    run: RunResult, call: ToolCall, result: dict[str, Any] | str, elapsed: float = 0.0
) -> None:
    """Append one call's result to the history (paired by call_id) and the trace; count it.

    Example: record(result, call, execute(call, registry))
    """
    run.tool_calls += 1
    content = result if isinstance(result, str) else result_text(result)
    run.messages.append(tool_message(call, content))
    run.trace.tool(run.turns, call, result, elapsed)
    if not isinstance(result, dict) or result.get("ok", False):
        run.completed.append(describe_call(call))
        run.failed.pop(call.name, None)
    else:
        run.tool_failures += 1
        run.failed[call.name] = f"failed: {describe_call(call)} -> {result.get('error')}"


def finish(
    run: RunResult,
    reason: str,
    message: str,
    started: float,
    clock: Callable[[], float],
    calls: Iterable[ToolCall] = (),
) -> RunResult:
    """End the run: answer unanswered calls with "not_run", write the stop, the report and the time.

    Example: return finish(result, "turn_limit", "used all 6 turns", started, clock)
    """
    answered = {m.tool_call_id for m in run.messages if m.role == "tool"}
    # an unanswered call: unsendable history
    for call in [c for c in calls if c.id not in answered]:
        not_run = failure("not_run", f"not run: the run stopped ({reason})")
        run.messages.append(tool_message(call, result_text(not_run)))
        run.trace.add(
            "tool", run.turns, f"{describe_call(call)} -> not run ({reason})", call_id=call.id
        )
        run.unfinished.append(f"not run: {describe_call(call)}")
    run.status = reason
    run.trace.stop(run.turns, reason, message)
    if reason != "completed":
        run.unfinished += [*run.failed.values(), f"no final answer yet for: {clip(run.task, 70)}"]
    run.next_step = NEXT_STEPS.get(reason, message)
    run.elapsed = clock() - started
    return run


def _call_tool(run, call, registry, guard, clock):
    """Step 5 for one call. Returns a Decision when the run must stop, else None."""
    tool = registry.tools.get(call.name)
    decision = _consult(run, guard.before_tool(run, call, tool), f"before {call.name}")
    if decision and decision.action == "stop":
        return decision
    started = clock()
    if decision:  # refused: the model reads why, and the call never runs
        result = failure(decision.reason or "refused", decision.message)
    else:
        result = execute(call, registry)
    checked = guard.after_tool(run, call, result)
    if checked is not result:
        run.trace.add("guard", run.turns, f"after {call.name}: result changed", result=checked)
    record(run, call, checked, clock() - started)
    if isinstance(result, dict) and result.get("error") == "permission_denied":
        return Decision("stop", "permission_denied", result["message"])
    return None


def start(
    task: str,
    system: str | None = None,
    history: Iterable[Message] = (),
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Step 1 of run: a RunResult whose history is the system prompt, the earlier messages (paired;
    their system messages dropped) and the task as a user message.

    Example: start("Weather in Paris?").messages[-1].content  ->  "Weather in Paris?"
    """
    history = [m for m in history if m.role != "system"]  # a finished run's messages start with one
    check_pairing(history)
    result = RunResult(trace=Trace(clock), task=task)
    system = DEFAULT_SYSTEM if system is None else system
    result.messages = [system_message(system), *history, user(task)]
    return result


def run(
    task: str,
    model: Model,
    tools: Iterable[Tool | Callable[..., Any]],
    max_turns: int = 6,
    max_calls: int = 8,
    system: str | None = None,
    history: Iterable[Message] = (),
    guard: Guard | None = None,
    clock: Callable[[], float] = time.perf_counter,
    max_output_tokens: int | None = None,
    stream: bool | Callable[..., object] = False,
    tool_choice: str | Callable[[int], str] = "auto",
) -> RunResult:
    """Run the agent loop on one task until the model answers or a limit stops it.

    1. Start the history: the system prompt, earlier messages (paired; system messages in them are
       dropped, so a finished run's `messages` can be passed on), the task as a user message.
    2. Before each model call ask the guard, then check max_turns (stop: turn_limit).
    3. Call the model with the history, the tools and this turn's tool_choice (see turn_choice;
       each reply capped at max_output_tokens, if given; read from its stream when stream is set);
       add its reply to the trace and the history.
    4. Decide with next_action(reply): cut short -> model_incomplete; no calls -> completed with
       the text as answer, or empty_output when there is no text.
    5. For each tool call, in order: check max_calls (stop: tool_limit), ask the guard, execute it
       (bad arguments and crashes become results the model reads), let the guard see the result,
       append it paired by call_id. A permission_denied result stops the run.
    6. Go back to 2.
    Every stop answers the calls still pending with a "not_run" result, so the history stays paired.
    Example: run("Weather in Paris?", ScriptedModel([call("get_weather", city="Paris"),
                 say("14 °C")]), [get_weather]).status  ->  "completed"
    """
    started = clock()
    registry, guard = as_registry(tools), guard or Guard()
    check_policy(tool_choice, registry)

    def stop(reason, message="", calls=()):
        return finish(result, reason, message, started, clock, calls)

    result = start(task, system, history, clock)  # 1. the history
    while True:
        # 2. the guard, then the turn limit
        decision = _consult(result, guard.before_model(result), "before model", ("allow", "stop"))
        if decision:
            return stop(decision.reason, decision.message)
        if result.turns >= max_turns:
            return stop("turn_limit", f"used all {max_turns} turns")
        # 3. the model
        tools = list(registry)
        choice = turn_choice(tool_choice, result.turns + 1, result, tools)
        reply = model_turn(result, model, tools, started, clock, max_output_tokens, stream, choice)
        if reply is None:
            return result  # the service failed: model_turn stopped the run
        # 4. answered, cut short, or tools to run
        action = next_action(reply)
        if action != "run_tools":
            result.answer = reply.text.strip() if action == "completed" else ""
            return stop(action, reply.incomplete_reason or "", reply.tool_calls)
        # 5. each tool call, in order
        for call in reply.tool_calls:
            if result.tool_calls >= max_calls:
                return stop("tool_limit", f"more than {max_calls} tool calls", reply.tool_calls)
            decision = _call_tool(result, call, registry, guard, clock)
            if decision:
                return stop(decision.reason, decision.message, reply.tool_calls)
        # 6. back to 2.
