"""The loop's own overhead per turn, with models that answer instantly.

run() is timed end to end with (a) a bare model that returns prepared replies and records nothing
and (b) the ScriptedModel of the lessons (which deep-copies every history it is shown, so its cost
grows with the history). Each turn calls one small tool, so a turn includes parse, validate,
execute, the trace and the history. A live model turn takes hundreds of milliseconds or more: the
model, not the loop, is the cost. Also: trace.to_otel's cost per turn, turning the finished trace
into OpenTelemetry spans kept in memory and into a JSON-lines file, beside the loop's own cost.
"""

import tempfile
import time
from pathlib import Path

from labkit.loop import run
from labkit.models import Reply, ScriptedModel, ToolCall, Usage, call, say
from labkit.tools import tool
from labkit.trace import to_otel


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


def otel_us(turns, repeat=7):
    """(in memory, to a JSON-lines file): best µs per turn of to_otel on a run of `turns` turns."""
    trace = run("bench", Instant(turns), [echo], max_turns=turns, max_calls=turns).trace
    best = [float("inf"), float("inf")]
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeat):
            for n, path in enumerate((None, Path(folder) / "spans.jsonl")):
                started = time.perf_counter()
                to_otel(trace, path=path)
                best[n] = min(best[n], time.perf_counter() - started)
    return [b / turns * 1e6 for b in best]


def scripted(turns):
    return ScriptedModel([call("echo", text="hi")] * (turns - 1) + [say("done")])


def main():
    print(
        f"{'turns per run':>13} {'instant model':>14} {'ScriptedModel':>14} {'to_otel':>8} "
        f"{'+ JSONL':>8} {'to_otel/loop':>13}   (µs per turn, best of 7)"
    )
    for turns in (6, 50):
        bare, lesson = per_turn_us(Instant, turns), per_turn_us(scripted, turns)
        spans, jsonl = otel_us(turns)
        print(
            f"{turns:>13} {bare:>14.0f} {lesson:>14.0f} {spans:>8.0f} {jsonl:>8.0f} "
            f"{spans / bare:>12.1f}x"
        )
    print(
        "The loop's own cost is tens of microseconds per turn. A live model turn usually takes "
        "hundreds "
        "of milliseconds or more (not measured here: time yours in 01_setup), so the model is the "
        "cost."
    )


if __name__ == "__main__":
    main()
