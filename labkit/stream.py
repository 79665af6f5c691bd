"""Streaming: a live reply read event by event, and shown as it arrives.

Built in 01_setup (Go live). The SDK's server-sent events of both APIs become labkit's own events
(TextDelta, ToolCallDelta, Completed, in labkit.models); the final Reply is parsed by the same
adapter code as a reply sent whole, so a streamed run ends exactly as an unstreamed one. A stream
cut off mid-way ends as an incomplete reply with no tool calls: nothing half-sent is ever run.
`shown` displays the text in a Jupyter cell while it arrives; the saved output is the final text.
Deliberately left out: async streams, reasoning summaries, audio; production adds reconnection.
"""

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .errors import LabkitError, ServiceError
from .models import CUT, Completed, Reply, StreamEvent, TextDelta, ToolCallDelta


def _as_dict(event):
    """An SDK event or chunk as a plain dict (the SDK's typed objects and raw dicts alike)."""
    return event.to_dict(warnings=False) if hasattr(event, "to_dict") else dict(event)


def responses_events(
    sdk_events: Iterable[Any], parse: Callable[[dict[str, Any]], Reply]
) -> Iterator[StreamEvent]:
    """Responses API events as labkit events; `parse(response_dict)` reads the final response.

    Example: for event in responses_events(client.responses.create(..., stream=True), parse): ...
    """
    said: list[str] = []
    calls: dict[int, tuple[str, str]] = {}  # output_index -> (call_id, name)
    try:
        for raw in sdk_events:
            event = _as_dict(raw)
            kind = event.get("type")
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                yield Completed(parse(event.get("response") or {}))
                return
            if kind == "error":
                raise ServiceError(f"the stream failed on the server ({event.get('message')})")
            delta = _responses_delta(event, said, calls)
            if delta is not None:
                yield delta
    except LabkitError:
        raise
    except Exception:  # the connection dropped mid-way: what arrived is not a whole reply
        pass
    yield Completed(Reply("".join(said), [], None, "incomplete", CUT))


def _responses_delta(event, said, calls):
    """A text or arguments delta as a labkit event, noted in `said` and `calls`; else None."""
    kind = event.get("type")
    if kind == "response.output_text.delta":
        said.append(event.get("delta") or "")
        return TextDelta(said[-1])
    if kind == "response.output_item.added":  # a call begins: its id and name come first
        item = event.get("item") or {}
        if item.get("type") == "function_call":
            calls[event.get("output_index")] = (item.get("call_id"), item.get("name"))
    if kind == "response.function_call_arguments.delta":
        at = event.get("output_index")
        call_id, name = calls.get(at, ("", ""))
        index = list(calls).index(at) if at in calls else len(calls)
        return ToolCallDelta(index, call_id or "", name or "", event.get("delta") or "")
    return None


def chat_events(
    sdk_chunks: Iterable[Any], parse: Callable[[dict[str, Any]], Reply]
) -> Iterator[StreamEvent]:
    """Chat Completions chunks as labkit events; the pieces are joined into one completion body
    and read by `parse`, the adapter's own reader. Example: see responses_events."""
    said: list[str] = []
    calls: dict[int, dict[str, Any]] = {}  # index -> the call so far, as a Chat body holds it
    finish: str | None = None
    usage: dict[str, Any] | None = None
    try:
        for raw in sdk_chunks:
            chunk = _as_dict(raw)
            usage = chunk.get("usage") or usage  # the last chunk, when include_usage is asked
            for choice in chunk.get("choices") or []:
                yield from _chat_deltas(choice.get("delta") or {}, said, calls)
                finish = choice.get("finish_reason") or finish
    except Exception:  # the connection dropped mid-way
        finish = None
    if finish is None:  # no finish_reason: the stream was cut before the reply was whole
        yield Completed(Reply("".join(said), [], None, "incomplete", CUT))
        return
    yield Completed(parse(_chat_completion(said, calls, finish, usage)))


def _chat_deltas(delta, said, calls):
    """One choice's delta as labkit events: its text, then each piece of a tool call."""
    if delta.get("content"):
        said.append(delta["content"])
        yield TextDelta(delta["content"])
    for piece in delta.get("tool_calls") or []:
        index = piece.get("index") or 0
        slot = calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        function = piece.get("function") or {}
        slot["id"] = piece.get("id") or slot["id"]
        slot["function"]["name"] += function.get("name") or ""
        slot["function"]["arguments"] += function.get("arguments") or ""
        yield ToolCallDelta(
            index, slot["id"], slot["function"]["name"], function.get("arguments") or ""
        )


def _chat_completion(said, calls, finish, usage):
    """The pieces joined into one Chat Completions body, as if the reply had been sent whole."""
    message = {"role": "assistant", "content": "".join(said) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return {**body, **({"usage": usage} if usage else {})}


def shown(events: Iterable[StreamEvent]) -> Iterator[StreamEvent]:
    """Pass a stream through while its text appears as it arrives (a Jupyter display updated in
    place), then print the final text: the saved output is that text alone, whatever the timing.

    Example: reply = collect(shown(model.stream([user("Tell me a story.")])))
    """
    try:
        from IPython import get_ipython
        from IPython.display import display

        handle = display({"text/plain": ""}, raw=True, display_id=True) if get_ipython() else None
    except ImportError:  # not in IPython at all
        handle = None
    text = ""
    for event in events:
        if isinstance(event, TextDelta):
            text += event.text
            if handle is not None:
                handle.update({"text/plain": text}, raw=True)
        if isinstance(event, Completed):  # before passing it on: a reader may stop at Completed
            if handle is not None:
                # subtle: the display is emptied and the text printed, because nbval compares a
                # display's first content, not its updates; printed text it compares whole
                handle.update({"text/plain": ""}, raw=True)
            print(event.reply.text)
        yield event
