"""Sub-agents, handoffs and reflection: several model calls for one answer, under one set of rules.

Built in 08_context. A `Parent` holds a run's rules: its tools, Budget, max_risk, approval, secrets
and allowed hosts. `parent.as_tool(agent)` makes an `Agent` a tool: it runs in its own isolated
context (its system prompt and its task, none of the parent's history) with its own tool subset
and limits, and answers with a short report; every call it makes passes the parent's guards (it
never gains a permission the parent lacks), its tokens are charged to the parent's budget, and its
trace nests in the parent's. `parent.handoff` passes control and the whole history instead.
`reflect` drafts, critiques and revises, bounded, and stops early when the critique finds nothing.
Left out, and what production uses instead: parallel sub-agents, negotiation, trained critics.
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .budget import Budget
from .errors import ToolError, UserError
from .guardrails import GUARDED_SYSTEM, run_guarded
from .injection import untrusted
from .loop import RunResult
from .models import Message, Model, Usage, system, user
from .permissions import read_untrusted
from .tools import RISKS, Tool, as_registry, risk_above
from .trace import Trace, clip

SUB_SYSTEM = GUARDED_SYSTEM + (
    " You are a sub-agent: you see only the task you were given. Do it with your tools and answer"
    " in a few sentences, with the facts and where they came from."
)
# what a sub-agent reads when the parent had read untrusted text before it wrote the task
TAINT = "the parent agent wrote this task after reading untrusted content"


@dataclass
class Agent:
    """A model with its own instructions, tool subset and limits. Example: Agent("researcher",
    "Finds facts in the handbook.", model, tools=[list_docs, read_doc], max_turns=4)"""

    name: str  # the tool name the parent's model calls: "researcher"
    description: str  # what the parent's model reads to decide when to delegate
    model: Model
    tools: list = field(default_factory=list)  # a subset of the parent's tools
    system: str = SUB_SYSTEM
    max_turns: int = 4
    max_calls: int = 4
    max_tokens: int | None = 3_000  # never more than the parent has left
    max_risk: str | None = None  # None: the parent's; never above it
    report_chars: int = 600  # the answer is clipped to this in the report


@dataclass
class Parent:
    """The rules of a run, shared with every sub-agent it calls and every agent it hands off to.

    One Parent meters one run: `spent` is that run's meter (a copy of `budget`, which is never
    changed), charged with every sub-agent's tokens. Example: Parent([read_doc], Budget(max_tokens=
    6_000)).run("Summarise the retry advice", model, agents=[researcher])
    """

    tools: list
    budget: Budget = field(default_factory=Budget)
    max_risk: str = "low"
    approve: object = None  # asked before high-risk tools, by sub-agents too
    secrets: tuple = ()
    allowed_hosts: tuple = ()
    spent: Budget | None = field(default=None, init=False, repr=False)  # the run's own meter

    def run(
        self,
        task: str,
        model: Model,
        agents: Iterable[Agent] = (),
        system: str = GUARDED_SYSTEM,
        history: Iterable[Message] = (),
    ) -> RunResult:
        """run_guarded with this parent's rules; each agent in `agents` is offered as a tool."""
        tools = [*self.tools, *(self.as_tool(a) for a in agents)]  # a bad sub-agent fails first
        if self.spent is not None and self.spent.run is not None:
            raise UserError(
                "this Budget already metered a run — make a new Budget(...) for each run"
            )
        budget = replace(self.budget, on_turn=self._keep(self.budget.on_turn))
        result = run_guarded(
            task, model, tools, system=system, history=history, **self._rules(budget)
        )
        self.spent = result.budget
        return result

    def _keep(self, on_turn):
        """An on_turn that keeps the run's meter as this parent's `spent`, then calls on_turn."""

        def seen(meter: Budget) -> None:
            self.spent = meter
            if on_turn:
                on_turn(meter)

        return seen

    def _meter(self) -> Budget:
        """The meter sub-agents are charged to: the run's, or a fresh one before any run."""
        if self.spent is None:
            self.spent = self.budget.fresh()
        return self.spent

    def _rules(self, budget):
        return dict(
            budget=budget,
            max_risk=self.max_risk,
            approve=self.approve,
            secrets=self.secrets,
            allowed_hosts=self.allowed_hosts,
        )

    def check(self, agent: Agent) -> str:
        """The risk `agent` may run at; UserError if it asks for what the parent lacks.

        Example: parent.check(Agent("mailer", "...", model, [send_email]))  ->  "low"
        """
        mine = {t.name: t for t in as_registry(self.tools)}
        for t in as_registry(agent.tools):
            if t.name not in mine or mine[t.name].fn is not t.fn:
                raise UserError(
                    f"sub-agent {agent.name} has tool {t.name}, which its parent does not — a "
                    "sub-agent's tools are a subset of its parent's: add it to the parent first"
                )
        risk = agent.max_risk or self.max_risk
        if risk not in RISKS or risk_above(risk, self.max_risk):
            raise UserError(
                f"sub-agent {agent.name} asks for max_risk {risk!r} but its parent has "
                f"{self.max_risk!r} — a sub-agent never gains a permission its parent lacks"
            )
        return risk

    def _sub_budget(self, agent: Agent) -> Budget:
        """The agent's own limits, within what the parent's budget has left."""
        parent, tokens, cost = self._meter(), agent.max_tokens, None
        if parent.max_tokens is not None:
            left = max(parent.max_tokens - parent.spent.tokens, 0)
            tokens = left if tokens is None else min(tokens, left)
        if parent.max_cost is not None:
            cost = max(parent.max_cost - float(parent.spent.cost), 0.0)
        return Budget(
            max_turns=agent.max_turns,
            max_calls=agent.max_calls,
            max_tokens=tokens,
            max_cost=cost,
            max_output_tokens=parent.max_output_tokens,
            model=parent.model,
        )

    def delegate(self, agent: Agent, task: str) -> dict:
        """Run `agent` on `task` in its own context; charge, nest and report it to the parent run.

        Example: parent.delegate(researcher, "Find the advice on jitter")["status"]
        """
        risk, run = self.check(agent), self._meter().run
        if run is None:
            raise UserError("a sub-agent runs inside parent.run(...) — start the parent's run")
        if read_untrusted(run.messages):  # a task written after untrusted text is tainted too
            task = f"{task}\n\n{untrusted(TAINT, 'the parent agent')}"
        budget = self._sub_budget(agent)
        rules = {**self._rules(budget), "max_risk": risk}
        sub = run_guarded(task, agent.model, agent.tools, system=agent.system, **rules)
        self._meter().charge(sub.budget.spent)  # its tokens count against the parent's budget
        for e in sub.trace.events:  # its trace nests inside the parent's, at this tool call
            run.trace.add(
                "sub",
                run.turns,
                f"{agent.name} {e.turn} {e.kind:<5} {e.summary}",
                e.tokens,
                e.elapsed,
                agent=agent.name,
                nested=e.detail,
            )
        report = {"agent": agent.name, "status": sub.status, "tokens": sub.budget.spent.tokens}
        report["answer"] = clip(sub.answer, agent.report_chars) if sub.answer else ""
        if sub.status != "completed":
            report["next_step"] = clip(sub.next_step, 200)
        return report

    def as_tool(self, agent: Agent) -> Tool:
        """The agent as a tool the parent's model calls with a task; it returns a short report.

        Example: parent.run(task, model, agents=[researcher])  # offers parent.as_tool(researcher)
        """
        self.check(agent)  # refused now, not at the first call

        def fn(task):
            if not task.strip():
                raise ToolError(f"give {agent.name} a task: say what it should find or do", "empty")
            return self.delegate(agent, task)

        text = {"type": "string", "description": "what the sub-agent should do, in full"}
        parameters = {
            "type": "object",
            "properties": {"task": text},
            "required": ["task"],
            "additionalProperties": False,
        }
        return Tool(agent.name, agent.description, parameters, fn)

    def handoff(self, previous: RunResult, agent: Agent, note: str) -> RunResult:
        """Pass control to `agent`: it reads the whole history of `previous` and answers the user
        itself; the first agent is done. Under the same rules, charged to this parent's budget.

        Example: parent.handoff(first, billing, "The user wants a refund for order A-17.")
        """
        risk = self.check(agent)
        budget = self._sub_budget(agent)
        rules = {**self._rules(budget), "max_risk": risk}
        result = run_guarded(
            note, agent.model, agent.tools, system=agent.system, history=previous.messages, **rules
        )
        self._meter().charge(result.budget.spent)
        return result


# ---------------------------------------------------------------- reflection

DRAFT = "Do the task. Answer with the text asked for, nothing else."
CRITIC = (
    "Critique the draft against the task: list each concrete problem on its own line. If nothing "
    "needs to change, reply with exactly: NO CHANGES"
)
REVISE = "Revise the draft so every problem in the critique is fixed. Reply with the new text only."


def nothing_to_change(critique: str) -> bool:
    """Whether a critique says the draft can stand ("NO CHANGES", in any case, maybe with a dot).

    Example: nothing_to_change("No changes.")  ->  True;  nothing_to_change("1. Too long") -> False
    """
    return " ".join(critique.split()).casefold().rstrip(".!").startswith("no changes")


@dataclass
class Reflection:
    answer: str  # the last revision (the draft if none was needed)
    rounds: int  # critiques made
    stopped: str  # "no_changes" (the critique found nothing) | "max_rounds"
    usage: Usage
    trace: Trace
    drafts: list = field(default_factory=list)  # the draft, then each revision


def reflect(
    task: str,
    model: Model,
    critic: Model | None = None,
    max_rounds: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> Reflection:
    """Draft → critique → revise, at most `max_rounds` critiques, stopping at the first that finds
    nothing to change. The critic defaults to the model itself; every call lands in the trace.

    Example: reflect("Write a two-line release note", model, max_rounds=2).stopped
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 0:
        raise UserError(f"max_rounds={max_rounds!r} — give a whole number of critiques, e.g. 2")
    critic, trace, usage = critic or model, Trace(clock), Usage()

    def ask(who, step, round, instructions, text):
        nonlocal usage
        started = clock()
        reply = who.respond([system(instructions), user(text)])
        usage = usage + (reply.usage or Usage())
        tokens = reply.usage.total_tokens if reply.usage else None
        said = f"{step}: {clip(reply.text, 70)!r}"
        trace.add("model", round, said, tokens, clock() - started, step=step, text=reply.text)
        return reply.text

    drafts = [ask(model, "draft", 0, DRAFT, task)]
    for round in range(1, max_rounds + 1):
        shown = f"Task: {task}\n\nDraft:\n{drafts[-1]}"
        critique = ask(critic, "critique", round, CRITIC, shown)
        if nothing_to_change(critique):
            trace.stop(round, "no_changes", "the critique found nothing to change")
            return Reflection(drafts[-1], round, "no_changes", usage, trace, drafts)
        revised = ask(model, "revision", round, REVISE, f"{shown}\n\nCritique:\n{critique}")
        drafts.append(revised if revised.strip() else drafts[-1])  # an empty revision is no answer
    trace.stop(max_rounds, "max_rounds", f"{max_rounds} critique(s), each asked for changes")
    return Reflection(drafts[-1], max_rounds, "max_rounds", usage, trace, drafts)
