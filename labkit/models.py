"""The Model protocol, stream events and the scripted model.

Built in 01_setup. A model is a `Model`: `respond(messages, tools, *, max_output_tokens,
output_schema, tool_choice) -> Reply`, one signature for every model. A `StreamingModel` also has
`stream(...)` with the same parameters, yielding TextDelta, ToolCallDelta and Completed events;
`collect` turns a stream back into the Reply. `ScriptedModel` is the offline default: its steps are
literally what a model would say (`say`, `call`); everything around it runs for real. The live
models are in live.py. Messages, replies and tool specs are labkit.messages (re-exported here).
Left out: images and audio, async.
"""

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, Protocol, runtime_checkable

from .config import DEFAULT_MODEL
from .errors import UserError
from .messages import (  # noqa: F401 (re-exported: labkit.models is where lessons import them)
    TOOL_CHOICES,
    Message,
    OutputSchema,
    Reply,
    ToolCall,
    ToolSpec,
    Usage,
    as_text,
    as_tool_spec,
    check_pairing,
    check_tool_choice,
    choice_to_api,
    system,
    to_api,
    tool_message,
    user,
)
from .tokens import count as count_tokens
from .tokens import estimate as estimate_tokens  # noqa: F401 (06's cite.py, 05's Build it)
from .tokens import source as count_source

# ---------------------------------------------------------------- streaming events


@dataclass(frozen=True)
class TextDelta:
    text: str  # the next piece of the reply's text


@dataclass(frozen=True)
class ToolCallDelta:
    index: int  # which call of the reply (0, 1, ...)
    id: str  # the call's id once known, else ""
    name: str  # the tool's name once known, else ""
    arguments: str  # the next piece of the arguments' JSON text


@dataclass(frozen=True)
class Completed:
    reply: "Reply"  # the whole reply, usage included; status "incomplete" if the stream was cut


CUT = "stream_interrupted"  # the incomplete_reason of a stream that ended before it completed


def stream_reply(reply: "Reply") -> Iterator["StreamEvent"]:
    """A finished reply as the events a streaming server sends: its words, each call, Completed.

    Example: [type(e).__name__ for e in stream_reply(Reply("hi there"))]
             ->  ["TextDelta", "TextDelta", "Completed"]
    """
    yield from (TextDelta(word) for word in re.findall(r"\S+\s*|\s+", reply.text))
    for index, c in enumerate(reply.tool_calls):
        half = len(c.arguments) // 2  # arguments arrive in pieces, as they do from a server
        yield ToolCallDelta(index, c.id, c.name, c.arguments[:half])
        yield ToolCallDelta(index, c.id, c.name, c.arguments[half:])
    yield Completed(reply)


def collect(
    events: Iterable["StreamEvent"], on_event: Callable[["StreamEvent"], object] | None = None
) -> "Reply":
    """The Reply a stream ends with; a stream that stops before Completed is an incomplete reply
    of the text so far and no tool calls (a half-sent call is never run).

    `on_event(event)` sees each event as it arrives (e.g. to show text). Example:
    collect(model.stream([user("ping")])).text  ->  "pong"
    """
    text = []
    for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, Completed):
            return event.reply
        if isinstance(event, TextDelta):
            text.append(event.text)
    return Reply("".join(text), [], None, "incomplete", CUT)


# ---------------------------------------------------------------- the Model protocol

StreamEvent = TextDelta | ToolCallDelta | Completed  # what a stream yields


@runtime_checkable
class Model(Protocol):
    """What the loop, the guardrails and the agents need of a model: one way to ask it.

    Only `messages` is required of a caller; a model answers with a Reply (text, tool calls,
    usage, status), capped at `max_output_tokens` if given, JSON matching `output_schema` if given,
    and calling tools as `tool_choice` says ("auto", "required", "none" or a tool's name).
    Example: isinstance(ScriptedModel([say("pong")]), Model)  ->  True
    """

    def respond(
        self,
        messages: list[Message],
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Reply: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its reply: the same parameters, the reply as events.

    Example: collect(model.stream([user("ping")])).text  ->  "pong"
    """

    def stream(
        self,
        messages: list[Message],
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Iterator[StreamEvent]: ...


@runtime_checkable
class CappedModel(Model, Protocol):
    """A model with its own cap on each reply (None: no cap), so a caller may ask it for less.

    Example: isinstance(ScriptedModel(), CappedModel)  ->  True
    """

    max_output_tokens: int | None


@runtime_checkable
class NamedModel(Model, Protocol):
    """A model that names the real model answering (a live one, a cassette's): priced as itself.

    Example: isinstance(ScriptedModel(), NamedModel)  ->  False
    """

    model: str


def tighter(cap: int | None, other: int | None) -> int | None:
    """The smaller of two output caps, where None means no cap. Example: tighter(None, 50) -> 50"""
    return other if cap is None else cap if other is None else min(cap, other)


def estimate_messages(messages: list) -> int:
    """The chars/4 estimate of a whole history: labkit.tokens.count with no tokenizer.

    Example: estimate_messages([user("hello world")])  ->  9
    """
    return count_tokens(messages, None)


# ---------------------------------------------------------------- the scripted model


@dataclass(frozen=True)
class Step:
    """One scripted turn: what the model says and which tools it calls."""

    text: str = ""
    calls: tuple = ()  # ((name, arguments_json), ...)
    status: str = "completed"
    incomplete_reason: str | None = None

    def __str__(self):
        parts = [f"say({self.text!r})"] if self.text or not self.calls else []
        parts += [f"call {name}({arguments})" for name, arguments in self.calls]
        return " + ".join(parts) + (
            f" [incomplete: {self.incomplete_reason}]" if self.status != "completed" else ""
        )


def say(text: str) -> Step:
    """A step where the model answers in text. Example: say("pong")"""
    return Step(text=text)


def call(name: str, /, **arguments: Any) -> Step:
    """A step where the model calls a tool. Example: call("get_weather", city="Beijing")"""
    return Step(calls=((name, json.dumps(arguments, ensure_ascii=False)),))


def raw_call(name: object, arguments: object) -> Step:
    """A call given verbatim: broken JSON, or a name or arguments that are not text at all.

    Example: raw_call("f", '{"x": ')   or   raw_call(["f"], {"x": 1})
    """
    return Step(calls=((name, arguments),))


def turn(*steps: Step) -> Step:
    """Several steps said in one turn (text plus parallel calls).
    Example: turn(say("Checking."), call(...))"""
    return Step(" ".join(s.text for s in steps if s.text), sum((s.calls for s in steps), ()))


def incomplete(text: str = "", reason: str | None = "max_output_tokens") -> Step:
    """A reply the server cut short.
    Example: incomplete("The weather in Par", "max_output_tokens")"""
    return Step(text=text, status="incomplete", incomplete_reason=reason)


def _said(calls):
    """The text of scripted calls as a model writes it (a raw_call may hold any value)."""
    return "".join(as_text(name) + as_text(arguments) for name, arguments in calls)


@dataclass
class Seen:
    messages: list  # a copy of the messages the model was shown
    tools: list  # the names of the tools it was offered
    tool_choice: str = "auto"  # what it was told about calling them


class ScriptedModel:
    """The offline model: replays its steps, in order, whatever it is asked.

    A step is a Step (`say`, `call`, ...) or a function (messages, tools) -> Step for a lesson
    about reacting to input. It records what it was shown (`seen`), fails loudly when the script
    runs out, and `unused()` lists steps never reached. Its usage is counted by labkit with the
    tokenizer of `count_as`, the model it stands in for (estimated when labkit has none), and
    says so (source "counted" or "estimated"): no server reported it. Set `max_output_tokens`
    (or pass it to one `respond` call) to cut a longer reply the way a server does ("incomplete").
    Given an `output_schema` it honours it as a strict server does: a step whose text is not JSON
    matching the schema is a UserError (a bug in the script); `enforce_schema=False` plays a
    server that ignores the schema instead. A `tool_choice` is honoured the same way: a step
    that disobeys it ("required" or a name and no such call, "none" and a call) is a UserError,
    unless `enforce_tool_choice=False` plays a server that ignores it; `seen` records it.

    Example: ScriptedModel([say("pong")]).respond([user("ping")]).text  ->  "pong"
    """

    def __init__(
        self,
        steps: Iterable[object] = (),  # Steps, or functions (messages, tools) -> Step
        count_as: str | None = DEFAULT_MODEL,
        enforce_schema: bool = True,
        enforce_tool_choice: bool = True,
    ) -> None:
        self.steps = list(steps)
        self.enforce_schema, self.enforce_tool_choice = enforce_schema, enforce_tool_choice
        self.position = 0
        self.seen: list = []
        self.count_as = count_as  # whose tokenizer counts this script's usage; None: estimate
        self.usage = Usage(source=count_source(count_as))
        self.max_output_tokens = None  # None: no cap; else replies are cut to fit, as a server does
        self._ids = count(1)

    def respond(
        self,
        messages: list[Message],
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Reply:
        """The next step as a Reply, cut to the tighter of the model's and this call's cap.

        Example: model.respond(messages, [get_weather], tool_choice="required")
        """
        names = [as_tool_spec(t).name for t in tools]
        check_tool_choice(tool_choice, tools)
        self.seen.append(Seen(copy.deepcopy(list(messages)), names, tool_choice))
        if not self.steps:
            raise UserError(
                "this scripted model has no steps — offline, pass the script: "
                "connect(script=[say(...), call(...)]), or set LABKIT_MODE=live for a real model"
            )
        if self.position >= len(self.steps):
            raise UserError(
                f"the scripted model has no step {self.position + 1}: its script has "
                f"{len(self.steps)} step(s) and was asked for another turn — add a step "
                "(say/call), or check why the loop did not stop"
            )
        step = self.steps[self.position]
        self.position += 1
        if callable(step) and not isinstance(step, Step):
            step = step(messages, tools)  # a computed step reacts to what it was shown
        if not isinstance(step, Step):
            raise UserError(
                f"script step {self.position} is {step!r}, not a step — use say(...) or call(...)"
            )
        if output_schema is not None and self.enforce_schema:
            problem = schema_problem(step.text, output_schema)
            if problem:
                raise UserError(
                    f"script step {self.position} does not match output schema "
                    f"{output_schema.name!r}: {problem} — a server honouring the schema never "
                    "says that; fix the step, or pass enforce_schema=False to play one ignoring it"
                )
        problem = disobeys(step, tool_choice) if self.enforce_tool_choice else None
        if problem:
            raise UserError(
                f"script step {self.position} ({step}) disobeys tool_choice {tool_choice!r}: "
                f"{problem} — a server honouring tool_choice never says that; fix the step, or "
                "pass enforce_tool_choice=False to play one ignoring it"
            )
        cap = tighter(self.max_output_tokens, max_output_tokens)
        text, said, status, reason = self._capped(step, cap)
        calls = [ToolCall(f"call_{next(self._ids)}", name, arguments) for name, arguments in said]
        spoken = text + _said(said)
        counted = count_tokens(messages, self.count_as), self._count(spoken)
        usage = Usage(*counted, sum(counted), count_source(self.count_as))
        self.usage = self.usage + usage
        return Reply(text, calls, usage, status, reason)

    def stream(
        self,
        messages: list[Message],
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Iterator[StreamEvent]:
        """The next step as stream events, word by word. Example: collect(model.stream(msgs))"""
        reply = self.respond(
            messages,
            tools,
            max_output_tokens=max_output_tokens,
            output_schema=output_schema,
            tool_choice=tool_choice,
        )
        yield from stream_reply(reply)

    def _capped(self, step, cap):
        """(text, calls, status, reason) as a server with max_output_tokens returns them: the
        text cut to fit, then only the calls that fit whole, and "incomplete" when anything was
        cut."""
        calls = step.calls
        if cap is None or self._count(step.text + _said(calls)) <= cap:
            return step.text, calls, step.status, step.incomplete_reason
        low, high = 0, len(step.text)  # the longest prefix of the text that fits
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (
                (middle, high) if self._count(step.text[:middle]) <= cap else (low, middle - 1)
            )
        text, kept = step.text[:low], ()
        for name, arguments in calls:
            if self._count(text + _said(kept + ((name, arguments),))) > cap:
                break
            kept += ((name, arguments),)
        return text, kept, "incomplete", "max_output_tokens"

    def _count(self, text):
        return count_tokens(text, self.count_as)

    def unused(self) -> list[str]:
        """The steps never reached, as text. Example: model.unused()  ->  ["say('bye')"]"""
        return [
            str(s) if isinstance(s, Step) else "<computed step>"
            for s in self.steps[self.position :]
        ]

    def __repr__(self):
        return f"ScriptedModel({len(self.steps)} steps, {self.position} used)"


def disobeys(step: Step, tool_choice: str) -> str | None:
    """Why a step is not what a model told `tool_choice` may say, in a few words; None when it is.

    Example: disobeys(say("hi"), "required")  ->  "it calls no tool"
    """
    names = [as_text(name) for name, _ in step.calls]
    if tool_choice == "none" and names:
        return "it calls a tool"
    if tool_choice == "required" and not names:
        return "it calls no tool"
    if tool_choice not in TOOL_CHOICES and (not names or set(names) != {tool_choice}):
        return f"it calls {', '.join(names) or 'no tool'}, not only {tool_choice}"
    return None


def schema_problem(text: str, output_schema: OutputSchema) -> str | None:
    """Why `text` is not JSON matching the schema, in one line; None when it matches.

    Checked with `jsonschema`, the validator production uses. Example:
    schema_problem("hi", OutputSchema("x", {"type": "object"}))  ->  "the text is not JSON ..."
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"the text is not JSON ({exc.msg} at char {exc.pos})"
    import jsonschema  # imported here: only structured output needs it

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(output_schema.schema).iter_errors(data)
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"at {where}: {error.message[:120]}"
