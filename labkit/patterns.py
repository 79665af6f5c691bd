"""Two other agent loops built from the same pieces as loop.run: ReAct and plan-and-execute.

Built in 04_loop, after the loop. `run_react` speaks the ReAct text protocol (Thought / Action /
Action Input / Observation; `parse_react` reads one reply); `plan_and_execute` asks for a plan,
then runs loop.run once per step. Both take a turn with loop.model_turn and end with loop.finish.
Deliberately left out: reflection, tree search, parallel steps, replanning after a failed step.
"""

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from .errors import ModelBehaviorError
from .loop import RunResult, finish, model_turn, record, run
from .models import Model, ToolCall, user
from .models import system as system_message
from .tools import Tool, as_registry, execute, result_text
from .trace import Trace, clip

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


def describe_tools(registry: Iterable[Tool]) -> str:
    """One line per tool for a text prompt: name(argument: type, ...): description."""
    lines = []
    for t in registry:
        args = ", ".join(
            f"{name}: {schema.get('type')}" for name, schema in t.parameters["properties"].items()
        )
        lines.append(f"- {t.name}({args}): {t.description}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ReactStep:
    kind: str  # "action" | "finish"
    thought: str = ""
    tool: str = ""  # action: the tool name
    arguments: str = "{}"  # action: the raw JSON text, parsed and validated later by execute()
    answer: str = ""  # finish: the final answer


def parse_react(text: str) -> ReactStep:
    """Read one ReAct reply; tolerant of prose around it, code fences and case drift.

    Raises ModelBehaviorError (with what to write instead) when there is no Action or Finish.
    Example: parse_react('Thought: sum\\nAction: calculate\\nAction Input: {"expression": "2+2"}')
             ->  ReactStep("action", "sum", "calculate", '{"expression": "2+2"}')
    """
    text = re.sub(r"```[A-Za-z]*", "", text or "")
    text = re.split(r"(?im)^\s*observation\s*:", text)[0]  # what follows is invented
    said = re.search(r"(?im)^\s*thought\s*:\s*(.*)$", text)
    thought = said.group(1).strip() if said else ""
    action = re.search(r"(?im)^\s*action\s*:\s*[`'\"]?([A-Za-z0-9_-]+)", text)
    finish = re.search(r"(?is)\bfinish\s*\[(.*)\]", text) or re.search(
        r"(?is)final answer\s*:\s*(.+)", text
    )
    if action and (not finish or action.start() < finish.start()):
        given = re.search(r"(?is)action[\s_]*input\s*:\s*(.*)", text[action.end() :])
        raw = given.group(1).strip() if given else ""
        start = raw.find("{")
        try:  # cut the JSON object out of any prose after it
            raw = raw[start : json.JSONDecoder().raw_decode(raw, start)[1]] if start >= 0 else raw
        except ValueError:
            pass  # execute() will explain what is wrong with it
        return ReactStep("action", thought, action.group(1), raw.strip() or "{}")
    if finish and finish.group(1).strip():
        return ReactStep("finish", thought, answer=finish.group(1).strip())
    raise ModelBehaviorError(
        "no Action or Finish[...] found in the reply — write 'Action: <tool>' and "
        "'Action Input: {...}', or 'Finish[<answer>]'"
    )


def run_react(
    task: str,
    model: Model,
    tools: Iterable[Tool | Callable[..., Any]],
    max_turns: int = 6,
    max_calls: int = 8,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """The loop over the ReAct text protocol: tools are described in the prompt, not sent as tools.

    A reply that cannot be parsed is answered with an Observation saying how to fix it; two in a
    row stop the run (parse_error). Example: run_react("2+2?", model, [calculate]).answer
    """
    started, registry = clock(), as_registry(tools)
    result = RunResult(trace=Trace(clock), task=task)
    prompt = REACT_PROMPT.format(tools=describe_tools(registry))
    result.messages = [system_message(prompt), user(task)]
    unreadable = 0
    while True:
        if result.turns >= max_turns:
            return finish(result, "turn_limit", f"used all {max_turns} turns", started, clock)
        reply = model_turn(result, model, (), started, clock)  # no tools sent: the protocol is text
        if reply is None:
            return result
        if reply.status != "completed":
            return finish(result, "model_incomplete", reply.incomplete_reason or "", started, clock)
        try:
            step = parse_react(reply.text)
        except ModelBehaviorError as exc:
            unreadable += 1
            if unreadable == 2:
                return finish(
                    result,
                    "parse_error",
                    "two replies in a row could not be parsed",
                    started,
                    clock,
                )
            result.trace.add("note", result.turns, f"unparsable reply: {exc}")
            result.messages.append(user(f"Observation: {exc}"))
            continue
        unreadable = 0
        if step.kind == "finish":
            result.answer = step.answer
            return finish(result, "completed", "", started, clock)
        if result.tool_calls >= max_calls:
            return finish(result, "tool_limit", f"more than {max_calls} tool calls", started, clock)
        call = ToolCall(f"react_{result.tool_calls + 1}", step.tool, step.arguments)
        outcome = execute(call, registry)
        record(result, call, outcome)
        # the text protocol has no tool role: the result goes back as an Observation
        result.messages[-1] = user("Observation: " + result_text(outcome))
        if outcome.get("error") == "permission_denied":
            return finish(result, "permission_denied", outcome["message"], started, clock)


# ---------------------------------------------------------------- plan-and-execute

PLANNER_PROMPT = (
    "Break the task into at most {max_steps} short steps, each doable with these tools:\n"
    "{tools}\n"
    "Reply with a numbered list of steps and nothing else. The last step answers the task."
)
EXECUTOR_PROMPT = "Task: {task}\nPlan: {plan}\nNow do step {number} of {total} only: {step}"


def parse_plan(text: str, max_steps: int = 5) -> list[str]:
    """The steps of a numbered (or bulleted) list. Example: parse_plan("1. a\\n2. b")
    ->  ["a", "b"]"""
    steps = [s.strip() for s in re.findall(r"(?m)^\s*(?:\d+[.):]|[-*•])\s+(.+)$", text or "")]
    if not steps:
        raise ModelBehaviorError("the plan has no numbered steps — reply with '1. ...', '2. ...'")
    if len(steps) > max_steps:
        raise ModelBehaviorError(
            f"the plan has {len(steps)} steps; the limit is {max_steps} — merge steps"
        )
    return steps


def plan_and_execute(
    task: str,
    model: Model,
    tools: Iterable[Tool | Callable[..., Any]],
    max_steps: int = 5,
    max_turns: int = 4,
    max_calls: int = 8,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Ask the model for a plan, then run() each step with the history so far.

    max_turns and max_calls apply to each step. The answer is the last step's answer.
    Example: plan_and_execute("Pack for London?", model, [get_weather, read_doc]).completed
    """
    started, registry = clock(), as_registry(tools)
    result = RunResult(trace=Trace(clock), task=task)
    prompt = PLANNER_PROMPT.format(max_steps=max_steps, tools=describe_tools(registry))
    result.messages = [system_message(prompt), user(task)]
    reply = model_turn(result, model, (), started, clock)
    if reply is None:
        return result
    try:
        steps = parse_plan(reply.text, max_steps)
    except ModelBehaviorError as exc:
        return finish(result, "parse_error", str(exc), started, clock)
    history = result.messages[1:]
    for number, step in enumerate(steps, 1):
        result.trace.add("note", result.turns, f"step {number}/{len(steps)}: {step}")
        prompt = EXECUTOR_PROMPT.format(
            task=task, plan="; ".join(steps), number=number, total=len(steps), step=step
        )
        part = run(prompt, model, registry, max_turns, max_calls, history=history, clock=clock)
        result.trace.events += [
            replace(e, turn=e.turn + result.turns) for e in part.trace.events if e.kind != "stop"
        ]
        result.turns += part.turns
        result.tool_calls += part.tool_calls
        result.tool_failures += part.tool_failures
        result.usage = result.usage + part.usage
        result.messages = part.messages
        history = part.messages[1:]
        if part.status != "completed":
            result.unfinished = [
                f"step {n}: {s}" for n, s in enumerate(steps[number - 1 :], number)
            ]
            return finish(
                result, part.status, f"step {number} stopped: {part.status}", started, clock
            )
        result.completed.append(f"step {number}: {step} -> {clip(part.answer, 60)}")
        result.answer = part.answer
    return finish(result, "completed", "", started, clock)
