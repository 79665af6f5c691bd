"""Run traces: one event per model turn, tool call, guardrail decision and stop.

Written with the foundation (01_setup); taught and used from 04_loop on. A trace renders two
ways: plain deterministic text lines (what nbval compares: no clock times unless asked) and, for
people, an HTML table or a stepper (each event folded in a `<details>` element: no widget, so
it survives a saved notebook). The clock is passed in, so tests can use a fake one. `to_otel`
turns a trace into OpenTelemetry spans (GenAI semantic conventions) for the tools production uses
to look at runs.
Deliberately left out: live span export while a run goes (production instruments the SDK calls),
metrics, persistence (see 07_runtime).
"""

import html
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .keys import redact
from .messages import Reply, ToolCall

if TYPE_CHECKING:  # opentelemetry is imported only when spans are made
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


@dataclass
class Event:
    kind: str  # "model" | "tool" | "guard" | "note" | "stop"
    turn: int  # the model turn this belongs to (0 = before the first turn)
    summary: str  # one deterministic line
    detail: dict = field(default_factory=dict)  # arguments, result, usage, ... (JSON-able)
    tokens: int | None = None  # tokens this event used, when known
    elapsed: float = 0.0  # seconds, measured with the trace's clock

    def line(self, timing: bool = False) -> str:
        tokens = f"  [{self.tokens} tok]" if self.tokens is not None else ""
        clock = f"  {self.elapsed * 1000:.0f} ms" if timing else ""
        return f"{self.turn:>2} {self.kind:<5} {self.summary}{tokens}{clock}"


def clip(text: object, limit: int = 80, *, words: bool = False, last: bool = False) -> str:
    """One line of at most `limit` characters, "..." marking what was cut.

    words=True cuts between words (a word longer than the limit is still cut); last=True keeps
    the end instead of the start (an error message's last line names the exception).
    Example: clip("a\\nb")  ->  "a b";  clip("one two three", 11, words=True)  ->  "one two..."
    """
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    room = max(0, limit - 3)
    if last:
        kept = text[len(text) - room :]
        if words and " " in kept and not text[len(text) - room - 1].isspace():
            kept = kept.split(" ", 1)[1]  # drop the partial first word
        return "..." + kept
    kept = text[:room]
    if words and " " in kept:
        kept = (kept if text[room].isspace() else kept.rsplit(" ", 1)[0]).rstrip()
    return kept + "..."


def describe_call(call: ToolCall) -> str:
    """get_weather({"city": "Paris"}) — the call as the model wrote it."""
    return f"{call.name}({clip(call.arguments, 60)})"


class Trace:
    """An ordered list of events with renderers. Example: trace.model(1, reply); print(trace)"""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.events: list[Event] = []
        self.clock = clock

    def add(
        self,
        kind: str,
        turn: int,
        summary: str,
        tokens: int | None = None,
        elapsed: float = 0.0,
        **detail: Any,
    ) -> Event:
        event = Event(kind, turn, clip(summary, 100), detail, tokens, elapsed)
        self.events.append(event)
        return event

    def model(self, turn: int, reply: Reply, elapsed: float = 0.0) -> Event:
        """Record a model turn: what it said or which tools it called."""
        said = [describe_call(c) for c in reply.tool_calls]
        if reply.text or not said:
            said.insert(0, f"says {clip(reply.text, 60)!r}")
        if reply.status != "completed":
            said.append(f"[{reply.status}: {reply.incomplete_reason}]")
        tokens = reply.usage.total_tokens if reply.usage else None
        return self.add(
            "model",
            turn,
            "; ".join(said),
            tokens,
            elapsed,
            text=reply.text,
            calls=[c.name for c in reply.tool_calls],
            status=reply.status,
            input_tokens=reply.usage.input_tokens if reply.usage else None,
            output_tokens=reply.usage.output_tokens if reply.usage else None,
        )

    def tool(
        self, turn: int, call: ToolCall, result: dict[str, Any] | str, elapsed: float = 0.0
    ) -> Event:
        """Record a tool call and a summary of its result ({"ok": ...} dict or text)."""
        if isinstance(result, dict) and "ok" in result:
            outcome = (
                f"ok {clip(json.dumps(result.get('data'), ensure_ascii=False), 50)}"
                if result["ok"]
                else f"error {result.get('error')}: {clip(result.get('message', ''), 50)}"
            )
        else:
            outcome = clip(result, 50)
        return self.add(
            "tool",
            turn,
            f"{describe_call(call)} -> {outcome}",
            None,
            elapsed,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            result=result,
        )

    def stop(self, turn: int, reason: str, message: str = "") -> Event:
        return self.add(
            "stop", turn, f"{reason}" + (f": {message}" if message else ""), reason=reason
        )

    def lines(self, timing: bool = False) -> list[str]:
        """Deterministic text, one line per event (timing=True adds milliseconds, for people)."""
        return [e.line(timing) for e in self.events]

    def text(self, timing: bool = False) -> str:
        return "\n".join(self.lines(timing))

    def __repr__(self):
        return self.text() if self.events else "Trace(no events)"

    def _repr_html_(self):
        rows = "".join(
            f"<tr><td>{e.turn}</td><td>{e.kind}</td><td "
            f"style='text-align:left'>{html.escape(e.summary)}</td>"
            f"<td>{'' if e.tokens is None else e.tokens}</td></tr>"
            for e in self.events
        )
        return (
            "<table><thead><tr><th>turn</th><th>kind</th><th>what happened</th><th>tokens</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>"
        )

    def stepper(self) -> "Stepper":
        """Every event folded in a `<details>` element that opens to its details; text elsewhere.

        Plain HTML, no widget: it needs no running kernel, so it survives saving and reopening.
        Example: trace.stepper()   # in JupyterLab: "event 1 of 8: ...", click to open each
        """
        total = len(self.events)
        events = f"{total} event" + ("" if total == 1 else "s")
        text = f"stepper: {events}; in JupyterLab each one opens to its details\n" + (
            self.text() or "(no events)"
        )
        steps = []
        for n, e in enumerate(self.events, 1):
            detail = json.dumps(e.detail, indent=2, ensure_ascii=False, default=str)
            steps.append(
                f"<details><summary>event {n} of {total}: <code>{html.escape(e.line())}</code>"
                f"</summary><pre>{html.escape(detail)}</pre></details>"
            )
        return Stepper(text, f"<div>{''.join(steps) or 'no events'}</div>")


@dataclass
class Stepper:
    """A trace's events as folded HTML steps, with the trace lines for wherever HTML is not shown
    (a terminal, nbval's text comparison). Nothing in it depends on a kernel or a widget."""

    text: str
    html: str

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return self.text


# ---------------------------------------------------------------- OpenTelemetry


class JsonLinesExporter:
    """An OpenTelemetry span exporter writing one JSON object per line to a local file.

    Example: to_otel(trace, exporters=[JsonLinesExporter("spans.jsonl")])
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def export(self, spans: Sequence["ReadableSpan"]) -> "SpanExportResult":
        from opentelemetry.sdk.trace.export import SpanExportResult

        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(json.loads(span.to_json()), ensure_ascii=False) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def to_otel(
    trace: Trace,
    *,
    model: str = "scripted",
    provider: str = "labkit.scripted",
    agent: str = "labkit",
    path: str | Path | None = None,
    console: IO[str] | None = None,
    exporters: Iterable["SpanExporter"] = (),
    secrets: Iterable[object] = (),
    content: bool = False,
    start_ns: int | None = None,
) -> list:
    """The trace as OpenTelemetry spans, named and labelled by the GenAI semantic conventions.

    One invoke_agent span holds a chat span per model turn (gen_ai.request.model, token usage) and
    an execute_tool span per tool call (gen_ai.tool.name; error.type when it failed). Every text
    passes through keys.redact(secrets); arguments, results and words only with content=True.
    Exported to `path` (JSON lines), `console` (a stream) and any `exporters` (e.g. OTLP). The
    trace keeps durations, not start times: spans are laid end to end from start_ns (default now).
    Example: spans = to_otel(result.trace, model="gpt-5-mini", path="spans.jsonl")
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

    def clean(value):  # no key reaches a span, whatever the trace holds
        return redact(value, secrets) if isinstance(value, str) else value

    kept = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": clean(agent)}))
    # JsonLinesExporter is an exporter by its methods, not a subclass: otel loads only here
    sinks: list[Any] = [kept, *exporters]
    sinks += [JsonLinesExporter(path)] if path is not None else []
    sinks += [ConsoleSpanExporter(out=console)] if console is not None else []
    for sink in sinks:
        tracer_provider.add_span_processor(SimpleSpanProcessor(sink))
    tracer = tracer_provider.get_tracer("labkit.trace")
    now = time.time_ns() if start_ns is None else start_ns
    common = {"gen_ai.provider.name": clean(provider), "gen_ai.request.model": clean(model)}
    run = tracer.start_span(
        clean(f"invoke_agent {agent}"),
        kind=SpanKind.INTERNAL,
        start_time=now,
        attributes={**common, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent},
    )
    inside, used = set_span_in_context(run), {"input": 0, "output": 0}
    for event in trace.events:
        took = max(0, round(event.elapsed * 1e9))
        if event.kind in ("model", "tool"):
            name, kind, attributes = _otel_span(event, common, content, used)
            span = tracer.start_span(
                clean(name),
                context=inside,
                kind=kind,
                start_time=now,
                attributes={k: clean(v) for k, v in attributes.items() if v is not None},
            )
            if "error.type" in attributes:
                span.set_status(Status(StatusCode.ERROR, clean(attributes["error.type"])))
            span.end(end_time=now + took)
        else:  # guard decisions, notes and the stop: events on the agent span
            run.add_event(f"labkit.{event.kind}", {"summary": clean(event.summary)}, now)
        now += took
    stop = next((e.detail["reason"] for e in reversed(trace.events) if e.kind == "stop"), None)
    run.set_attributes(
        {
            "gen_ai.usage.input_tokens": used["input"],
            "gen_ai.usage.output_tokens": used["output"],
            **({"labkit.stop_reason": clean(stop)} if stop else {}),
        }
    )
    run.end(end_time=now)
    tracer_provider.shutdown()  # flushes every exporter
    return list(kept.get_finished_spans())


def _otel_span(event, common, content, used):
    """(name, kind, attributes) of the span for one model or tool event."""
    from opentelemetry.trace import SpanKind

    d = event.detail
    if event.kind == "model":
        used["input"] += d.get("input_tokens") or 0
        used["output"] += d.get("output_tokens") or 0
        attributes = {
            **common,
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": d.get("input_tokens"),
            "gen_ai.usage.output_tokens": d.get("output_tokens"),
            "gen_ai.response.finish_reasons": ["tool_calls" if d.get("calls") else "stop"]
            if d.get("status") == "completed"
            else [str(d.get("status"))],
            "labkit.turn": event.turn,
        }
        if content:
            said = [{"type": "text", "content": d["text"]}] if d.get("text") else []
            said += [{"type": "tool_call", "name": name} for name in d.get("calls", [])]
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": said}], ensure_ascii=False
            )
        return f"chat {common['gen_ai.request.model']}", SpanKind.CLIENT, attributes
    result = d.get("result")
    failed = isinstance(result, dict) and result.get("ok") is False
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": d.get("name"),
        "gen_ai.tool.call.id": d.get("call_id"),
        "gen_ai.tool.type": "function",
        "error.type": result.get("error") if failed else None,
        "labkit.turn": event.turn,
    }
    if content:
        attributes["gen_ai.tool.call.arguments"] = str(d.get("arguments"))
        attributes["gen_ai.tool.call.result"] = json.dumps(result, ensure_ascii=False, default=str)
    return f"execute_tool {d.get('name')}", SpanKind.INTERNAL, attributes
