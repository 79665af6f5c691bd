"""Messages, replies and tool specs: the data a model, the loop and the APIs exchange.

Built in 01_setup. `Message`, `ToolCall` and `Reply` are labkit's own small dataclasses: the
adapters (labkit.live) translate them to and from an API, so the loop never sees an SDK object.
`to_api` is the one renderer of a tool spec for the APIs, `check_tool_choice` the one check of a
tool_choice, and `check_pairing` the rule a history must keep (every call answered, by id).
labkit.models re-exports all of it, beside the Model protocol and the scripted model.
Left out: images and audio.
"""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import UserError
from .tokens import least_trusted


@dataclass
class ToolCall:
    """One tool call as the model sent it. Every field is text: a name or arguments sent as
    anything else (a list, an object, a number, nothing) become their JSON text, and `problem`
    says what was wrong, so the call is refused as malformed instead of crashing what reads it.

    Example: ToolCall("call_1", "f", {"x": 1}).problem  ->  "the arguments are a JSON object, ..."
    """

    id: str  # pairs the call with its output: "call_1"
    name: str  # the tool the model wants to run
    arguments: str  # the raw JSON text the model wrote; the tool layer parses it
    problem: str | None = None  # why the call cannot run as sent; None for a well-formed call

    def __post_init__(self):
        found = [] if self.problem is None else [self.problem]
        fix = "call one of the tools you were offered, by name"
        if self.name is None:
            found.append(f"the call has no tool name — {fix}")
        elif not isinstance(self.name, str):
            found.append(f"the tool name is {_kind(self.name)}, not text — {fix}")
        if not isinstance(self.arguments, str):
            found.append(
                f"the arguments are {_kind(self.arguments)}, not JSON text — send a "
                "string holding one JSON object ('{}' when the tool takes none)"
            )
        self.id, self.name = as_text(self.id), as_text(self.name)
        self.arguments = as_text(self.arguments)
        self.problem = "; ".join(found) or None

    def __repr__(self):
        problem = f", problem={self.problem!r}" if self.problem else ""
        shown = f"id={self.id!r}, name={self.name!r}, arguments={self.arguments!r}{problem}"
        return f"ToolCall({shown})"


def _kind(value):
    """A value's kind in JSON words. Example: _kind([1])  ->  "a JSON array" """
    for cls, word in (
        (bool, "a boolean"),
        ((int, float), "a number"),
        (dict, "a JSON object"),
        ((list, tuple), "a JSON array"),
    ):
        if isinstance(value, cls):  # bool first; True is an int to Python
            return word
    return "null" if value is None else f"a Python {type(value).__name__}"


def as_text(value: object) -> str:
    """A tool call's field as text: text stays, None is "", anything else is its JSON.

    Example: as_text({"city": "Paris"})  ->  '{"city": "Paris"}'
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not JSON: name its type, never its repr
        return f"<{type(value).__name__}>"


@dataclass
class Message:
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str = ""
    tool_calls: list = field(default_factory=list)  # assistant: [ToolCall, ...]
    tool_call_id: str | None = None  # tool: the ToolCall.id this answers
    reasoning: list = field(default_factory=list)  # assistant: encrypted reasoning items, opaque


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    source: str = "reported"  # who counted it: a key of labkit.tokens.SOURCES

    def __add__(self, other):
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            least_trusted(self.source, other.source),  # a sum is only as good as its worst part
        )


@dataclass
class Reply:
    text: str = ""
    tool_calls: list = field(default_factory=list)  # [ToolCall, ...]
    usage: Usage | None = None  # None when the server did not report it
    status: str = "completed"  # "completed" | "incomplete"
    incomplete_reason: str | None = None  # e.g. "max_output_tokens"
    reasoning: list = field(default_factory=list)  # replayable reasoning items (Responses API)

    def to_message(self) -> "Message":
        """The assistant message to append to the history."""
        return Message(
            "assistant", self.text, list(self.tool_calls), reasoning=list(self.reasoning)
        )


@dataclass(frozen=True)
class OutputSchema:
    """Structured output: the reply's text must be JSON matching `schema` (the APIs' strict mode).

    Example: OutputSchema("claims", {"type": "object", "properties": {...}, ...})
    """

    name: str  # the APIs want a name for the format
    schema: dict  # a JSON schema whose root is an object


def system(text: str) -> Message:
    return Message("system", text)


def user(text: str) -> Message:
    return Message("user", text)


def tool_message(call: ToolCall, content: str) -> Message:
    """The output of one tool call, paired with it by id.
    Example: tool_message(call, '{"ok": true}')"""
    return Message("tool", content, tool_call_id=call.id)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict  # a JSON schema whose root is an object
    strict: bool = True  # OpenAI strict mode: additionalProperties false, all properties required


def as_tool_spec(tool: object) -> ToolSpec:
    """Accept a ToolSpec, a dict, or any object with name/description/parameters (a labkit Tool)."""
    if isinstance(tool, ToolSpec):
        return tool
    get: Callable[..., Any] = (
        tool.get
        if isinstance(tool, dict)
        else lambda key, default=None: getattr(tool, key, default)
    )
    if not get("name") or not isinstance(get("parameters"), dict):
        raise UserError(
            f"{tool!r} is not a tool — give a name, a description and a parameters schema"
        )
    return ToolSpec(get("name"), get("description", ""), get("parameters"), get("strict", True))


def to_api(tool: object, api: str) -> dict[str, Any]:
    """A tool spec as the Responses API or the Chat Completions API wants it in `tools=[...]`.

    The one renderer: the live adapters, request previews and ToolRegistry.specs all use it.
    Example: to_api(get_weather, "chat")  ->  {"type": "function", "function": {"name": ...}}
    """
    s = as_tool_spec(tool)
    spec = {
        "name": s.name,
        "description": s.description,
        "parameters": s.parameters,
        "strict": s.strict,
    }
    if api == "responses":
        return {"type": "function", **spec}
    if api == "chat":
        return {"type": "function", "function": spec}
    raise UserError(f"api {api!r} is not one of responses, chat")


TOOL_CHOICES = ("auto", "required", "none")  # or one offered tool's name: call exactly that one


def check_tool_choice(choice: str, tools: Iterable[object] = ()) -> str:
    """The tool_choice as given, once it is one the APIs accept with these tools; else UserError.

    "auto": the model decides (the default, never sent); "required": it must call a tool;
    "none": it must answer in text; a tool's name: it must call that tool.
    Example: check_tool_choice("get_weather", [get_weather])  ->  "get_weather"
    """
    names = [as_tool_spec(t).name for t in tools]
    if choice in ("auto", "none") or (isinstance(choice, str) and choice in names):
        return choice
    if choice == "required" and names:
        return choice
    if choice == "required":
        raise UserError('tool_choice "required" with no tools offered — offer one, or use "auto"')
    offered = (
        f"the name of an offered tool ({', '.join(names)})"
        if names
        else "a tool's name (none were offered)"
    )
    raise UserError(
        f"tool_choice {repr(choice)[:60]} is not allowed — use "
        f'"auto", "required", "none" or {offered}'
    )


def choice_to_api(choice: str, api: str) -> str | dict:
    """A checked tool_choice as the Responses or the Chat Completions API wants it.

    The three words are the same in both; one tool is named differently by each.
    Example: choice_to_api("get_weather", "chat")
             ->  {"type": "function", "function": {"name": "get_weather"}}
    """
    if api not in ("responses", "chat"):
        raise UserError(f"api {api!r} is not one of responses, chat")
    if choice in TOOL_CHOICES:
        return choice
    if api == "responses":
        return {"type": "function", "name": choice}
    return {"type": "function", "function": {"name": choice}}


def check_pairing(messages: list) -> None:
    """Every tool call must be answered by exactly one tool message, right after it, by call id."""
    waiting: dict = {}
    for i, m in enumerate(messages, 1):  # messages are counted from 1, as people count
        if m.role not in ("system", "user", "assistant", "tool"):
            raise UserError(
                f"message {i} has role {m.role!r} — use system, user, assistant or tool"
            )
        if m.role == "tool":
            if m.tool_call_id not in waiting:
                raise UserError(
                    f"message {i} answers call {m.tool_call_id!r}, which no assistant message "
                    "before it made (or was already answered) — append reply.to_message() "
                    "before the tool results"
                )
            del waiting[m.tool_call_id]
            continue
        if waiting:
            raise UserError(
                f"message {i} comes before the output of call(s) {', '.join(waiting)} — append "
                "one tool_message(call, result) per call first"
            )
        waiting = {c.id: c for c in m.tool_calls} if m.role == "assistant" else {}
    if waiting:
        raise UserError(
            f"call(s) {', '.join(waiting)} have no output yet — append one tool_message per call"
        )
