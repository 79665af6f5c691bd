"""A coding agent: file tools, apply-patch, a sandboxed terminal, permission modes and hooks.

Built in 11_coding_agent. `coding_tools(ws, edits)` gives the model list_files, read_file (line
ranges), grep (paths and lines, not whole files), apply_patch (a unified diff or a search/replace
edit, every edit kept in `edits`) and run (labkit.sandbox). `decide` is the layered permission
decision: deny rules, then ask rules, then allow rules, then the mode. `CodingGuard` asks it before
every call (with hooks before and after) and ends plan mode when a plan is approved. `solve` is
the agent: labkit.coding_loop's loop (read-only calls side by side, a repository map, compaction,
an Explore sub-agent) with a stop hook that sends a premature "done" back. Left out: 07's durable
runtime for the writes, skills and slash commands, checkpoints beyond `Edits.undo`.
"""

import fnmatch
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import loop, patches
from .budget import Budget
from .coding_loop import CodingContext, explorer, run_agent
from .errors import ToolError, UserError
from .guardrails import Guards
from .loop import Decision, Guard
from .models import Model, ToolCall, Usage
from .permissions import approval_question
from .sandbox import Workspace
from .schema import ArgumentError, parse_arguments
from .tools import Tool, approved, tool

MODES = ("default", "plan", "acceptEdits", "dontAsk", "bypass")
READ_ONLY = ("list_files", "read_file", "grep", "explore")  # explore: a sub-agent that reads
ALLOW = ("run(python -m pytest*)", "run(ls*)", "run(cat *)", "run(git diff*)", "run(git status*)")
DENY = ("apply_patch(tests/*)", "run(git push*)")  # the default rules of this lesson
ASK = ("run(git commit*)",)
SKIP = (".git", ".home")  # never listed


def coding_tools(ws: Workspace, edits: patches.Edits) -> list[Tool]:
    """The five tools of the coding agent, working in the workspace `ws` (labkit.sandbox).

    Example: tools = coding_tools(ws, patches.Edits())
    """

    @tool
    def list_files(path: str) -> list:
        """List the files under a folder of the repository ("." for all), one path per line.

        Args:
            path: a folder relative to the repository root, e.g. "." or "pantry"
        """
        root = patches.inside(ws, path)
        found = [p for p in root.rglob("*") if p.is_file()]
        names = [str(p.relative_to(ws.path)) for p in found]
        return sorted(n for n in names if n.split("/")[0] not in SKIP)[:200]

    @tool
    def read_file(path: str, start: int | None = None, end: int | None = None) -> str:
        """Read lines start..end of a file (1-based, inclusive; null: from the start / to the end).

        Args:
            path: a file relative to the repository root
            start: first line to show, or null
            end: last line to show, or null
        """
        lines = _text(ws, path).splitlines()
        first = max(start or 1, 1)
        shown = lines[first - 1 : end or len(lines)]
        return "\n".join(f"{n}: {line}" for n, line in enumerate(shown, first))

    @tool
    def grep(pattern: str, path: str | None = None) -> list:
        """Find a regular expression in the repository's files: path:line: text, at most 50.

        Args:
            pattern: a Python regular expression, e.g. "def convert"
            path: a folder or file to search in, or null for the whole repository
        """
        try:
            wanted = re.compile(pattern)
        except re.error as exc:
            said = f"bad regular expression ({exc}) — escape ( [ . * with a backslash"
            raise ToolError(said, "bad_pattern") from None
        root = patches.inside(ws, path or ".")
        hits = []
        for name in [root] if root.is_file() else sorted(root.rglob("*.py")):
            relative = str(name.relative_to(ws.path))
            if relative.split("/")[0] in SKIP:
                continue
            for number, line in enumerate(name.read_text().splitlines(), 1):
                if wanted.search(line):
                    hits.append(f"{relative}:{number}: {line.strip()}")
        return hits[:50] or [f"no match for {pattern!r}"]

    @tool(risk="medium")
    def apply_patch(
        patch: str | None = None,
        path: str | None = None,
        search: str | None = None,
        replace: str | None = None,
    ) -> dict:
        """Edit files: send a unified diff in `patch`, or `path` with `search` text (exactly once in
        the file) and its `replace` text. Nothing changes unless the whole edit applies.

        Args:
            patch: a unified diff (--- a/path, +++ b/path, @@ hunks), or null
            path: the file for a search/replace edit, or null
            search: the exact text to replace, or null
            replace: the new text, or null
        """
        if patch:
            return {"changed": patches.apply_diff(ws, patch, edits)}
        if path is None or search is None or replace is None:
            raise ToolError("send either patch, or path, search and replace", "bad_edit")
        return {"changed": [patches.replace(ws, path, search, replace, edits)]}

    @tool(risk="high")
    def run(command: str) -> dict:
        """Run one command in the repository, e.g. "python -m pytest -q" (no shell).

        Args:
            command: the command line, e.g. "python -m pytest -q tests/test_units.py"
        """
        done = ws.run(command)
        if done.refused:
            raise ToolError(done.refused, "refused")
        return done.result()["data"]

    return [list_files, read_file, grep, apply_patch, run]


def _text(ws, path):
    where = patches.inside(ws, path)
    if not where.is_file():
        raise ToolError(f"{path} is not a file — find it with list_files or grep", "no_file")
    return where.read_text()


# ---------------------------------------------------------------- permissions, layered


def subject(name: str, arguments: dict) -> str:
    """What a rule's pattern is matched against: run's command, an edit's paths, a read's path.

    Example: subject("run", {"command": "git push"})  ->  "git push"
    """
    if name == "run":
        return arguments.get("command", "")
    if name == "apply_patch" and arguments.get("patch"):
        try:
            files = patches.parse_diff(arguments["patch"])
        except ToolError:
            return ""
        return " ".join(new or old for old, new, _ in files)
    return arguments.get("path") or ""


def matches(rule: str, name: str, arguments: dict) -> bool:
    """Whether a rule such as "run(git push*)" or "read_file" covers a call.

    Example: matches("run(git push*)", "run", {"command": "git push origin main"})  ->  True
    """
    m = re.fullmatch(r"(\w+)(?:\((.*)\))?", rule)
    if not m:
        raise UserError(f"rule {rule!r} is not tool or tool(pattern) — e.g. 'run(git push*)'")
    if m.group(1) != name:
        return False
    pattern = m.group(2)
    if pattern is None:
        return True
    # an edit of several files is covered when any of them is
    text = subject(name, arguments)
    parts = text.split(" ") if name == "apply_patch" else [text]
    return any(fnmatch.fnmatchcase(p, pattern) for p in parts)


def _first(rules, name, arguments):
    return next((rule for rule in rules if matches(rule, name, arguments)), None)


def rule_verdict(
    name: str,
    arguments: dict,
    deny: Iterable[str] = DENY,
    ask: Iterable[str] = ASK,
    allow: Iterable[str] = ALLOW,
) -> tuple[str | None, str]:
    """What the rules say before the mode: a deny rule, then an ask rule, then a read-only tool
    or an allow rule; (None, "") when no rule covers the call.

    Example: rule_verdict("run", {"command": "git commit -m x"})  ->  ("ask", "ask rule ...")
    """
    if rule := _first(deny, name, arguments):
        return "deny", f"deny rule {rule}"
    if rule := _first(ask, name, arguments):
        return "ask", f"ask rule {rule}"
    if name in READ_ONLY:
        return "allow", "read-only tool"
    if rule := _first(allow, name, arguments):
        return "allow", f"allow rule {rule}"
    return None, ""


def decide(
    name: str,
    arguments: dict,
    mode: str = "default",
    deny: Iterable[str] = DENY,
    ask: Iterable[str] = ASK,
    allow: Iterable[str] = ALLOW,
) -> tuple[str, str]:
    """("allow" | "ask" | "deny", why): deny rules, then ask rules, then allow rules, then the mode.

    default asks before edits and commands no rule allows; plan refuses every write; acceptEdits
    allows edits; dontAsk turns every ask into a refusal; bypass allows all that no rule denies.
    Example: decide("run", {"command": "git push"}, "bypass")  ->  ("deny", "rule run(git push*)")
    """
    if mode not in MODES:
        raise UserError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    verdict, why = rule_verdict(name, arguments, deny, ask, allow)
    if verdict == "deny":
        return verdict, why
    if mode == "plan" and name not in READ_ONLY:
        return "deny", "plan mode: read only until the plan is approved"
    if mode == "bypass":
        return "allow", "bypass mode (dangerous: nothing asks)"
    if verdict is None and mode == "acceptEdits" and name == "apply_patch":
        verdict, why = "allow", "acceptEdits mode"
    if verdict is None:
        verdict, why = "ask", f"{mode} mode asks first"
    if verdict == "ask" and mode == "dontAsk":
        return "deny", f"dontAsk mode refuses what would ask ({why})"
    return verdict, why


def question(call: ToolCall, tool_: Tool) -> str:
    """What the person is asked: the diff for a patch, every argument otherwise (05's question)."""
    return approval_question(call, tool_, width=2_000 if tool_.name == "apply_patch" else 80)


# ---------------------------------------------------------------- the guard and its hooks


@dataclass
class Hooks:
    """before(call) -> a reason to refuse, or None; after(call, result) -> the result the model
    reads; on_stop(run) -> a message that sends the agent back, or None when it may stop;
    before_compact(run): called before a long history is compacted (e.g. to save it)."""

    before: list = field(default_factory=list)
    after: list = field(default_factory=list)
    on_stop: object = None
    before_compact: list = field(default_factory=list)


class CodingGuard(Guard):
    """Hooks, then `decide`; an ask is put to `approve(call, question)` and only a yes runs it.

    In plan mode every write is refused until `end_plan` has a plan approved by
    `approve_plan(plan)`: its answer names the mode to go on in, or is a yes ("default").
    Example: CodingGuard(mode="default", approve=lambda call, q: input(q))
    """

    def __init__(
        self,
        mode: str = "default",
        approve: Callable[[ToolCall, str], object] | None = None,
        hooks: Hooks | None = None,
        deny: Iterable[str] = DENY,
        ask: Iterable[str] = ASK,
        allow: Iterable[str] = ALLOW,
        approve_plan: Callable[[str], object] | None = None,
    ):
        decide("read_file", {}, mode)  # a bad mode fails now, not at the first call
        self.mode, self.approve, self.hooks = mode, approve, hooks or Hooks()
        self.rules = {"deny": deny, "ask": ask, "allow": allow}
        self.approve_plan = approve_plan
        self.log: list[tuple[ToolCall, str, str]] = []  # (call, verdict, why), one per call

    def end_plan(self, plan: str) -> str | None:
        """Plan mode's approval step: ask approve_plan(plan). A mode other than plan switches to
        it, an explicit yes to "default"; anything else (no, silence, "plan") keeps plan mode.
        Returns the new mode, or None when the plan was not approved.

        Example: CodingGuard("plan", approve_plan=lambda plan: "acceptEdits").end_plan(plan)
        """
        answer = self.approve_plan(plan) if self.approve_plan else None
        mode = answer.strip() if isinstance(answer, str) else None
        if mode not in MODES:
            mode = "default" if approved(answer) else None
        if mode in (None, "plan"):
            return None
        self.mode = mode
        return mode

    def before_tool(
        self, run: loop.RunResult, call: ToolCall, tool_: Tool | None
    ) -> Decision | None:
        if tool_ is None or call.problem:
            return None  # execute() refuses it
        for hook in self.hooks.before:
            reason = hook(call)
            if reason:
                self.log.append((call, "deny", f"hook: {reason}"))
                return Decision("refuse", "refused_by_hook", reason)
        try:
            arguments = parse_arguments(call.arguments)
        except ArgumentError:
            return None  # execute() explains it to the model
        verdict, why = decide(call.name, arguments, self.mode, **self.rules)
        if verdict == "ask":
            answer = self.approve(call, question(call, tool_)) if self.approve else None
            verdict, why = ("allow", f"approved ({why})") if approved(answer) else ("deny", why)
        self.log.append((call, verdict, why))
        if verdict == "deny":
            said = f"{call.name} was not run: {why} — do not retry it; do the task another way"
            return Decision("refuse", "not_permitted", said + " or tell the user")
        return Decision("allow", "permitted", why)

    def after_tool(
        self, run: loop.RunResult, call: ToolCall, result: dict[str, Any] | str
    ) -> dict[str, Any] | str:
        for hook in self.hooks.after:
            result = hook(call, result)
        return result


# ---------------------------------------------------------------- the agent

SYSTEM = (
    "You are a coding agent working in a copy of a Python repository. Find the code with grep and "
    "read_file (ask for line ranges), change it with apply_patch, and run the tests with "
    "run('python -m pytest -q'). Keep changes small. Refuse, in words, a request that would "
    "destroy work (deleting tests, history or data). When you are done, say what you changed."
)


@dataclass
class CodingRun:
    """One task's run: the loop's result, its totals, the patch, and what plan mode decided."""

    result: loop.RunResult
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    sent_back: list = field(default_factory=list)  # the stop hook's messages, one per return
    patch: str = ""
    plan: str = ""  # the plan approved in plan mode ("" when the run did not plan)
    mode: str = ""  # the mode the run ended in
    context: CodingContext | None = None  # the repository map, the files read, compactions


def solve(
    issue: str,
    model: Model,
    ws: Workspace,
    guard: CodingGuard | None = None,
    max_turns: int = 12,
    max_calls: int = 16,
    budget: Budget | None = None,
    explore: Model | None = None,
    context: CodingContext | None = None,
) -> CodingRun:
    """Work on an issue in the workspace until the model stops and the stop hook lets it.

    The stop hook (guard.hooks.on_stop) may send the agent back with a message (e.g. the failing
    tests) as long as turns are left. In plan mode the model's answer is its plan: approved
    (guard.end_plan), the agent is sent back to carry it out in the chosen mode; not approved,
    the run ends with nothing changed. explore: a model for the Explore sub-agent (offered as
    the tool "explore"). context: a CodingContext (default: the repository map, no summariser).
    Example: solve(task["problem_statement"], model, ws, CodingGuard("acceptEdits")).patch
    """
    guard = guard or CodingGuard("acceptEdits")
    tools = coding_tools(ws, patches.Edits())
    if explore is not None:  # a sub-agent is charged to a budget the main run is metered by
        budget = budget or Budget(max_turns, max_calls, max_input_tokens=200_000)
        tools.append(explorer(explore, tools, budget))
    if budget is not None:
        max_turns, max_calls = min(max_turns, budget.max_turns), min(max_calls, budget.max_calls)
    context = context or CodingContext(ws, SYSTEM, before_compact=guard.hooks.before_compact)
    out = CodingRun(loop.RunResult())

    def on_stop(run):
        if guard.mode == "plan":  # the answer is a plan, not a fix
            mode = guard.end_plan(run.answer)
            if mode is None:
                return None
            out.plan = run.answer
            back = f"The plan is approved: carry it out now ({mode} mode), then say done."
        else:
            back = guard.hooks.on_stop(run) if guard.hooks.on_stop else None
            if back:
                out.sent_back.append(back)
        return back

    every = Guards(*([budget] if budget else []), guard)
    result = run_agent(issue, model, tools, every, SYSTEM, max_turns, max_calls, on_stop, context)
    if budget is not None:
        budget.settle(result)
    out.result, out.turns, out.tool_calls = result, result.turns, result.tool_calls
    out.usage, out.patch, out.mode, out.context = result.usage, ws.diff(), guard.mode, context
    return out


def calls_shown(log: list[tuple[ToolCall, str, str]]) -> list[str]:
    """The guard's log as lines: name(subject) -> verdict (why)."""
    return [
        f"{c.name}({subject(c.name, json.loads(c.arguments or '{}'))[:40]}) -> {v} ({w})"
        for c, v, w in log
    ]
