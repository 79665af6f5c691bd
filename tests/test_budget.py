"""labkit.budget: turn, call, token and cost budgets with 0 overshoot offline, the meter, prices."""

import json
import math
from dataclasses import fields
from fractions import Fraction

import pytest

from labkit import guardrails as g
from labkit import loop, tokens
from labkit.budget import PRICES_AS_OF, Budget, estimated_cost, schema_tokens
from labkit.errors import UserError
from labkit.models import (
    Reply,
    ScriptedModel,
    Step,
    ToolCall,
    Usage,
    call,
    check_pairing,
    say,
    turn,
)
from labkit.tokens import SOURCES
from labkit.toolbox import calculate
from labkit.tools import tool


def keep_going(messages, tools):
    """A model that never stops: every turn a new calculation (never a repeat)."""
    return Step(calls=(("calculate", json.dumps({"expression": f"{len(messages)} * 2"})),))


def forever(turns=5000):
    return ScriptedModel([keep_going] * turns)


def recorder():
    ran = []

    @tool
    def echo(text: str) -> str:
        """Repeat the text."""
        ran.append(text)
        return text

    return echo, ran


# ---------------------------------------------------------------- budgets: hard stops, 0 overshoot


@pytest.mark.parametrize("max_turns", [0, 1, 5, 17])
def test_a_model_that_never_stops_halts_exactly_at_the_turn_budget(max_turns):
    model, budget = forever(), Budget(max_turns=max_turns, max_calls=1000)
    result = g.run_guarded("Count.", model, [calculate], budget=budget)
    assert (
        result.status == "turn_limit"
        and result.turns == max_turns == model.position == result.budget.spent.turns
    )


@pytest.mark.parametrize("max_calls", [0, 1, 7, 12])
def test_a_model_that_never_stops_halts_exactly_at_the_call_budget(max_calls):
    echo, ran = recorder()
    pairs = ScriptedModel(
        [lambda m, t: turn(call("echo", text=f"{len(m)}a"), call("echo", text=f"{len(m)}b"))] * 50
    )
    result = g.run_guarded(
        "Echo.", pairs, [echo], budget=Budget(max_turns=1000, max_calls=max_calls)
    )
    assert result.status == "tool_limit" and len(ran) == max_calls == result.tool_calls
    check_pairing(result.messages)  # the call over budget is answered "not_run"
    assert result.unfinished[0].startswith("not run: echo(")


@pytest.mark.parametrize("max_tokens", range(300, 6000, 457))
def test_a_model_that_never_stops_halts_exactly_at_the_token_budget(max_tokens):
    model, budget = (
        forever(),
        Budget(max_turns=10_000, max_calls=10_000, max_tokens=max_tokens, max_output_tokens=40),
    )
    result = g.run_guarded("Count.", model, [calculate], budget=budget)
    assert result.status == "budget_exhausted" and "token budget" in result.next_step
    assert (
        result.budget.spent.tokens == model.usage.total_tokens == result.usage.total_tokens
    )  # the meter is the truth
    assert result.budget.spent.tokens <= max_tokens  # 0 overshoot
    counted, need = result.budget.forecast(result.messages)
    assert (
        result.budget.spent.tokens + need + budget.max_output_tokens > max_tokens
    )  # not one call early
    if result.turns:  # after the first reply's usage the forecast is the scripted count
        assert need == counted == tokens.count(result.messages) and result.budget.spent.scale == 1.0


@pytest.mark.parametrize(
    "model, source",
    [
        ("gpt-5-mini", "counted"),
        ("gpt-4o", "counted"),
        ("o3-mini", "counted"),
        ("llama3.2", "estimated"),
    ],
)
@pytest.mark.parametrize("max_tokens", [400, 1_333, 4_000])
def test_the_budget_holds_with_a_known_and_an_unknown_tokenizer(model, source, max_tokens):
    """A budget for `model` counts as that model's tokenizer does (or estimates); a scripted model
    standing in for it counts the same way, so the overshoot is 0 either way, and the meter says
    which count it was."""
    scripted = ScriptedModel([keep_going] * 5000, count_as=model)
    budget = Budget(
        max_turns=10_000, max_calls=10_000, max_tokens=max_tokens, max_output_tokens=40, model=model
    )
    result = g.run_guarded("Count.", scripted, [calculate], budget=budget)
    assert result.status == "budget_exhausted" and result.budget.spent.tokens <= max_tokens
    assert (
        result.budget.spent.tokens == scripted.usage.total_tokens
        and result.budget.spent.source == source
    )
    assert result.usage.source == source and f"tokens {SOURCES[source]}" in result.budget.meter()
    assert result.budget.forecast(result.messages)[0] == tokens.count(result.messages, model)


def test_exact_counts_differ_from_the_estimate_so_the_two_budgets_are_not_the_same():
    """The case above could pass with one counter for both; on the same run they disagree."""
    runs = {}
    for model in ("gpt-5-mini", "llama3.2"):
        budget = Budget(max_turns=6, max_calls=100, model=model)
        result = g.run_guarded(
            "Count.", ScriptedModel([keep_going] * 10, count_as=model), [calculate], budget=budget
        )
        runs[model] = result.budget.spent.tokens
    assert runs["gpt-5-mini"] != runs["llama3.2"]


def test_tokens_charged_by_a_sub_agent_count_against_the_limits():
    limits = Budget(max_turns=3, max_calls=100)
    child = g.run_guarded("Count.", ScriptedModel([keep_going] * 3), [calculate], budget=limits)
    sub = child.budget.spent  # what the sub-agent spent

    def charge_once(meter):  # what a sub-agent spent for this run, charged during it
        if meter.spent.turns == 1:
            meter.charge(sub)

    budget = Budget(
        max_turns=100, max_calls=100, max_tokens=1_000, max_output_tokens=40, on_turn=charge_once
    )
    result = g.run_guarded("Count.", forever(), [calculate], budget=budget)
    assert result.status == "budget_exhausted" and result.budget.spent.delegated == sub.tokens > 0
    assert result.budget.spent.tokens == sub.tokens + result.usage.total_tokens <= 1_000


@pytest.mark.parametrize("max_cost", [0.0002, 0.0005, 0.00123, 0.004])
def test_a_model_that_never_stops_halts_exactly_at_the_cost_budget(max_cost):
    model = forever()
    budget = Budget(
        max_turns=10_000, max_calls=10_000, max_cost=max_cost, max_output_tokens=40, model="gpt-5"
    )
    result = g.run_guarded("Count.", model, [calculate], budget=budget)
    assert result.status == "budget_exhausted" and "cost budget" in result.next_step
    spent = estimated_cost("gpt-5", model.usage.input_tokens, model.usage.output_tokens)
    assert result.budget.spent.cost == spent <= Fraction(str(max_cost))  # exact, 0 overshoot
    next_call = estimated_cost(
        "gpt-5", tokens.count(result.messages, "gpt-5"), result.budget.max_output_tokens
    )
    assert spent + next_call > Fraction(str(max_cost))


@pytest.mark.parametrize("model, source", [("gpt-5-mini", "counted"), ("llama3.2", "estimated")])
def test_oversized_input_is_rejected_before_any_model_call(model, source):
    scripted = ScriptedModel([say("never")], count_as=model)
    budget = Budget(max_input_tokens=8_000, model=model)
    result = g.run_guarded("word " * 40_000, scripted, [], budget=budget)
    assert result.status == "budget_exhausted" and scripted.seen == [] and result.turns == 0
    assert "input too large" in result.next_step and "shorten" in result.next_step
    assert f" tokens ({source}; " in result.next_step  # says how it was counted, once


def test_a_large_tool_result_stops_the_run_before_the_next_call_not_after():
    @tool
    def dump() -> str:
        """Return a lot of text."""
        return "7 " * 1_950  # about 3,900 tokens

    model = ScriptedModel([call("dump"), say("never")])
    result = g.run_guarded("Dump.", model, [dump], budget=Budget(max_input_tokens=900))
    assert (
        result.status == "budget_exhausted"
        and len(model.seen) == 1
        and "input too large" in result.next_step
    )


class Reporting:
    """A model whose server reports `factor` times the input labkit counts, or no usage at all."""

    def __init__(self, factor):
        self.factor, self.calls = factor, 0

    def respond(self, messages, tools=()):
        self.calls += 1
        usage = (
            None if self.factor is None else Usage(int(tokens.count(messages) * self.factor), 10)
        )
        return Reply(
            "",
            [
                ToolCall(
                    f"call_{self.calls}", "calculate", json.dumps({"expression": f"{self.calls}"})
                )
            ],
            usage,
        )


def test_the_estimate_is_scaled_up_when_a_server_counts_more_and_the_budget_still_holds():
    budget = Budget(max_turns=100, max_calls=100, max_tokens=3_000, max_output_tokens=10)
    result = g.run_guarded("Count.", Reporting(2.0), [calculate], budget=budget)
    assert result.status == "budget_exhausted" and result.budget.spent.scale >= 1.9
    assert result.budget.spent.source == "reported"
    assert (
        result.budget.spent.tokens
        == result.usage.input_tokens + result.usage.output_tokens
        <= 3_000
    )


class Overcounting:
    """A server that counts `first` times what labkit counts (messages + tool schemas) on its first
    call, then `later` times, reporting the usage like a server does."""

    def __init__(self, first, later=1.0):
        self.first, self.later, self.calls = first, later, 0

    def respond(self, messages, tools=()):
        self.calls += 1
        counted = tokens.count(messages) + schema_tokens(tools)
        factor = self.first if self.calls == 1 else self.later
        return Reply(
            "",
            [
                ToolCall(
                    f"call_{self.calls}", "calculate", json.dumps({"expression": f"{self.calls}"})
                )
            ],
            Usage(math.ceil(counted * factor), 10),
        )


def test_the_first_call_counts_the_tool_schemas_and_is_cautious():
    """A server that counts 1.5x (messages + schemas): the budget holds at every size, first call
    included."""
    for max_tokens in range(150, 2_500, 23):
        budget = Budget(max_turns=100, max_calls=100, max_tokens=max_tokens, max_output_tokens=10)
        result = g.run_guarded("Count.", Overcounting(1.5, 1.5), [calculate], budget=budget)
        spent = result.budget.spent
        assert result.status == "budget_exhausted" and spent.tokens <= max_tokens, max_tokens


def test_the_scale_keeps_the_largest_ratio_seen_and_bounds_the_overshoot():
    """A server that counts 3x on its first call, then 1x: only the first call can overshoot (by its
    estimate's error past the cautious 1.5); every later call is estimated with the largest ratio
    seen."""
    for max_tokens in range(150, 2_500, 23):
        budget = Budget(max_turns=100, max_calls=100, max_tokens=max_tokens, max_output_tokens=10)
        model = Overcounting(3.0, 1.0)
        result = g.run_guarded("Count.", model, [calculate], budget=budget)
        if result.turns:
            assert result.budget.spent.scale >= 3.0  # not lowered by the later, smaller counts
        if result.budget.spent.tokens > max_tokens:  # only ever the first call
            assert result.turns == 1, max_tokens
    schemas = schema_tokens([calculate])
    assert schemas > 20 and Budget().spent.scale == 1.5


@pytest.mark.parametrize(
    "model, source",
    [("gpt-5-mini", "counted"), ("gpt-4.1-nano", "counted"), ("llama3.2", "estimated")],
)
def test_unreported_usage_is_counted_by_labkit_and_marked_so(model, source):
    budget = Budget(max_turns=3, max_calls=100, model=model)
    result = g.run_guarded("Count.", Reporting(None), [calculate], budget=budget)
    spent = result.budget.spent
    assert result.usage.total_tokens == 0 and spent.tokens > 0 and spent.source == source
    assert f"tokens {SOURCES[source]}" in result.budget.meter()
    assert SOURCES["reported"] not in result.budget.meter()  # labkit's count is never a server's


def test_the_meter_is_watchable_and_deterministic():
    lines = []
    budget = Budget(max_turns=3, max_calls=5, max_tokens=5_000, max_cost=0.01, watch=lines.append)
    result = g.run_guarded("Count.", forever(), [calculate], budget=budget)
    assert [line.split(":")[0] for line in lines] == ["turn 1", "turn 2", "turn 3"]
    assert (
        lines[-1].endswith("tool calls 2/5") and "/5,000" in lines[-1] and "/$0.010000" in lines[-1]
    )
    assert result.budget.spent.calls == 3  # the third call ran after the third turn's line
    meter = result.budget.meter()
    assert "ESTIMATE" in meter and PRICES_AS_OF in meter and "gpt-5-mini" in meter and "[" in meter


class Uncapped:
    """A model that ignores any output cap (a server that does not honour max_output_tokens)."""

    def respond(self, messages, tools=()):
        return Reply("word " * 400, [], Usage(tokens.count(messages), 500))


def test_a_reply_longer_than_its_reservation_is_reported_not_hidden():
    result = g.run_guarded("Talk.", Uncapped(), [], budget=Budget(max_output_tokens=50))
    assert any("more than the 50 reserved" in line for line in result.trace.lines())


@pytest.mark.parametrize(
    "max_tokens, max_output_tokens", [(300, 5), (300, 100), (450, 1), (1_000, 300), (5_000, 2_000)]
)
def test_a_model_that_says_too_much_is_cut_at_its_reservation_with_0_overshoot(
    max_tokens, max_output_tokens
):
    model = ScriptedModel([say("word " * 4_000)])
    budget = Budget(max_tokens=max_tokens, max_output_tokens=max_output_tokens)
    result = g.run_guarded("Talk.", model, [], budget=budget)
    assert result.status == "model_incomplete" and result.turns == 1
    assert (
        model.usage.output_tokens == max_output_tokens
        and result.budget.spent.tokens == model.usage.total_tokens <= max_tokens
    )
    assert "more than" not in result.trace.text()


def test_a_never_stopping_talkative_model_halts_within_the_token_budget():
    talk = lambda m, t: turn(  # noqa: E731
        say("Let me think about this at length. " * 3), call("calculate", expression=f"{len(m)}*2")
    )
    for max_tokens in range(400, 4_000, 211):
        model, budget = (
            ScriptedModel([talk] * 100),
            Budget(max_turns=100, max_calls=100, max_tokens=max_tokens, max_output_tokens=20),
        )
        result = g.run_guarded("Count.", model, [calculate], budget=budget)
        assert result.status in ("budget_exhausted", "model_incomplete")
        assert result.budget.spent.tokens == model.usage.total_tokens <= max_tokens, max_tokens


def test_run_guarded_never_writes_the_callers_model_even_during_the_run():
    model = ScriptedModel()
    seen = []  # the model's own cap, read while run_guarded is running
    model.steps = [
        lambda messages, tools: seen.append(model.max_output_tokens) or say("word " * 400)
    ]
    result = g.run_guarded("Talk.", model, [], budget=Budget(max_output_tokens=50))
    assert result.status == "model_incomplete" and result.usage.output_tokens == 50
    assert seen == [None] and model.max_output_tokens is None
    model = ScriptedModel([say("hi")])
    model.max_output_tokens = 20  # already below the reservation: kept, and kept after
    g.run_guarded("Talk.", model, [], budget=Budget(max_output_tokens=50))
    assert model.max_output_tokens == 20


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: Budget(max_cost=0.01, model="llama3"), "no price"),
        (lambda: Budget(max_turns=-1), "max_turns"),
        (lambda: Budget(max_calls=2.5), "max_calls"),
        (lambda: Budget(max_calls=True), "max_calls"),
        (lambda: Budget(max_output_tokens=0), "max_output_tokens"),
        (lambda: Budget(max_output_tokens=None), "max_output_tokens"),
        (lambda: Budget(max_tokens=-1), "max_tokens"),
        (lambda: Budget(max_tokens="2000"), "max_tokens"),
        (lambda: Budget(max_tokens=1e3), "max_tokens"),
        (lambda: Budget(max_cost=-0.01), "max_cost"),
        (lambda: Budget(max_cost="0.01"), "max_cost"),
        (lambda: Budget(max_cost=float("nan")), "max_cost"),
        (lambda: Budget(max_cost=float("inf")), "max_cost"),
        (lambda: Budget(max_input_tokens=-5), "max_input_tokens"),
        (lambda: Budget(max_input_tokens=None), "max_input_tokens"),
    ],
)
def test_budget_mistakes_are_the_callers(make, needle):
    with pytest.raises(UserError, match=needle):
        make()


def test_budget_accepts_its_documented_types():
    budget = Budget(
        max_turns=0, max_calls=0, max_tokens=0, max_cost=0, max_input_tokens=0, max_output_tokens=1
    )
    assert budget.max_cost == 0 and Budget(max_cost=0.5, max_tokens=None).max_cost == 0.5


def test_a_budget_meters_one_run_only():
    meter = g.run_guarded("x", ScriptedModel([say("y")]), [], budget=Budget()).budget
    with pytest.raises(UserError, match="new Budget"):
        loop.run("x", ScriptedModel([say("y")]), [], guard=meter)


def test_run_guarded_never_changes_the_callers_budget():
    """The run meters a fresh copy, returned as result.budget; the caller's Budget stays as made."""
    turns = []
    budget = Budget(max_turns=3, max_calls=5, max_tokens=5_000, max_cost=0.01, on_turn=turns.append)
    made = {f.name: getattr(budget, f.name) for f in fields(budget)}
    live = forever()
    live.model = "gpt-4.1"  # a NamedModel, priced as itself: the copy's model changes, not ours
    result = g.run_guarded("Count.", live, [calculate], budget=budget)
    assert result.budget.model == "gpt-4.1" and budget.model == "gpt-5-mini"
    assert {f.name: getattr(budget, f.name) for f in fields(budget)} == made
    assert budget.run is None and budget.spent.tokens == 0 and budget.spent.tool_tokens == 0
    assert result.budget is not budget and result.budget.spent.tokens > 0 and result.budget.run
    assert turns and all(t is result.budget for t in turns)  # on_turn gets the run's own meter
    again = g.run_guarded("Count.", forever(), [calculate], budget=budget)  # reusable: a new meter
    assert again.budget.spent.tokens == result.budget.spent.tokens


def test_estimated_cost_uses_the_price_table():
    assert estimated_cost("gpt-5-mini", 1_000_000, 0) == Fraction(1, 4)
    assert estimated_cost("gpt-5-mini", 0, 1_000_000) == 2
    assert estimated_cost("my-local-model", 10, 10) is None


def test_run_guarded_caps_a_live_models_output_at_the_budgets_reservation():
    from labkit.live import ResponsesModel

    from fake_server import FakeServer

    with FakeServer() as server:
        model = ResponsesModel(
            "gpt-5-mini", base_url=server.url, api_key=None, key_name="LABKIT_API_KEY"
        )
        result = g.run_guarded("Say hi.", model, [], budget=Budget(max_output_tokens=100))
        assert result.status == "completed"
        assert (
            server.requests[0]["body"]["max_output_tokens"] == 100
            and model.max_output_tokens is None
        )
