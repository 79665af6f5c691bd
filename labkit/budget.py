"""Budgets: hard stops on turns, tool calls, tokens and estimated cost, checked before each call.

Built in 05_guardrails (first; the other guards are in labkit.guardrails). `Budget` is a Guard:
before each model call it forecasts what the call may use — its input, counted with the model's
tokenizer (labkit.tokens; estimated at chars/4 for a model labkit has none for), plus the reply's
reserved `max_output_tokens` — and stops the run (budget_exhausted) when that would not fit, so a
budget is never overshot offline. `estimated_cost` prices tokens with PRICES, copied by hand.
Left out, and what production uses instead: the server's own layout of the request (so with a live
model the overshoot is bounded by the count's error, not proven 0), budgets across runs, live
price lists.
"""

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from .config import DEFAULT_MODEL
from .errors import UserError
from .loop import Decision, Guard, RunResult
from .models import ToolCall, Usage, as_tool_spec
from .schema import is_number
from .tokens import SOURCES, count, least_trusted
from .tokens import source as count_source
from .tools import Tool

PRICES_AS_OF = "2025-08"
PRICES = {  # USD per 1M tokens (input, output), standard tier. An ESTIMATE copied by hand
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),  # from the
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),  # provider's
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),  # pricing page
}


def estimated_cost(model: str, input_tokens: int, output_tokens: int) -> Fraction | None:
    """USD for one call from PRICES, as an exact fraction; None for an unknown model.

    Example: float(estimated_cost("gpt-5-mini", 1000, 100))  ->  0.00045
    """
    if model not in PRICES:
        return None
    per_in, per_out = (Fraction(str(p)) for p in PRICES[model])
    return (input_tokens * per_in + output_tokens * per_out) / 1_000_000


def schema_tokens(tools: Iterable[object], model: str | None = DEFAULT_MODEL) -> int:
    """The size of the tool schemas a live model is sent (and charged for) each call, counted as
    their JSON text (the server lays them out its own way, so this is close, not exact).

    Example: schema_tokens([calculate])  ->  the o200k_base count of its name, description, schema
    """
    specs = [as_tool_spec(t) for t in tools]
    return sum(
        count(
            json.dumps(
                {"name": s.name, "description": s.description, "parameters": s.parameters},
                ensure_ascii=False,
            ),
            model,
        )
        for s in specs
    )


# Until a reply carries usage: a server may count more than labkit (chars/4 is rough, and even an
# exact tokenizer does not see how the server lays out the request and the tool schemas)
FIRST_SCALE = 1.5
_LIMITS = (  # Budget field, whole number only, least value, None allowed (no limit)
    ("max_turns", True, 0, False),
    ("max_calls", True, 0, False),
    ("max_tokens", True, 0, True),
    ("max_cost", False, 0, True),
    ("max_input_tokens", True, 0, False),
    ("max_output_tokens", True, 1, False),
)


def _bar(used, limit, width=10):
    filled = width if not limit else min(width, math.floor(width * used / limit))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _check(name: str, value: Any, whole: bool, least: int, optional: bool) -> None:
    """UserError unless `value` is a limit for Budget's field `name` (see _LIMITS)."""
    if value is None and optional:
        return
    # True is an int to Python, not to a budget (is_number says no to a bool)
    number = is_number(value) and (isinstance(value, int) or not whole)
    if not number or not math.isfinite(value) or value < least:
        raise UserError(
            f"Budget({name}={value!r}) is not a limit — use {'a whole' if whole else 'a'} number "
            f">= {least}{' (or None: no limit)' if optional else ''}"
        )


@dataclass
class Spent:
    """What a Budget metered in its run so far: budget.spent (fresh() starts a new one)."""

    turns: int = 0
    calls: int = 0  # tool calls
    tokens: int = 0  # input + output over the whole run, sub-agents' too
    cost: Fraction = Fraction(0)  # USD, estimated with PRICES[model]
    delegated: int = 0  # tokens charged by sub-agents (labkit.agents)
    source: str = "reported"  # the least trusted count metered
    scale: float = FIRST_SCALE  # cautious, then the largest ratio of used to counted
    calibrated: bool = False  # a reply's own usage has set the scale
    tool_tokens: int = 0  # schema_tokens(tools), set by run_guarded
    run: RunResult | None = field(default=None, repr=False)  # the run metered
    asked: tuple[int, int] = (0, 0)  # (raw estimate, scaled) for the call
    seen: Usage = field(default_factory=Usage, repr=False)  # the run's usage at the last look


@dataclass
class Budget(Guard):
    """Hard stops for one run, checked BEFORE each model call and tool call: never overshot.

    A model call is allowed only when what it may use still fits: its input, counted for `model`
    (labkit.tokens), plus `max_output_tokens`, reserved for the reply (run_guarded caps the reply
    at it). Until a reply carries usage the count adds the tool schemas and is multiplied by
    FIRST_SCALE; after that it is scaled by the largest ratio of used to counted seen. Offline (the
    scripted model counts the same way) the overshoot is 0; with a live model it is bounded by the
    count's error, not proven 0. What it metered is `spent`; spent.source says who counted it
    (tokens.SOURCES). Watch it: Budget(..., watch=print) prints the meter every turn; on_turn is
    handed the meter itself. run_guarded never changes the Budget it is given: it meters fresh()
    and returns it as result.budget.
    Example: Budget(max_turns=4, max_tokens=2_000, max_cost=0.001)
    """

    max_turns: int = 6
    max_calls: int = 8
    max_tokens: int | None = None  # input + output over the whole run
    max_cost: float | None = None  # USD, estimated with PRICES[model]
    max_input_tokens: int = 8_000  # one call's input: more is rejected before the model sees it
    max_output_tokens: int = 512  # reserved per call: the most one reply may add
    model: str = DEFAULT_MODEL  # whose prices, and whose tokenizer counts
    # called with meter_line() after each turn, e.g. print
    watch: Callable[[str], object] | None = None
    # called with the metered Budget after each turn, e.g. lambda b: seen.append(b.spent.tokens)
    on_turn: Callable[["Budget"], object] | None = None
    spent: Spent = field(default_factory=Spent, init=False)  # what the run used so far

    def __post_init__(self):
        for name, whole, least, optional in _LIMITS:
            _check(name, getattr(self, name), whole, least, optional)
        self.for_model(self.model)

    def for_model(self, name: str) -> None:
        """Price the run as model `name`; run_guarded passes a live model's own name."""
        if self.max_cost is not None and name not in PRICES:
            raise UserError(
                f"no price for model {name!r} in PRICES — add it (USD per 1M tokens: input, "
                "output) or leave max_cost out and use max_tokens"
            )
        self.model = name

    def fresh(self) -> "Budget":
        """A new meter with these limits (and model, watch, on_turn) and nothing spent.

        Example: Budget(max_tokens=2_000).fresh().spent.tokens  ->  0
        """
        return replace(self)  # `spent` is init=False: a new Spent

    def scrubbed(self, run: RunResult) -> "Budget":
        """This meter, now at `run`: the scrubbed copy of its run (result.budget: no secret)."""
        self.spent.run = run
        return self

    @property
    def run(self) -> RunResult | None:
        """The run this budget meters (None before its first turn)."""
        return self.spent.run

    def settle(self, run: RunResult) -> None:
        """Count the turn made since the last look: the usage its reply carried, else our count."""
        self._claim(run)
        self.spent.calls = run.tool_calls
        if run.turns == self.spent.turns:
            return
        self._add(run, *self._used(run))
        if self.watch:
            self.watch(self.meter_line())
        if self.on_turn:
            self.on_turn(self)

    def _claim(self, run: RunResult) -> None:
        """Meter `run` from now on; a budget meters one run only (UserError for a second)."""
        if self.spent.run is not None and self.spent.run is not run:
            raise UserError(
                "this Budget already metered a run — make a new Budget(...) for each run"
            )
        self.spent.run = run

    def _add(self, run: RunResult, used_in: int, used_out: int) -> None:
        """Add the turn's tokens and their estimated cost; trace a reply over its reservation."""
        if used_out > self.max_output_tokens:
            run.trace.add(
                "guard",
                run.turns,
                f"budget: the reply used {used_out} output tokens, more than the "
                f"{self.max_output_tokens} reserved — cap the model's output at max_output_tokens",
            )
        spent = self.spent
        spent.turns, spent.seen = run.turns, run.usage
        spent.tokens += used_in + used_out
        spent.cost += estimated_cost(self.model, used_in, used_out) or 0

    def _used(self, run: RunResult) -> tuple[int, int]:
        """(input, output) tokens of the turn since the last look: as its reply reported them,
        none for a failed call, else as labkit counts them."""
        used_in = run.usage.input_tokens - self.spent.seen.input_tokens
        used_out = run.usage.output_tokens - self.spent.seen.output_tokens
        if used_in + used_out > 0:
            self._calibrate(used_in, run.usage.source)
            return used_in, used_out
        if run.status == "service_error":
            return 0, 0  # the call failed and returned nothing to count
        return self._counted(run)  # the server did not report usage: count it ourselves

    def _calibrate(self, used_in: int, source: str) -> None:
        """Learn from a reported input how far the count undercounts (it includes what the server
        counted for the tool schemas)."""
        spent, (raw, _) = self.spent, self.spent.asked
        spent.source = least_trusted(spent.source, source)
        ratio = used_in / raw if raw else 1.0
        # subtle: keep the largest ratio seen; a ratio replaced each turn lets one low count
        # undo a high one
        spent.scale = max(spent.scale, ratio) if spent.calibrated else max(1.0, ratio)
        spent.calibrated = True

    def _counted(self, run: RunResult) -> tuple[int, int]:
        """(input, output) of a turn no server reported: the input reserved, the reply counted."""
        reply = next(m for m in reversed(run.messages) if m.role == "assistant")
        spoken = reply.content + "".join(c.name + c.arguments for c in reply.tool_calls)
        self.spent.source = least_trusted(self.spent.source, count_source(self.model))
        return self.spent.asked[1], count(spoken, self.model)

    def before_model(self, run: RunResult) -> Decision | None:
        self.settle(run)
        if run.turns >= self.max_turns:
            said = (
                f"turn budget: all {self.max_turns} turns used — raise max_turns or split the task"
            )
            return Decision("stop", "turn_limit", said)
        spent, reserve = self.spent, self.max_output_tokens
        raw, need = spent.asked = self.forecast(run.messages)
        if need > self.max_input_tokens:
            margin = f"; {need:,} with the safety margin" if need != raw else ""
            said = (
                f"input too large: {raw:,} tokens ({count_source(self.model)}{margin}); one call "
                f"may send {self.max_input_tokens:,} — shorten the task or the documents, or "
                "split it"
            )
            return Decision("stop", "budget_exhausted", said)
        if self.max_tokens is not None and spent.tokens + need + reserve > self.max_tokens:
            said = (
                f"token budget: {spent.tokens:,} of {self.max_tokens:,} used and the next call "
                f"may need {need + reserve:,} — raise max_tokens or narrow the task"
            )
            return Decision("stop", "budget_exhausted", said)
        next_cost = estimated_cost(self.model, need, reserve) or 0
        if self.max_cost is not None and spent.cost + next_cost > Fraction(str(self.max_cost)):
            said = (
                f"cost budget: ${float(spent.cost):.6f} of ${self.max_cost:.6f} used and the "
                f"next call may cost ${float(next_cost):.6f} (estimated) — raise max_cost or "
                "narrow the task"
            )
            return Decision("stop", "budget_exhausted", said)
        return None

    def forecast(self, messages: list) -> tuple[int, int]:
        """(counted, need): the next call's input as labkit counts it, and the input reserved."""
        raw, spent = count(messages, self.model), self.spent
        # no reply has carried usage yet: add the tool schemas (spent.scale is still cautious)
        schemas = 0 if spent.calibrated else spent.tool_tokens
        return raw, math.ceil((raw + schemas) * spent.scale)

    def charge(self, other: Spent) -> None:
        """Count what another budget spent for this run (a sub-agent's) against these limits.

        Example: parent_budget.charge(sub_result.budget.spent)
        """
        self.spent.tokens += other.tokens
        self.spent.delegated += other.tokens
        self.spent.cost += other.cost
        self.spent.source = least_trusted(self.spent.source, other.source)

    def before_tool(self, run: RunResult, call: ToolCall, tool: Tool | None) -> Decision | None:
        self.settle(run)
        if run.tool_calls >= self.max_calls:
            return Decision(
                "stop",
                "tool_limit",
                f"tool-call budget: all {self.max_calls} calls used — raise "
                "max_calls or narrow the task",
            )
        return None

    def after_tool(
        self, run: RunResult, call: ToolCall, result: dict[str, Any] | str
    ) -> dict[str, Any] | str:
        self.settle(run)
        return result

    def meter_line(self) -> str:
        """One line per turn for a watch callback: turn 2: tokens 412/2,000 | cost ... | calls 1"""
        spent = self.spent
        tokens = f"{spent.tokens:,}" + (
            f"/{self.max_tokens:,}" if self.max_tokens is not None else ""
        )
        cost = f"${float(spent.cost):.6f}" + (
            f"/${self.max_cost:.6f}" if self.max_cost is not None else ""
        )
        return (
            f"turn {spent.turns}: tokens {tokens} | cost {cost} | tool calls "
            f"{spent.calls}/{self.max_calls}"
        )

    def meter(self) -> str:
        """The whole meter, used / limit with a bar, and where the prices come from."""
        price, spent = PRICES.get(self.model), self.spent
        tokens_cap = f"{self.max_tokens:,}" if self.max_tokens is not None else "-"
        cost_cap = f"${self.max_cost:.6f}" if self.max_cost is not None else "-"
        rows = [
            ("turns", f"{spent.turns}", f"{self.max_turns}", spent.turns, self.max_turns),
            ("tool calls", f"{spent.calls}", f"{self.max_calls}", spent.calls, self.max_calls),
            ("tokens", f"{spent.tokens:,}", tokens_cap, spent.tokens, self.max_tokens),
            ("cost", f"${float(spent.cost):.6f}", cost_cap, float(spent.cost), self.max_cost),
        ]
        lines = [
            f"{name:<10} {used:>10} / {limit:<10} {_bar(u, lim) if lim is not None else ''}"
            for name, used, limit, u, lim in rows
        ]
        lines.append(
            f"tokens {SOURCES[spent.source]}"
            f"; cost is an ESTIMATE: {self.model} at "
            + (
                f"${price[0]:.2f} in / ${price[1]:.2f} out per "
                f"1M tokens, prices as of {PRICES_AS_OF}"
                if price
                else "no price in PRICES"
            )
        )
        return "\n".join(lines)

    def __repr__(self):
        return self.meter()
