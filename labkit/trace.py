"""Run traces: one event per model turn, tool call, guardrail decision and stop.

Written with the foundation (01_setup); taught and used from 04_loop on. A trace renders two
ways: plain deterministic text lines (what nbval compares: no clock times unless asked) and, for
people, an HTML table or an ipywidgets stepper that falls back to the text lines where no kernel
runs. The clock is passed in, so tests can use a fake one.

Deliberately left out: OpenTelemetry export, spans and nesting, persistence (see 07_runtime).
"""

import html
import json
import time
from dataclasses import dataclass, field


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


def clip(text, limit: int = 80) -> str:
    """One line of at most `limit` characters. Example: clip("a\\nb")  ->  "a b" """
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_call(call) -> str:
    """get_weather({"city": "Paris"}) — the call as the model wrote it."""
    return f"{call.name}({clip(call.arguments, 60)})"


class Trace:
    """An ordered list of events with renderers. Example: trace.model(1, reply); print(trace)"""

    def __init__(self, clock=time.perf_counter):
        self.events = []
        self.clock = clock

    def add(
        self,
        kind: str,
        turn: int,
        summary: str,
        tokens: int | None = None,
        elapsed: float = 0.0,
        **detail,
    ) -> Event:
        event = Event(kind, turn, clip(summary, 100), detail, tokens, elapsed)
        self.events.append(event)
        return event

    def model(self, turn: int, reply, elapsed: float = 0.0) -> Event:
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
        )

    def tool(self, turn: int, call, result, elapsed: float = 0.0) -> Event:
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
        """A widget stepping through the events with their details; text where no widget can run.

        Example: trace.stepper()   # in JupyterLab: a slider, "event 1 of 8", the event's details
        """
        import ipywidgets as widgets

        total = len(self.events)
        slider = widgets.IntSlider(min=1, max=max(1, total), readout=False)
        label, view = widgets.Label(), widgets.HTML()

        def show(change=None):
            if not self.events:
                label.value, view.value = "no events", ""
                return
            e = self.events[slider.value - 1]
            label.value = f"event {slider.value} of {total}"
            detail = html.escape(json.dumps(e.detail, indent=2, ensure_ascii=False, default=str))
            view.value = f"<b>{html.escape(e.line(timing=True))}</b><pre>{detail}</pre>"

        slider.observe(show, names="value")
        show()
        events = f"{total} event" + ("" if total == 1 else "s")
        text = f"stepper: {events}, as text (run the cell in JupyterLab to step through them)\n" + (
            self.text() or "(no events)"
        )
        layout = widgets.VBox([widgets.HBox([slider, label]), view])
        return Stepper(text, slider, label, view, layout)


@dataclass
class Stepper:
    """The stepper widget and its plain-text twin, shown wherever the widget cannot run.

    A notebook opened without a running kernel, or exported to static HTML, has no widget to show;
    it shows `text` (the trace lines) instead of ipywidgets' own "VBox(children=...)".
    """

    text: str
    slider: object  # ipywidgets.IntSlider, 1..number of events
    label: object  # ipywidgets.Label: "event 3 of 8"
    view: object  # ipywidgets.HTML: the event's line and its details
    widget: object  # the VBox that holds them

    def _repr_mimebundle_(self, include=None, exclude=None):
        closed = self.widget.comm is None  # a closed widget has no view left to show
        bundle = {} if closed else dict(self.widget._repr_mimebundle_())
        bundle["text/plain"] = self.text
        return bundle

    def __repr__(self):
        return self.text
