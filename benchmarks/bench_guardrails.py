"""What the guardrails cost, side by side with what a user would do instead, as ratios in one run.

1. Per turn: labkit.loop.run without a guard vs guardrails.run_guarded (budget, malformed, repeats,
   secrets, permissions, untrusted labels, detector) on a model that answers instantly, so what is
   left is the loop's and the guards' own cost.
2. The keyword injection detector vs a learned detector's floor: embedding the same texts with
   all-MiniLM-L6-v2 (sentence-transformers, CPU). A classifier would add its own head on top, so
   the embedding time is the least a learned detector costs. Skipped if the model cannot load.
Timings are for this machine at this moment: compare the ratios, not the absolute numbers.
"""

import time

from labkit import guardrails as g
from labkit.budget import Budget
from labkit.injection import detect_injection
from labkit.labs import load_injections
from labkit.loop import run
from labkit.models import Reply, ToolCall, Usage
from labkit.tools import tool


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


class Instant:
    """Prepared replies, a new argument each turn (so the repeat guard lets them through)."""

    def __init__(self, turns):
        self.replies = [
            Reply("", [ToolCall(f"call_{i}", "echo", f'{{"text": "hi {i}"}}')], Usage(50, 10, 60))
            for i in range(turns - 1)
        ] + [Reply("done", [], Usage(50, 2, 52))]
        self.position = 0

    def respond(self, messages, tools=()):
        self.position += 1
        return self.replies[self.position - 1]


def best(work, repeat=7):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def per_turn_us(turns, guarded):
    def once():
        model = Instant(turns)
        if guarded:
            budget = Budget(
                max_turns=turns,
                max_calls=turns,
                max_tokens=10**9,
                max_cost=1000.0,
                max_input_tokens=10**9,
            )
            result = g.run_guarded(
                "bench", model, [echo], budget=budget, secrets=["canary-bench-0001"]
            )
        else:
            result = run("bench", model, [echo], max_turns=turns, max_calls=turns)
        assert result.status == "completed" and result.turns == turns, result.status

    return best(once) / turns * 1e6


def detector_rates(texts):
    chars = sum(map(len, texts))
    keyword = best(lambda: [detect_injection(t) for t in texts])
    rates = {"keyword rules": (len(texts) / keyword, chars / keyword)}
    try:
        from labkit.embed import MiniLM

        model = MiniLM()
        model.embed(texts[:4])  # warm up
        dense = best(lambda: model.embed(texts), repeat=3)
        rates["MiniLM embeddings"] = (len(texts) / dense, chars / dense)
    except Exception as exc:  # a missing model must not break the other figures
        print(f"MiniLM skipped: {type(exc).__name__}: {str(exc)[:80]}")
    return rates


def main():
    print(
        f"{'turns per run':>13} {'plain loop':>11} {'guarded':>9} {'ratio':>6}   (µs per turn, "
        "best of 7)"
    )
    extra = []
    for turns in (6, 50):
        plain, guarded = per_turn_us(turns, False), per_turn_us(turns, True)
        extra.append(guarded - plain)
        print(f"{turns:>13} {plain:>11.0f} {guarded:>9.0f} {guarded / plain:>5.1f}x")
    sets = load_injections()
    texts = [a["text"] for a in sets["attacks"]] + [b["text"] for b in sets["benign"]]
    rates = detector_rates(texts)
    print(
        f"\n{'detector':<18} {'texts/s':>10} {'chars/s':>12}   ({len(texts)} texts of the labelled "
        "set)"
    )
    for name, (per_text, per_char) in rates.items():
        print(f"{name:<18} {per_text:>10,.0f} {per_char:>12,.0f}")
    if len(rates) == 2:
        ratio = rates["keyword rules"][0] / rates["MiniLM embeddings"][0]
        print(
            f"the keyword rules are {ratio:,.0f}x faster than embedding alone; neither replaces "
            "the "
            "permission layer, which needs no model at all"
        )
    print(
        f"A guarded turn costs {min(extra) / 1000:.2f}-{max(extra) / 1000:.2f} ms more than a "
        "plain one (the "
        "input estimate grows with the history); a live model turn takes hundreds of milliseconds "
        "or more."
    )


if __name__ == "__main__":
    main()
