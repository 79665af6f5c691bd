"""Traces render deterministically for nbval, and richly for people."""

import io
import json
from html.parser import HTMLParser

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from labkit import Reply, ToolCall, Trace, Usage
from labkit.trace import clip, to_otel


def sample(clock_values=(0.0,)):
    trace = Trace()
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    trace.model(1, Reply("", [call], Usage(10, 5, 15)), elapsed=0.0123)
    trace.tool(1, call, {"ok": True, "data": {"temp_c": 18}}, elapsed=0.002)
    trace.tool(
        1, call, {"ok": False, "error": "invalid_arguments", "message": "city must be a string"}
    )
    trace.model(2, Reply("It is <b>18</b> °C", [], None))
    trace.stop(2, "completed")
    return trace


def test_text_lines_are_deterministic_and_have_no_timing():
    assert sample().lines() == [
        ' 1 model get_weather({"city": "Paris"})  [15 tok]',
        ' 1 tool  get_weather({"city": "Paris"}) -> ok {"temp_c": 18}',
        ' 1 tool  get_weather({"city": "Paris"}) -> error invalid_arguments: city must be a string',
        " 2 model says 'It is <b>18</b> °C'",
        " 2 stop  completed",
    ]
    assert sample().text() == repr(sample())


def test_timing_only_when_asked():
    assert sample().lines(timing=True)[0].endswith("12 ms")


def test_html_escapes_what_the_model_said():
    html = sample()._repr_html_()
    assert "&lt;b&gt;18&lt;/b&gt;" in html and "<b>18</b>" not in html


def test_long_and_multiline_text_is_clipped_to_one_line():
    trace = Trace()
    trace.model(1, Reply("line one\nline two " + "x" * 200))
    (line,) = trace.lines()
    assert "\n" not in line and line.endswith("...'") and len(line) < 120


@pytest.mark.parametrize(
    "text, limit, options, clipped",
    [
        ("one two three", 11, {}, "one two ..."),  # one line, cut anywhere: traces
        ("one two three", 11, {"words": True}, "one two..."),
        ("one two three", 13, {"words": True}, "one two three"),  # fits: unchanged
        ("one two three", 10, {"words": True}, "one two..."),  # the space falls on the cut
        ("x" * 20, 10, {"words": True}, "xxxxxxx..."),  # one long word is still cut
        ("File x\nZeroDivisionError: division by zero", 30, {"last": True},
         "...sionError: division by zero"),
        ("File x\nZeroDivisionError: division by zero", 38, {"last": True, "words": True},
         "...ZeroDivisionError: division by zero"),
        ("File x\nZeroDivisionError: division by zero", 30, {"last": True, "words": True},
         "...division by zero"),
    ],
)  # fmt: skip
def test_clip_marks_the_cut_and_can_keep_whole_words_or_the_end(text, limit, options, clipped):
    assert clip(text, limit, **options) == clipped
    assert len(clipped) <= limit


def test_incomplete_reply_is_marked():
    trace = Trace()
    trace.model(3, Reply("The answ", status="incomplete", incomplete_reason="max_output_tokens"))
    assert trace.lines() == [" 3 model says 'The answ'; [incomplete: max_output_tokens]"]


class Steps(HTMLParser):
    """What a browser shows of a stepper: [(summary text, text inside the fold), ...]."""

    def __init__(self, page):
        super().__init__()
        self.steps, self.open, self.at = [], 0, None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "details":
            self.open += 1
            self.steps.append(["", ""])
        self.at = "summary" if tag == "summary" else self.at

    def handle_endtag(self, tag):
        self.at = "body" if tag == "summary" else self.at
        self.open -= tag == "details"

    def handle_data(self, data):
        if self.open:
            self.steps[-1][0 if self.at == "summary" else 1] += data


def test_stepper_folds_each_event_with_its_details_in_plain_html():
    steps = Steps(sample().stepper()._repr_html_()).steps
    assert [summary.split(":")[0] for summary, _ in steps] == [
        f"event {n} of 5" for n in range(1, 6)
    ]
    assert [summary.split(": ", 1)[1] for summary, _ in steps] == sample().lines()
    assert json.loads(steps[1][1])["arguments"] == '{"city": "Paris"}'  # the full call, unclipped
    assert json.loads(steps[4][1]) == {"reason": "completed"}


def test_stepper_html_escapes_what_the_model_said():
    trace = Trace()
    trace.model(1, Reply("<script>alert(1)</script> & <b>"))
    page = trace.stepper()._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert Steps(page).steps[0][1].count("<script>") == 1  # shown as text, not run


def test_stepper_has_no_widget_and_its_text_is_the_trace():
    stepper = sample().stepper()
    assert not hasattr(stepper, "_repr_mimebundle_")  # html and text only: nothing to lose on save
    assert repr(stepper) == (
        "stepper: 5 events; in JupyterLab each one opens to its details\n" + sample().text()
    )
    assert repr(Trace().stepper()).endswith("(no events)")
    assert Trace().stepper()._repr_html_() == "<div>no events</div>"


# ---------------------------------------------------------------- OpenTelemetry spans

KEY = "sk-planted-span-key-0123456789abcdef"  # key-like: redact() knows the shape
PASSWORD = "hunter2-correct-horse"  # not key-like: only secrets=[...] can know it


def leaky():
    """A run whose arguments, results, words and guard note all carry both secrets."""
    trace = Trace()
    call = ToolCall("call_1", "get_weather", f'{{"city": "Paris {KEY} {PASSWORD}"}}')
    trace.model(1, Reply(f"Using {KEY}", [call], Usage(10, 5, 15)), elapsed=0.25)
    trace.tool(1, call, {"ok": True, "data": {"echo": f"{KEY} {PASSWORD}"}}, elapsed=0.5)
    failed = {"ok": False, "error": "invalid_arguments", "message": f"bad {PASSWORD}"}
    trace.tool(1, call, failed, elapsed=0.125)
    trace.add("guard", 1, f"blocked a call carrying {PASSWORD}")
    trace.model(2, Reply(f"It is 18 °C, {PASSWORD}", [], Usage(20, 4, 24)), elapsed=0.25)
    trace.stop(2, "completed")
    return trace


def attributes(span):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in span.attributes.items()}


def test_spans_follow_the_genai_semantic_conventions():
    spans = to_otel(leaky(), model="gpt-5-mini", provider="openai", start_ns=10**18)
    assert [(s.name, s.kind) for s in spans] == [
        ("chat gpt-5-mini", SpanKind.CLIENT),
        ("execute_tool get_weather", SpanKind.INTERNAL),
        ("execute_tool get_weather", SpanKind.INTERNAL),
        ("chat gpt-5-mini", SpanKind.CLIENT),
        ("invoke_agent labkit", SpanKind.INTERNAL),
    ]
    *children, agent = spans
    assert agent.parent is None
    assert {s.parent.span_id for s in children} == {agent.context.span_id}
    assert attributes(children[0]) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5-mini",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "labkit.turn": 1,
    }
    assert attributes(children[2]) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "error.type": "invalid_arguments",
        "labkit.turn": 1,
    }
    assert children[2].status.status_code == StatusCode.ERROR
    assert attributes(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "labkit",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5-mini",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 9,
        "labkit.stop_reason": "completed",
    }
    assert [e.name for e in agent.events] == ["labkit.guard", "labkit.stop"]


def test_spans_are_laid_end_to_end_from_the_durations_the_trace_kept():
    spans = to_otel(leaky(), start_ns=0)
    assert [(s.start_time, s.end_time) for s in spans] == [
        (0, 250_000_000),
        (250_000_000, 750_000_000),
        (750_000_000, 875_000_000),
        (875_000_000, 1_125_000_000),
        (0, 1_125_000_000),
    ]


@pytest.mark.parametrize("content", [False, True], ids=["default", "content=True"])
def test_no_secret_reaches_a_span_the_file_or_the_console(tmp_path, content):
    console = io.StringIO()
    spans = to_otel(
        leaky(),
        path=tmp_path / "spans.jsonl",
        console=console,
        secrets=[PASSWORD],
        content=content,
    )
    lines = (tmp_path / "spans.jsonl").read_text(encoding="utf-8").splitlines()
    exported = [json.loads(line) for line in lines]
    assert [s["name"] for s in exported] == [s.name for s in spans]
    everything = "\n".join([*lines, console.getvalue(), *(s.to_json() for s in spans)])
    assert KEY not in everything and PASSWORD not in everything
    assert "[redacted]" in everything  # where the secrets were
    assert ("gen_ai.tool.call.arguments" in everything) == content


def test_the_secret_check_can_fail_without_secrets_given(tmp_path):
    spans = to_otel(leaky(), content=True)
    assert any(PASSWORD in s.to_json() for s in spans)  # so the test above proves something
    assert not any(KEY in s.to_json() for s in spans)  # key-like text is always redacted


def test_any_exporter_receives_the_same_spans():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    elsewhere = InMemorySpanExporter()  # where an OTLP exporter to Jaeger or Phoenix would go
    spans = to_otel(leaky(), exporters=[elsewhere])
    assert [s.context.span_id for s in elsewhere.get_finished_spans()] == [
        s.context.span_id for s in spans
    ]
