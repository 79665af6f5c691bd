"""The loop's own overhead per turn, with models that answer instantly.

run() is timed end to end with (a) a bare model that returns prepared replies and records nothing
and (b) the ScriptedModel of the lessons (which deep-copies every history it is shown, so its cost
grows with the history). Each turn calls one small tool, so a turn includes parse, validate,
execute, the trace and the history. A live model turn takes hundreds of milliseconds or more: the
model, not the loop, is the cost.
"""

import time

from labkit.loop import run
from labkit.models import Reply, ScriptedModel, ToolCall, Usage, call, say
from labkit.tools import tool


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


class Instant:
    """A model that answers instantly with prepared replies: what is left is the loop's own cost."""

    def __init__(self, turns):
        self.replies = [
            Reply("", [ToolCall(f"call_{i}", "echo", '{"text": "hi"}')], Usage(50, 10, 60))
            for i in range(turns - 1)
        ] + [Reply("done", [], Usage(50, 2, 52))]
        self.position = 0

    def respond(self, messages, tools=()):
        self.position += 1
        return self.replies[self.position - 1]


def per_turn_us(make_model, turns, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        model = make_model(turns)
        started = time.perf_counter()
        result = run("bench", model, [echo], max_turns=turns, max_calls=turns)
        best = min(best, time.perf_counter() - started)
        assert result.status == "completed" and result.turns == turns
    return best / turns * 1e6


def scripted(turns):
    return ScriptedModel([call("echo", text="hi")] * (turns - 1) + [say("done")])


def main():
    print(
        f"{'turns per run':>13} {'instant model':>14} {'ScriptedModel':>14}   (µs per turn, best "
        "of 7)"
    )
    for turns in (6, 50):
        bare, lesson = per_turn_us(Instant, turns), per_turn_us(scripted, turns)
        print(f"{turns:>13} {bare:>14.0f} {lesson:>14.0f}")
    print(
        "The loop's own cost is tens of microseconds per turn. A live model turn usually takes "
        "hundreds "
        "of milliseconds or more (not measured here: time yours in 01_setup), so the model is the "
        "cost."
    )


if __name__ == "__main__":
    main()
