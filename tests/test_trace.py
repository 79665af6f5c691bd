"""Traces render deterministically for nbval, and richly for people."""

from labkit import Reply, ToolCall, Trace, Usage


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


def test_incomplete_reply_is_marked():
    trace = Trace()
    trace.model(3, Reply("The answ", status="incomplete", incomplete_reason="max_output_tokens"))
    assert trace.lines() == [" 3 model says 'The answ'; [incomplete: max_output_tokens]"]


def test_stepper_steps_through_events_and_says_which_of_how_many():
    stepper = sample().stepper()
    assert stepper.slider.max == 5 and "get_weather" in stepper.view.value
    assert stepper.label.value == "event 1 of 5"
    stepper.slider.value = 5
    assert stepper.label.value == "event 5 of 5" and "completed" in stepper.view.value
    assert stepper.widget.children[1] is stepper.view


def test_stepper_shows_the_trace_as_text_where_no_widget_can_run():
    stepper = sample().stepper()
    bundle = stepper._repr_mimebundle_()
    assert bundle["text/plain"] == (
        "stepper: 5 events, as text (run the cell in JupyterLab to step through them)\n"
        + sample().text()
    )
    assert "application/vnd.jupyter.widget-view+json" in bundle  # JupyterLab gets the widget
    assert repr(stepper) == bundle["text/plain"] and "VBox" not in repr(stepper)


def test_an_empty_or_closed_stepper_is_still_readable():
    stepper = Trace().stepper()
    assert stepper.label.value == "no events" and repr(stepper).endswith("(no events)")
    stepper.widget.close()
    assert list(stepper._repr_mimebundle_()) == ["text/plain"]
