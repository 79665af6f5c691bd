"""Tools: a strict schema from type hints, a registry, safe execution, risk and consent.

Built in 02_tools. A tool is a name, a description, a strict JSON schema, a function and a risk.
`@tool` derives the schema from the function's type hints and docstring. `execute()` checks the
run's whitelist, parses and validates the model's arguments (labkit.schema), runs the function
and always returns a result the model can read: {"ok": true, "data": ...} or {"ok": false,
"error": kind, "message": how to fix}. `approved(answer)` is the one consent rule every later
stage asks through; `risk_above` the one risk comparison.
Deliberately left out: async tools, timeouts, sandboxing (the teaching tools are in toolbox.py).
"""

import inspect
import json
import re
import types
import typing
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, overload

from .config import redact
from .errors import ToolError, UserError
from .models import ToolCall, to_api
from .schema import (
    ArgumentError,
    check_strict,
    normalize_arguments,
    parse_arguments,
    validate_arguments,
)

# low: reads only; medium: reversible writes; high: needs approval
RISKS = (
    "low",
    "medium",
    "high",
)
MAX_RESULT_CHARS = 4_000  # results longer than this are cut, with a visible marker
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what the OpenAI API accepts as a tool name


# Characters a reader takes for one another in a tool name (case is folded first)
_LOOK_ALIKE = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l", "-": "_"})


def look_alike(name: str) -> str:
    """One text for names a reader cannot tell apart: case, 0/o, 1/l/i, rn/m, - and _.

    Example: look_alike("Notes__save_note") == look_alike("notes__save_note")  ->  True
    """
    folded = unicodedata.normalize("NFKC", name).casefold()
    return folded.translate(_LOOK_ALIKE).replace("rn", "m")


def risk_above(risk: str, max_risk: str) -> bool:
    """Whether a tool of `risk` is above the delegated `max_risk` (low < medium < high).

    Example: risk_above("high", "medium")  ->  True
    """
    return RISKS.index(risk) > RISKS.index(max_risk)


# ---------------------------------------------------------------- tools and the registry


@dataclass
class Tool:
    """A tool the model may call. `parameters` is a strict JSON schema whose root is an object.

    `egress` says whether it sends data off the machine: False; True when no argument says where to;
    or the name(s) of the string argument(s) holding the destination — a URL, a host or an e-mail
    address — so a guard can check it against an allow-list (05_guardrails).
    Example: Tool("echo", "Repeat text.", {"type": "object", "properties": {"text": {"type":
                  "string"}}, "required": ["text"], "additionalProperties": False},
                  lambda text: text)
    """

    name: str
    description: str
    parameters: dict  # {"type": "object", "properties": {...}, "required": [...], ...}
    fn: typing.Callable = field(repr=False)
    risk: str = "low"  # one of RISKS
    strict: bool = True  # always True: labkit only builds strict schemas
    # False, True, or the argument(s) naming the destination: "url" or ("url",)
    egress: bool | str | tuple = False

    def __post_init__(self):
        if not NAME.match(self.name or ""):
            raise UserError(
                f"tool name {self.name!r} is not allowed — use 1-64 letters, digits, _ or -"
            )
        if self.risk not in RISKS:
            raise UserError(
                f"tool {self.name}: risk {self.risk!r} is not one of {', '.join(RISKS)}"
            )
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise UserError(
                f'tool {self.name}: parameters must be a schema with "type": "object" at its root'
            )
        check_strict(self.parameters, f"{self.name}.parameters")
        self.egress = self._egress()

    def _egress(self):
        """The egress declaration checked: a bool, or a tuple of the text arguments it names."""
        if isinstance(self.egress, bool):
            return self.egress
        names = (self.egress,) if isinstance(self.egress, str) else self.egress
        # text, or a list of texts
        texts = [
            n
            for n, s in self.parameters.get("properties", {}).items()
            if "string" in _types(s) + _types(s.get("items"))
        ]
        if not isinstance(names, (tuple, list)) or not names or any(n not in texts for n in names):
            raise UserError(
                f"tool {self.name}: egress={self.egress!r} names no text argument — "
                "give the argument(s) holding the URL, host or e-mail address "
                f"({', '.join(texts) or 'none'}), True if none says where, or False"
            )
        return tuple(names)

    def __call__(self, **arguments):
        return self.fn(**arguments)


def _types(schema):
    """The JSON types a schema allows. Example: _types({"type": ["string", "null"]})  ->  [...]"""
    types = schema.get("type", []) if isinstance(schema, dict) else []
    return [types] if isinstance(types, str) else list(types)


_HINTS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_for(hint, where):
    """The schema for one type hint; refuses (UserError) what it cannot express exactly."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _HINTS:
        return {"type": _HINTS[hint]}
    if origin is typing.Literal and all(type(a) in _HINTS for a in args):
        return _literal(args)
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _schema_for(args[0], where)}
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _nullable(_schema_for(next(a for a in args if a is not type(None)), where))
    raise UserError(
        f"{where}: cannot express {hint!r} as a strict schema — use str, int, float, bool, "
        "Literal[...], list[...] or X | None, or write the Tool(...) schema by hand"
    )


def _literal(values):
    """Literal["a", "b"]: an enum of its values, typed by the types they have."""
    kinds = sorted({_HINTS[type(a)] for a in values})
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(values)}


def _nullable(inner):
    """X | None: the schema of X that allows null too."""
    if "enum" in inner:  # null must be in the enum too, or null is refused
        inner["enum"] = inner["enum"] + [None]
    inner["type"] = (
        [inner["type"], "null"] if isinstance(inner["type"], str) else inner["type"] + ["null"]
    )
    return inner


def _docstring_parts(fn):
    """(description, {parameter: description}) from a Google-style docstring's Args: section."""
    doc = inspect.getdoc(fn) or ""
    head, _, args = doc.partition("\nArgs:")
    described = dict(re.findall(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$", args, re.M))
    return " ".join(head.split()), described


@overload
def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    risk: str = "low",
    egress: bool | str | tuple = False,
) -> Tool: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    risk: str = "low",
    egress: bool | str | tuple = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    risk: str = "low",
    egress: bool | str | tuple = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a Tool from a function, deriving a strict schema from its type hints and docstring.

    egress: whether it sends data off the machine — the argument naming where, or True.
    Example: @tool
             def get_time(city: str) -> str:
                 '''The local time in a city.'''
    """
    if fn is None:
        return lambda f: tool(f, name=name, risk=risk, egress=egress)
    name = name or fn.__name__
    description, described = _docstring_parts(fn)
    if not description:
        raise UserError(
            f"tool {name} has no docstring — the model reads it to decide when to call the tool"
        )
    hints = typing.get_type_hints(fn)
    properties = {}
    for p in inspect.signature(fn).parameters.values():
        where = f"tool {name}, parameter {p.name!r}"
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise UserError(
                f"{where}: *args/**kwargs cannot be a strict schema — name each parameter"
            )
        if p.name not in hints:
            raise UserError(f"{where} has no type hint — add one (e.g. {p.name}: str)")
        schema = _schema_for(hints[p.name], where)
        if p.default is not p.empty and not (p.default is None and "null" in schema["type"]):
            raise UserError(
                f"{where} has a default; strict mode makes every parameter required — "
                f"remove the default, or write `{p.name}: X | None = None` so the model can send "
                "null"
            )
        if p.name in described:
            schema["description"] = described[p.name]
        properties[p.name] = schema
    parameters = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return Tool(name, description, parameters, fn, risk, egress=egress)


class ToolRegistry:
    """The tools of a run, by name. Accepts Tool objects or plain functions (made into tools).

    Example: registry = ToolRegistry([calculate, get_weather]); registry.names()
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        seen: dict[str, str] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else tool(t)
            if t.name in self.tools:
                raise UserError(
                    f"two tools are named {t.name!r} — give one another name: tool(fn, name=...)"
                )
            twin = seen.setdefault(look_alike(t.name), t.name)
            if (
                twin != t.name
            ):  # offered side by side, a model (or a person) takes one for the other
                raise UserError(
                    f"tools {twin!r} and {t.name!r} differ only by case or look-alike characters "
                    "— give one another name: tool(fn, name=...)"
                )
            self.tools[t.name] = t

    def get(self, name: str) -> Tool:
        if name not in self.tools:
            raise UserError(
                f"no tool named {name!r} — registered: {', '.join(self.tools) or 'none'}"
            )
        return self.tools[name]

    def names(self) -> list[str]:
        return list(self.tools)

    def specs(self, api: str | None = None) -> list:
        """What a model is offered: the Tool objects, or each as an API wants it (to_api)."""
        return [t if api is None else to_api(t, api) for t in self.tools.values()]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __contains__(self, name):
        return name in self.tools

    def __len__(self):
        return len(self.tools)

    def __repr__(self):
        return f"ToolRegistry({', '.join(self.tools)})"


def as_registry(tools: Iterable[Tool | Callable[..., Any]]) -> ToolRegistry:
    """`tools` as a ToolRegistry: a registry stays itself, a list of tools becomes one.

    Example: as_registry([calculate]).names()  ->  ["calculate"]
    """
    return tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)


# ---------------------------------------------------------------- executing a call


def failure(kind: str, message: str) -> dict:
    """A result that tells the model what went wrong and how to fix it."""
    return {"ok": False, "error": kind, "message": message}


def _capped(data):
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    if len(text) <= MAX_RESULT_CHARS:
        return {"ok": True, "data": data}
    marker = f" ...[truncated: showing {MAX_RESULT_CHARS:,} of {len(text):,} characters]"
    return {"ok": True, "data": text[:MAX_RESULT_CHARS] + marker, "truncated": True}


def execute(call: ToolCall, registry: ToolRegistry, allowed: list | None = None) -> dict:
    """Run one tool call: whitelist, parse, validate, normalize, then the function. Never raises.

    Returns {"ok": True, "data": ...} or {"ok": False, "error": kind, "message": how to fix}.
    A PermissionError from the tool comes back as error "permission_denied" (the loop stops on it).
    Example: execute(ToolCall("call_1", "calculate", '{"expression": "2+2"}'), registry)
             ->  {"ok": True, "data": {"expression": "2+2", "result": 4}}
    """
    if call.problem:  # a name or arguments that were not text (models.ToolCall)
        return failure("malformed_call", call.problem)
    unusable = _unusable(call.name, registry, allowed)
    if unusable:
        return unusable
    t = registry.get(call.name)
    try:
        arguments = parse_arguments(call.arguments)
        validate_arguments(arguments, t.parameters)
        arguments = normalize_arguments(arguments, t.parameters)
    except ArgumentError as exc:
        return failure(exc.kind, f"{exc} (then call {t.name} again)")
    return _run(t, arguments)


def _unusable(name, registry, allowed):
    """The failure for a name the model may not call in this run, or that no tool has; else None."""
    usable = [n for n in registry.names() if allowed is None or n in allowed]
    if allowed is not None and name not in allowed:
        return failure(
            "not_allowed",
            f"{name} is not allowed in this run — use one of: "
            f"{', '.join(usable) or 'none (answer in text)'}",
        )
    if name not in registry:
        return failure(
            "unknown_tool",
            f"there is no tool named {name!r} — use one of: "
            f"{', '.join(usable) or 'none (answer in text)'}",
        )
    return None


def _run(t, arguments):
    """The tool's function on valid arguments: its data, or the failure that says whose fault."""
    try:
        data = t.fn(**arguments)
    except PermissionError as exc:
        return failure("permission_denied", redact(f"{t.name} was refused: {exc}"))
    except ToolError as exc:
        return failure(exc.kind, redact(str(exc)))
    except Exception as exc:  # a crashing tool is the tool's fault; the run goes on
        return failure(
            "tool_crashed",
            redact(
                f"{t.name} crashed ({type(exc).__name__}: {exc}) — a bug in "
                "the tool, not your call; try another way or tell the user"
            ),
        )
    try:
        return _capped(data)
    except (TypeError, ValueError):  # a set, an object, NaN: nothing the model could read as JSON
        return failure(
            "bad_result",
            f"{t.name} returned something that is not JSON — a bug in the tool, "
            "not your call; try another way or tell the user",
        )


def result_text(result: dict) -> str:
    """The tool message content for a result.
    Example: result_text({"ok": True, "data": 4}) -> '{"ok": true, "data": 4}'"""
    return json.dumps(result, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------- consent: one rule for every yes

# What counts as an explicit yes, after trimming spaces and case and one final . ! 。 or ！
YES_WORDS = frozenset({"y", "yes", "是", "是的", "好", "好的", "可以", "同意"})


def approved(answer: object) -> bool:
    """Whether a person's answer is consent: only True, or exactly one of YES_WORDS; all else is no.

    Memory (03: remember, consolidate) and permissions (05) ask through this one rule. A sentence
    that starts like a yes is not one: "Yesterday I said no", "yes, but not now", "yes?", "yeah no",
    None, 1 and "true" all mean no, so a misread answer can only ever refuse.
    Example: approved("Yes!")  ->  True;  approved("you must not")  ->  False
    """
    if answer is True:
        return True
    if not isinstance(answer, str):
        return False
    text = answer.strip().casefold()
    text = text[:-1] if text.endswith((".", "!", "。", "！")) else text
    return text in YES_WORDS
