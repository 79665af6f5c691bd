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


@dataclass
class Budget(Guard):
    """Hard stops for one run, checked BEFORE each model call and tool call: never overshot.

    A model call is allowed only when what it may use still fits: its input, counted for `model`
    (labkit.tokens), plus `max_output_tokens`, reserved for the reply (run_guarded caps the reply
    at it). Until a reply carries usage the count adds the tool schemas and is multiplied by
    FIRST_SCALE; after that it is scaled by the largest ratio of used to counted seen. Offline (the
    scripted model counts the same way) the overshoot is 0; with a live model it is bounded by the
    count's error, not proven 0. `source` says who counted what it metered (tokens.SOURCES). Watch
    it: Budget(..., watch=print) prints the meter every turn; on_turn is handed the meter itself.
    run_guarded never changes the Budget it is given: it meters fresh() and returns it as
    result.budget.
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
    # called with the metered Budget after each turn, e.g. lambda spent: seen.append(spent.tokens)
    on_turn: Callable[["Budget"], object] | None = None
    turns: int = field(default=0, init=False)
    calls: int = field(default=0, init=False)
    tokens: int = field(default=0, init=False)
    cost: Fraction = field(default=Fraction(0), init=False)
    source: str = field(default="reported", init=False)  # the least trusted count metered
    # cautious, then the largest ratio of used to counted
    scale: float = field(default=FIRST_SCALE, init=False)
    tool_tokens: int = field(default=0, init=False)  # schema_tokens(tools), set by run_guarded
    calibrated: bool = field(default=False, init=False)  # a reply's own usage has set the scale
    delegated: int = field(default=0, init=False)  # tokens charged by sub-agents (labkit.agents)
    _run: RunResult | None = field(default=None, init=False, repr=False)
    # (raw estimate, scaled) for the call
    _asked: tuple = field(default=(0, 0), init=False, repr=False)
    _seen: Usage = field(default_factory=Usage, init=False, repr=False)

    def __post_init__(self):
        for name, whole, least, optional in _LIMITS:
            value = getattr(self, name)
            if value is None and optional:
                continue
            # True is an int to Python, not to a budget (is_number says no to a bool)
            number = is_number(value) and (isinstance(value, int) or not whole)
            if not number or not math.isfinite(value) or value < least:
                raise UserError(
                    f"Budget({name}={value!r}) is not a limit — use {'a whole' if whole else 'a'} "
                    "number "
                    f">= {least}{' (or None: no limit)' if optional else ''}"
                )
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

        Example: Budget(max_tokens=2_000).fresh().tokens  ->  0
        """
        return replace(self)  # the init=False fields (what is spent) start again

    def scrubbed(self, run: RunResult) -> "Budget":
        """This meter, now pointing at `run`, the scrubbed copy of the run it metered (run_guarded
        hands it back on the result, which must hold no secret)."""
        self._run = run
        return self

    @property
    def run(self) -> RunResult | None:
        """The run this budget meters (None before its first turn)."""
        return self._run

    def settle(self, run: RunResult) -> None:
        """Count the turn made since the last look: the usage its reply carried, else our count."""
        self._claim(run)
        self.calls = run.tool_calls
        if run.turns == self.turns:
            return
        used_in, used_out = self._used(run)
        if used_out > self.max_output_tokens:
            run.trace.add(
                "guard",
                run.turns,
                f"budget: the reply used {used_out} output tokens, more than the "
                f"{self.max_output_tokens} reserved — cap the model's output at max_output_tokens",
            )
        self.turns, self._seen = run.turns, run.usage
        self.tokens += used_in + used_out
        self.cost += estimated_cost(self.model, used_in, used_out) or 0
        if self.watch:
            self.watch(self.meter_line())
        if self.on_turn:
            self.on_turn(self)

    def _claim(self, run: RunResult) -> None:
        """Meter `run` from now on; a budget meters one run only (UserError for a second)."""
        if self._run is not run:
            if self._run is not None:
                raise UserError(
                    "this Budget already metered a run — make a new Budget(...) for each run"
                )
            self._run = run

    def _used(self, run: RunResult) -> tuple[int, int]:
        """(input, output) tokens of the turn since the last look: as its reply reported them,
        none for a failed call, else as labkit counts them."""
        used_in = run.usage.input_tokens - self._seen.input_tokens
        used_out = run.usage.output_tokens - self._seen.output_tokens
        if used_in + used_out > 0:
            self._calibrate(used_in, run.usage.source)
            return used_in, used_out
        if run.status == "service_error":
            return 0, 0  # the call failed and returned nothing to count
        return self._counted(run)  # the server did not report usage: count it ourselves

    def _calibrate(self, used_in: int, source: str) -> None:
        """Learn from a reported input how far the count undercounts (it includes what the server
        counted for the tool schemas)."""
        raw, _ = self._asked
        self.source = least_trusted(self.source, source)
        ratio = used_in / raw if raw else 1.0
        # subtle: keep the largest ratio seen; a ratio replaced each turn lets one low count
        # undo a high one
        self.scale = max(self.scale, ratio) if self.calibrated else max(1.0, ratio)
        self.calibrated = True

    def _counted(self, run: RunResult) -> tuple[int, int]:
        """(input, output) of a turn no server reported: the input reserved, the reply counted."""
        reply = next(m for m in reversed(run.messages) if m.role == "assistant")
        spoken = reply.content + "".join(c.name + c.arguments for c in reply.tool_calls)
        self.source = least_trusted(self.source, count_source(self.model))
        return self._asked[1], count(spoken, self.model)

    def before_model(self, run: RunResult) -> Decision | None:
        self.settle(run)
        if run.turns >= self.max_turns:
            said = (
                f"turn budget: all {self.max_turns} turns used — raise max_turns or split the task"
            )
            return Decision("stop", "turn_limit", said)
        self._asked = self.forecast(run.messages)
        (raw, need), reserve = self._asked, self.max_output_tokens
        if need > self.max_input_tokens:
            margin = f"; {need:,} with the safety margin" if need != raw else ""
            said = (
                f"input too large: {raw:,} tokens ({count_source(self.model)}{margin}); one call "
                f"may send {self.max_input_tokens:,} — shorten the task or the documents, or "
                "split it"
            )
            return Decision("stop", "budget_exhausted", said)
        if self.max_tokens is not None and self.tokens + need + reserve > self.max_tokens:
            said = (
                f"token budget: {self.tokens:,} of {self.max_tokens:,} used and the next call "
                f"may need {need + reserve:,} — raise max_tokens or narrow the task"
            )
            return Decision("stop", "budget_exhausted", said)
        next_cost = estimated_cost(self.model, need, reserve) or 0
        if self.max_cost is not None and self.cost + next_cost > Fraction(str(self.max_cost)):
            said = (
                f"cost budget: ${float(self.cost):.6f} of ${self.max_cost:.6f} used and the "
                f"next call may cost ${float(next_cost):.6f} (estimated) — raise max_cost or "
                "narrow the task"
            )
            return Decision("stop", "budget_exhausted", said)
        return None

    def forecast(self, messages: list) -> tuple[int, int]:
        """(counted, need): the next call's input as labkit counts it, and the input reserved."""
        raw = count(messages, self.model)
        # no reply has carried usage yet: add the tool schemas, and be cautious
        if not self.calibrated:
            return raw, math.ceil((raw + self.tool_tokens) * self.scale)
        return raw, math.ceil(raw * self.scale)

    def charge(self, spent: "Budget") -> None:
        """Count what another budget metered for this run (a sub-agent's) against these limits.

        Example: parent_budget.charge(sub_budget)
        """
        self.tokens += spent.tokens
        self.delegated += spent.tokens
        self.cost += spent.cost
        self.source = least_trusted(self.source, spent.source)

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
        tokens = f"{self.tokens:,}" + (
            f"/{self.max_tokens:,}" if self.max_tokens is not None else ""
        )
        cost = f"${float(self.cost):.6f}" + (
            f"/${self.max_cost:.6f}" if self.max_cost is not None else ""
        )
        return (
            f"turn {self.turns}: tokens {tokens} | cost {cost} | tool calls "
            f"{self.calls}/{self.max_calls}"
        )

    def meter(self) -> str:
        """The whole meter, used / limit with a bar, and where the prices come from."""
        price = PRICES.get(self.model)
        rows = [
            ("turns", f"{self.turns}", f"{self.max_turns}", self.turns, self.max_turns),
            ("tool calls", f"{self.calls}", f"{self.max_calls}", self.calls, self.max_calls),
            (
                "tokens",
                f"{self.tokens:,}",
                f"{self.max_tokens:,}" if self.max_tokens is not None else "-",
                self.tokens,
                self.max_tokens,
            ),
            (
                "cost",
                f"${float(self.cost):.6f}",
                f"${self.max_cost:.6f}" if self.max_cost is not None else "-",
                float(self.cost),
                self.max_cost,
            ),
        ]
        lines = [
            f"{name:<10} {used:>10} / {limit:<10} {_bar(u, lim) if lim is not None else ''}"
            for name, used, limit, u, lim in rows
        ]
        lines.append(
            f"tokens {SOURCES[self.source]}"
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
