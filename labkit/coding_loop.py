"""The coding agent's loop: 04's loop with read-only calls side by side, 08's context, a stop hook.

Built in 11_coding_agent. `run_calls` is step 5 of labkit.loop.run for one reply: the guard is
asked about every call in order; consecutive read-only calls then run side by side (a thread
each) and every other call alone, in order; results enter the history in the order of the calls.
`run_agent` is the loop with it, where a stop hook may send a finished model back to work.
`CodingContext` is 08's context builder for a repository: the rules, a repository map (paths and
top-level definitions) and the files read, laid out by labkit.context.build, and a long history
compacted (labkit.context.compact) with the task kept. `explorer` is 08's sub-agent machinery as
an Explore tool that can only read. Left out: async tools, cancelling a slow read, a map ranked
by relevance (aider's repo map ranks symbols with a graph), prompt caching.
"""

import ast
import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from . import loop
from .agents import SUB_SYSTEM, Agent, Parent
from .budget import Budget
from .compaction import Summarize
from .config import DEFAULT_MODEL
from .context import BuildReport, build, compact
from .loop import Decision, Guard, RunResult
from .models import Message, Model, ToolCall, user
from .models import system as system_message
from .notes import Note
from .sandbox import Workspace
from .tokens import count
from .tools import Tool, ToolRegistry, as_registry, execute, failure
from .trace import Trace

PARALLEL = ("list_files", "read_file", "grep")  # read only and thread-safe: may run side by side


def batches(calls: list[ToolCall], parallel: Iterable[str] = PARALLEL) -> list[list[ToolCall]]:
    """The calls of one reply in the groups they run in: consecutive read-only calls together,
    every other call alone, the order kept.

    Example: [len(b) for b in batches([read, grep, patch, read])]  ->  [2, 1, 1]
    """
    groups: list[list[ToolCall]] = []
    for call in calls:
        if call.name in parallel and groups and groups[-1][0].name in parallel:
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


def _execute(ready, registry, clock, workers):
    """(result, seconds) per (call, refusal) in `ready`, in order; two or more run side by side."""

    def one(pair):
        call, refused = pair
        started = clock()
        if refused:  # the model reads why, and the call never runs
            result = failure(refused.reason or "refused", refused.message)
        else:
            result = execute(call, registry)
        return result, clock() - started

    if len(ready) < 2:
        return [one(pair) for pair in ready]
    with ThreadPoolExecutor(max_workers=min(workers, len(ready))) as pool:
        return list(pool.map(one, ready))  # map keeps the order of the calls


def run_calls(
    run: RunResult,
    calls: list[ToolCall],
    registry: ToolRegistry,
    guard: Guard,
    clock: Callable[[], float],
    max_calls: int,
    parallel: Iterable[str] = PARALLEL,
    workers: int = 4,
) -> Decision | None:
    """Step 5 for one reply's calls; a Decision when the run must stop, else None.

    The guard is asked about each call in order before its group runs (an approval is asked
    in order too); a group of read-only calls runs side by side, a write alone; each result goes
    through guard.after_tool and into the history in the order of the calls.
    Example: run_calls(result, reply.tool_calls, registry, guard, time.perf_counter, 16)
    """
    for group in batches(calls, parallel):
        ready: list = []  # (call, decision), one per call that runs
        stop: Decision | None = None
        for call in group:
            if run.tool_calls + len(ready) >= max_calls:
                stop = Decision("stop", "tool_limit", f"more than {max_calls} tool calls")
                break
            tool = registry.tools.get(call.name)
            decision = loop._consult(run, guard.before_tool(run, call, tool), f"before {call.name}")
            if decision and decision.action == "stop":
                stop = decision
                break
            ready.append((call, decision))
        for (call, _), (result, elapsed) in zip(
            ready, _execute(ready, registry, clock, workers), strict=True
        ):
            checked = guard.after_tool(run, call, result)
            if checked is not result:
                run.trace.add("guard", run.turns, f"after {call.name}: result changed")
            loop.record(run, call, checked, elapsed)
            if isinstance(result, dict) and result.get("error") == "permission_denied":
                return Decision("stop", "permission_denied", result["message"])
        if stop:
            return stop
    return None


def run_agent(
    task: str,
    model: Model,
    tools: list[Tool],
    guard: Guard,
    system: str,
    max_turns: int = 12,
    max_calls: int = 16,
    on_stop: Callable[[RunResult], str | None] | None = None,
    context: "CodingContext | None" = None,
    clock: Callable[[], float] = time.perf_counter,
    workers: int = 4,
) -> RunResult:
    """labkit.loop.run's steps with three changes: before each turn `context.prepare(run)` lays
    out the system message and compacts a long history; a reply's calls go through run_calls;
    when the model answers, on_stop(run) may return a message that sends it back to work (one
    more user message in the same history, within max_turns).

    Example: run_agent(issue, model, tools, CodingGuard("acceptEdits"), SYSTEM).status
    """
    started, registry = clock(), as_registry(tools)
    run = RunResult(trace=Trace(clock), task=task)
    run.messages = [system_message(system), user(task)]

    def stop(reason, message="", calls=()):
        return loop.finish(run, reason, message, started, clock, calls)

    while True:
        if context is not None:
            context.prepare(run)
        decision = loop._consult(run, guard.before_model(run), "before model", ("allow", "stop"))
        if decision:
            return stop(decision.reason, decision.message)
        if run.turns >= max_turns:
            return stop("turn_limit", f"used all {max_turns} turns")
        reply = loop.model_turn(run, model, list(registry), started, clock)
        if reply is None:
            return run  # the service failed: model_turn stopped the run
        action = loop.next_action(reply)
        if action == "completed":
            run.answer = reply.text.strip()
            back = on_stop(run) if on_stop else None
            if back:
                run.trace.add("guard", run.turns, f"on stop: sent back: {back}", message=back)
                run.messages.append(user(back))
                continue
        if action != "run_tools":
            run.answer = run.answer if action == "completed" else ""
            return stop(action, reply.incomplete_reason or "", reply.tool_calls)
        decision = run_calls(
            run, reply.tool_calls, registry, guard, clock, max_calls, workers=workers
        )
        if decision:
            return stop(decision.reason, decision.message, reply.tool_calls)


# ---------------------------------------------------------------- 08's context, for a repository


def definitions(source: str) -> list[str]:
    """The top-level functions, classes and constants of a Python file, in order.

    Example: definitions("X = 1\\ndef f(): pass\\n")  ->  ["X", "f"]
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["(does not parse)"]
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def repo_map(ws: Workspace) -> str:
    """Every Python file of the workspace with its top-level definitions (a test file: how many
    tests), one file per "; " — what the model reads instead of whole files.

    Example: repo_map(ws)  ->  "pantry/units.py: FACTORS, to_base, ...; tests/test_x.py: 6 tests"
    """
    parts = []
    for path in sorted(ws.path.rglob("*.py")):
        name = str(path.relative_to(ws.path))
        if any(part.startswith(".") for part in path.relative_to(ws.path).parts):
            continue
        found = definitions(path.read_text())
        tests = [n for n in found if n.startswith("test")]
        shown = f"{len(tests)} tests" if path.name.startswith("test_") else ", ".join(found)
        parts.append(f"{name}: {shown or '(empty)'}")
    return "; ".join(parts)


class CodingContext:
    """The coding agent's context, remade before every turn.

    The system message is context.build's layout of the rules and two notes: the repository map
    and the files read so far (path and line ranges, from the run's read_file calls). Over
    `threshold` tokens the history after the task is compacted by context.compact: the last
    `keep_last` turns stay verbatim, the older ones become a marked summary (`summarize`, e.g.
    context.summarizer(model)) or are cut; the files-read note outlives them, so the model knows
    what to read again. Each hook in `before_compact` is called with the run first.
    Example: CodingContext(ws, SYSTEM, threshold=6_000).prepare(run)
    """

    def __init__(
        self,
        ws: Workspace,
        rules: str,
        threshold: int = 12_000,
        keep_last: int = 6,
        summarize: Summarize | None = None,
        before_compact: Iterable[Callable[[RunResult], object]] = (),
        budget: int = 4_000,
        model: str | None = DEFAULT_MODEL,
    ):
        self.rules, self.map = rules, repo_map(ws)
        self.threshold, self.keep_last, self.summarize = threshold, keep_last, summarize
        self.before_compact, self.budget, self.model = list(before_compact), budget, model
        self.read: dict = {}  # path -> line ranges read, in order
        self.compactions: list = []  # context.Compaction, one per compaction
        self.report: BuildReport | None = None  # the last build's: what the system message kept

    def files_read(self) -> str:
        """The note of files read: "pantry/units.py lines 14-28, all; ..." or "none yet"."""
        return "; ".join(f"{p} lines {', '.join(r)}" for p, r in self.read.items()) or "none yet"

    def saw(self, messages: list[Message]) -> None:
        """Note every read_file call in `messages` whose result was ok."""
        ok = {m.tool_call_id for m in messages if m.role == "tool" and '"ok": true' in m.content}
        for m in messages:
            for c in m.tool_calls:
                if c.name != "read_file" or c.id not in ok:
                    continue
                args = json.loads(c.arguments or "{}")
                start, end = args.get("start"), args.get("end")
                span = "all" if start is None and end is None else f"{start or 1}-{end or 'end'}"
                spans = self.read.setdefault(args.get("path", "?"), [])
                if span not in spans:
                    spans.append(span)

    def prepare(self, run: RunResult) -> None:
        """Note the reads, compact a long history (the task kept first), lay out the system."""
        self.saw(run.messages)
        task, rest = run.messages[1:2], run.messages[2:]
        if count(rest, self.model) > self.threshold:
            for hook in self.before_compact:
                hook(run)
            done = compact(
                rest,
                self.summarize,
                self.threshold,
                self.keep_last,
                [self.files_read()],
                self.model,
            )
            if done.replaced:
                run.messages = [run.messages[0], *task, *done.messages]
                self.compactions.append(done)
                run.trace.add("guard", run.turns, f"context: {done!r}")
        notes = [
            Note(
                "map", "repository map (paths: top-level definitions)", "reference", body=self.map
            ),
            Note("read", "files read so far", "task_state", body=self.files_read()),
        ]
        built = build(
            run.task, self.rules, notes=notes, budget=self.budget, min_relevance=0.0,
            model=self.model,
        )  # fmt: skip
        run.messages[0], self.report = built.messages[0], built.report


# ---------------------------------------------------------------- the Explore sub-agent

EXPLORE = (
    "Explore a repository to answer a question: find files with list_files and grep, read line "
    "ranges with read_file. You cannot change anything. Answer with the paths, line numbers and "
    "what they show."
)


def explorer(
    model: Model, tools: list[Tool], budget: Budget, max_turns: int = 6, max_calls: int = 8
) -> Tool:
    """An Explore tool: 08's sub-agent (labkit.agents) with only the read-only tools of `tools`.

    It works in its own context on the task the main agent gives it, and answers with a short
    report; a write tool is not among its tools, so a call to one is refused as an unknown tool.
    Its tokens are charged to `budget`, which must be a guard of the main run.
    Example: solve(issue, model, ws, explore=ScriptedModel([call("grep", ...), say("...")]))
    """
    reads = [t for t in as_registry(tools) if t.name in PARALLEL]
    agent = Agent(
        "explore",
        "A read-only helper: give it a question about the repository (where is X defined, what "
        "calls Y); it searches and reads in its own context and answers with paths and lines.",
        model,
        reads,
        f"{SUB_SYSTEM} {EXPLORE}",
        max_turns,
        max_calls,
        max_tokens=None,
    )
    parent = Parent(list(tools), budget)
    parent.spent = budget  # the main run meters `budget` itself (its guard): charge it there
    return parent.as_tool(agent)
