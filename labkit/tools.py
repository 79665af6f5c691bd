"""Tools: strict schemas, argument parsing and validation, a registry, safe execution, consent.

Built in 02_tools. A tool is a name, a description, a strict JSON schema, a function and a risk.
`execute()` checks the run's whitelist, parses and validates the model's arguments, runs the
function and always returns a result the model can read: {"ok": true, "data": ...} or
{"ok": false, "error": kind, "message": how to fix}. Teaching tools: calculate, get_weather,
list_docs, read_doc. `approved(answer)` is the one consent rule every later stage asks through.
Deliberately left out: most of JSON Schema (validate_arguments checks a small stated subset and
refuses the rest; production uses the jsonschema library), async tools, timeouts, sandboxing.
"""
import ast
import inspect
import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from .config import REPO_ROOT, redact
from .errors import ModelBehaviorError, ToolError, UserError

RISKS = ("low", "medium", "high")   # low: reads only; medium: reversible writes; high: needs approval
MAX_ARGUMENT_CHARS = 20_000         # longer arguments are refused before parsing
MAX_DEPTH = 32                      # nesting of arguments; deeper is refused, never a RecursionError
MAX_RESULT_CHARS = 4_000            # results longer than this are cut, with a visible marker
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")     # what the OpenAI API accepts as a tool name


class ArgumentError(ModelBehaviorError):
    """The model's arguments are not valid JSON or do not match the schema. `kind` names which."""

    def __init__(self, message, kind="invalid_arguments"):
        super().__init__(message)
        self.kind = kind


class UnsupportedSchema(UserError):
    """A schema uses a keyword validate_arguments does not check: refused, never silently accepted."""


# ---------------------------------------------------------------- parsing the model's JSON text

def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ArgumentError(f"the key {key!r} appears twice — send each argument once", "invalid_json")
        seen[key] = value
    return seen


def _finite(text):
    number = float(text)
    if not math.isfinite(number):       # subtle: json.loads turns 1e999 into inf without complaint
        raise ArgumentError(f"the number {text} is too large for JSON — send a finite number", "invalid_json")
    return number


def _no_constant(name):
    raise ArgumentError(f"{name} is not valid JSON — send a finite number or null", "invalid_json")


def parse_arguments(text):
    """Parse the model's arguments text into a dict; refuse what JSON forbids.

    Example: parse_arguments('{"city": "Paris"}')  ->  {"city": "Paris"}
    """
    if not isinstance(text, str):
        raise ArgumentError(f"arguments must be JSON text, got {type(text).__name__}", "invalid_json")
    if len(text) > MAX_ARGUMENT_CHARS:
        raise ArgumentError(f"arguments are {len(text):,} characters; the limit is {MAX_ARGUMENT_CHARS:,} "
                            "— send shorter arguments", "invalid_json")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_finite,
                           parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column "
                            f"{exc.colno}) — send one JSON object with double-quoted keys, e.g. "
                            '{"city": "Paris"}', "invalid_json") from None
    except (ValueError, RecursionError) as exc:     # e.g. an integer of 5,000 digits, deep nesting
        raise ArgumentError(f"arguments could not be read ({type(exc).__name__}) — send a small, "
                            "flat JSON object", "invalid_json") from None
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments must be a JSON object, got {json_type(value)} — wrap them: "
                            '{"name": value}', "invalid_json")
    return check_text(value, "arguments")        # "\\ud83d" is valid JSON, yet it is not text


# ---------------------------------------------------------------- text and ids anything can store

def printable(value):
    """Anything as text a message, trace or file can hold: repr for non-strings, bad text escaped.

    Example: printable(["a"])  ->  "['a']";  a lone surrogate comes back as the 6 characters \\udcff
    """
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


WHOLE_CHARACTERS = "use whole characters (an emoji as itself, or both its halves: \\ud83d\\ude00)"


def unencodable(value, path="text"):
    """Where `value` holds text UTF-8 cannot encode, in one line (what, not the fix); else None.

    A lone surrogate ("\\ud83d", half of a UTF-16 pair; or a byte that was not UTF-8, as Python
    decodes command-line arguments) is a valid Python string and valid JSON, but no UTF-8 file,
    database or HTTP body can hold it. Strings and keys are checked at any depth.
    Example: unencodable({"city": "\\ud83d"}, "arguments")  ->  "arguments.city holds '\\ud83d' ..."
    """
    stack = [(value, path)]
    while stack:                        # a loop, not recursion: deep nesting cannot overflow
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (f"{where} holds {ascii(item[exc.start:exc.end])} at character {exc.start}, "
                        "a lone surrogate UTF-8 cannot encode (half of a UTF-16 pair, or a byte "
                        "that was not UTF-8)")
        elif isinstance(item, dict):
            children = [c for k, v in item.items() for c in ((k, f"a key of {where}"),
                                                                (v, f"{where}.{printable(k)}"))]
            stack += reversed(children)
        elif isinstance(item, (list, tuple)):
            stack += reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)])
    return None


def check_text(value, path="arguments", error=None):
    """`value` if all its text is UTF-8; else ArgumentError "invalid_text", or `error` if given.

    ArgumentError is the model's to fix (its arguments); pass error=UserError for the caller's text.
    Example: check_text({"city": "\\ud83d"})   # ArgumentError: arguments.city holds '\\ud83d' ...
    """
    problem = unencodable(value, path)
    if problem:
        message = f"{problem} — {WHOLE_CHARACTERS}"
        raise error(message) if error else ArgumentError(message, "invalid_text")
    return value


def required_id(value, name, how):
    """`value` when it is a usable id: a string, not blank, no spaces at its ends, all UTF-8 text.

    Anything else (None, 3, "", "  ", " ana", "\\udcff") raises UserError naming `name`, then `how`
    (how to make a proper one). Ids, tenants, principals and scopes all pass through here.
    Example: required_id("ana", "tenant", "pass tenant='ana'")  ->  "ana"
    """
    if value is None:
        what = f"{name} is missing"
    elif not isinstance(value, str):
        what = f"{name} must be a string, got {type(value).__name__} {printable(value)[:40]}"
    elif not value.strip():
        what = f"{name} is blank ({value!r})"
    elif value != value.strip():        # " ana" and "ana" would be two ids nobody tells apart
        what = f"{name} {value!r} has spaces at its ends"
    else:
        what = unencodable(value, name)
        if what is None:
            return value
    raise UserError(f"{what} — {how}")


# ---------------------------------------------------------------- validating against a schema

KEYWORDS = ("type", "required", "properties", "additionalProperties", "enum", "items")
ANNOTATIONS = ("description", "title", "$comment", "$schema")    # no effect on validity
JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")


def json_type(value):
    """The JSON type name of a parsed value ("integer" for 3, "boolean" for True, never both).

    Example: json_type(True)  ->  "boolean"
    """
    if value is None:
        return "null"
    for name, cls in (("boolean", bool), ("integer", int), ("number", float), ("string", str),
                      ("array", list), ("object", dict)):
        if isinstance(value, cls):      # subtle: bool is checked before int; True is an int in Python
            return name
    return type(value).__name__


def _has_type(value, name):
    kind = json_type(value)
    if name == "integer":               # JSON Schema: 1.0 is an integer, True is not
        return kind == "integer" or (kind == "number" and value.is_integer())
    return kind == name or (name == "number" and kind == "integer")


def json_equal(a, b):
    """Equality as JSON means it: 1 == 1.0, but 1 != true and 0 != false (Python says both are equal).

    Example: json_equal(1, True)  ->  False
    """
    ka, kb = json_type(a), json_type(b)
    if {ka, kb} <= {"integer", "number"}:
        return a == b
    if ka != kb:
        return False
    if ka == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ka == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def check_schema(schema, path="schema"):
    """Raise UnsupportedSchema unless every keyword, at every depth, is one validate_arguments checks.

    Example: check_schema({"type": "string", "maxLength": 3})   # raises: maxLength is not checked
    """
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise UnsupportedSchema(f"{path} is {schema!r}, not a schema — use a dict (or true/false)")
    for key in schema:
        if key not in KEYWORDS + ANNOTATIONS:
            raise UnsupportedSchema(f"{path} uses {key!r}, which validate_arguments does not check — remove "
                                    f"it, or validate with the jsonschema library (checked here: "
                                    f"{', '.join(KEYWORDS)})")
    if schema.get("$schema", DRAFT_2020_12).rstrip("#") != DRAFT_2020_12:
        raise UnsupportedSchema(f"{path} declares $schema {schema['$schema']!r} — only draft 2020-12 is checked")
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or any(t not in JSON_TYPES for t in types):
        raise UnsupportedSchema(f"{path}.type is {schema['type']!r} — use one of {', '.join(JSON_TYPES)}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UnsupportedSchema(f"{path}.required must be a list of property names")
    if not isinstance(schema.get("enum", []), list):
        raise UnsupportedSchema(f"{path}.enum must be a list of allowed values")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise UnsupportedSchema(f"{path}.properties must map names to schemas")
    for name, sub in properties.items():
        check_schema(sub, f"{path}.properties.{name}")
    for key in ("additionalProperties", "items"):
        if key in schema:
            check_schema(schema[key], f"{path}.{key}")


def _check_json(value, path, depth=0):
    """Refuse Python values JSON cannot hold (NaN, tuples, sets, non-string keys, deep nesting)."""
    if depth > MAX_DEPTH:
        raise ArgumentError(f"{path} is nested more than {MAX_DEPTH} levels deep — send flatter arguments")
    if isinstance(value, float) and not math.isfinite(value):
        raise ArgumentError(f"{path} is {value}, which JSON cannot hold — send a finite number")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgumentError(f"{path} has the key {key!r}; JSON keys are strings")
            _check_json(item, f"{path}.{key}", depth + 1)
    elif json_type(value) not in JSON_TYPES:
        raise ArgumentError(f"{path} is a Python {type(value).__name__}, not a JSON value")


def _show(value):
    return json.dumps(value, ensure_ascii=False)[:40]


def _kind_and_value(value):
    """`string "1"`, `integer 3`, or just `null`: the type, then the value if it adds anything."""
    return "null" if value is None else f"{json_type(value)} {_show(value)}"


def _problems(value, schema, path):
    """Yield one line per way `value` breaks `schema` (already checked by check_schema)."""
    if schema is True:
        return
    if schema is False:
        yield f"{path} is not allowed here — remove it"
        return
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if types is not None and not any(_has_type(value, t) for t in types):
        yield f"{path} should be {' or '.join(types)}, got {_kind_and_value(value)}"
        return                          # other keywords would only repeat the same mistake
    if "enum" in schema and not any(json_equal(value, e) for e in schema["enum"]):
        yield f"{path} is {_show(value)}; allowed: {', '.join(map(_show, schema['enum']))}"
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                yield f"{path} is missing the required property {name!r} — add it"
        properties = schema.get("properties", {})
        for name, item in value.items():
            if name in properties:
                yield from _problems(item, properties[name], f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                yield (f"{path} has an unexpected property {name!r} — allowed: "
                       f"{', '.join(properties) or 'none'}")
            elif "additionalProperties" in schema:
                yield from _problems(item, schema["additionalProperties"], f"{path}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from _problems(item, schema["items"], f"{path}[{i}]")


def validate_arguments(arguments, schema, path="arguments"):
    """Check a parsed JSON value against a schema of the supported subset; raise on the first problems.

    Raises UnsupportedSchema for a keyword outside the subset, ArgumentError (listing up to three
    problems, each with where and how to fix) for an invalid value.
    Example: validate_arguments({"city": 3}, {"type": "object", "properties": {"city": {"type": "string"}}})
             # ArgumentError: arguments.city should be string, got integer 3
    """
    check_schema(schema)
    _check_json(arguments, path)
    problems = list(_problems(arguments, schema, path))
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ArgumentError("; ".join(problems[:3]) + more)


def normalize_arguments(value, schema):
    """Valid arguments in one canonical form: a whole-number float becomes an int where the schema says integer.

    subtle: JSON does not tell 30 from 30.0, and validation accepts both as an integer (as JSON Schema
    does); the tool, and any operation id derived from the arguments (07_runtime), must see one value.
    Example: normalize_arguments({"n": 2.0}, {"type": "object", "properties": {"n": {"type": "integer"}}})
             ->  {"n": 2}
    """
    if not isinstance(schema, dict):
        return value
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if isinstance(value, float) and value.is_integer() and "integer" in types and "number" not in types:
        return int(value)
    if isinstance(value, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        return {k: normalize_arguments(v, properties.get(k, extra)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize_arguments(v, schema.get("items")) for v in value]
    return value


def _one_number(value):
    """Whole-number floats as ints, at any depth: JSON has one number 30, however it is spelled."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _one_number(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_one_number(item) for item in value]
    return value


def canonical(arguments):
    """One text per JSON value: sorted keys, no spaces, 30.0 written as 30 (05 repeats, 07 operation ids).

    subtle: validation accepts 30.0 as an integer (JSON Schema does), so if 30 and 30.0 were two texts,
    one intent would derive two operation_ids (07_runtime) and run twice. Numbers are folded here, without a schema,
    so a caller who derives the id from the raw arguments still gets the one id (as RFC 8785 does).
    Text UTF-8 cannot encode has no such text: ArgumentError "invalid_text" (see check_text).
    Example: canonical({"b": 1.0, "a": 2})  ->  '{"a":2,"b":1}'
    """
    check_text(arguments, "the value")
    return json.dumps(_one_number(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- tools and the registry

def check_strict(schema, path="parameters"):
    """Raise UserError unless `schema` is what OpenAI strict mode accepts, at every depth.

    Strict mode wants every object closed (additionalProperties: false) and every property required.
    Example: check_strict({"type": "object", "properties": {}, "required": [], "additionalProperties": False})
    """
    check_schema(schema, path)
    if isinstance(schema, bool):
        raise UserError(f"{path} is {schema!r} — strict mode needs a typed schema")
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            raise UserError(f'{path} needs "additionalProperties": false in strict mode — add it')
        if sorted(schema.get("required", [])) != sorted(properties):
            raise UserError(f"{path}.required must list every property in strict mode "
                            f"({', '.join(properties) or 'none'}) — make optional ones nullable instead")
        for name, sub in properties.items():
            check_strict(sub, f"{path}.properties.{name}")
    if "items" in schema:
        check_strict(schema["items"], f"{path}.items")


@dataclass
class Tool:
    """A tool the model may call. `parameters` is a strict JSON schema whose root is an object.

    `egress` says whether it sends data off the machine: False; True when no argument says where to;
    or the name(s) of the string argument(s) holding the destination — a URL, a host or an e-mail
    address — so a guard can check it against an allow-list (05_guardrails).
    Example: Tool("echo", "Repeat text.", {"type": "object", "properties": {"text": {"type": "string"}},
                  "required": ["text"], "additionalProperties": False}, lambda text: text)
    """
    name: str
    description: str
    parameters: dict          # {"type": "object", "properties": {...}, "required": [...], ...}
    fn: typing.Callable = field(repr=False)
    risk: str = "low"         # one of RISKS
    strict: bool = True       # always True: labkit only builds strict schemas
    egress: bool | tuple = False   # False, True, or the arguments naming the destination: ("url",)

    def __post_init__(self):
        if not NAME.match(self.name or ""):
            raise UserError(f"tool name {self.name!r} is not allowed — use 1-64 letters, digits, _ or -")
        if self.risk not in RISKS:
            raise UserError(f"tool {self.name}: risk {self.risk!r} is not one of {', '.join(RISKS)}")
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise UserError(f'tool {self.name}: parameters must be a schema with "type": "object" at its root')
        check_strict(self.parameters, f"{self.name}.parameters")
        self.egress = self._egress()

    def _egress(self):
        """The egress declaration checked: a bool, or a tuple of the text arguments it names."""
        if isinstance(self.egress, bool):
            return self.egress
        names = (self.egress,) if isinstance(self.egress, str) else self.egress
        texts = [n for n, s in self.parameters.get("properties", {}).items()
                 if "string" in _types(s) + _types(s.get("items"))]     # text, or a list of texts
        if not isinstance(names, (tuple, list)) or not names or any(n not in texts for n in names):
            raise UserError(f"tool {self.name}: egress={self.egress!r} names no text argument — "
                            "give the argument(s) holding the URL, host or e-mail address "
                            f"({', '.join(texts) or 'none'}), True if none says where, or False")
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
        kinds = sorted({_HINTS[type(a)] for a in args})
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _schema_for(args[0], where)}
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = _schema_for(next(a for a in args if a is not type(None)), where)
        if "enum" in inner:             # subtle: null must be in the enum too, or null is refused
            inner["enum"] = inner["enum"] + [None]
        inner["type"] = [inner["type"], "null"] if isinstance(inner["type"], str) else inner["type"] + ["null"]
        return inner
    raise UserError(f"{where}: cannot express {hint!r} as a strict schema — use str, int, float, bool, "
                    "Literal[...], list[...] or X | None, or write the Tool(...) schema by hand")


def _docstring_parts(fn):
    """(description, {parameter: description}) from a Google-style docstring with an Args: section."""
    doc = inspect.getdoc(fn) or ""
    head, _, args = doc.partition("\nArgs:")
    described = dict(re.findall(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$", args, re.M))
    return " ".join(head.split()), described


def tool(fn=None, *, name=None, risk="low", egress=False):
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
        raise UserError(f"tool {name} has no docstring — the model reads it to decide when to call the tool")
    hints = typing.get_type_hints(fn)
    properties = {}
    for p in inspect.signature(fn).parameters.values():
        where = f"tool {name}, parameter {p.name!r}"
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise UserError(f"{where}: *args/**kwargs cannot be a strict schema — name each parameter")
        if p.name not in hints:
            raise UserError(f"{where} has no type hint — add one (e.g. {p.name}: str)")
        schema = _schema_for(hints[p.name], where)
        if p.default is not p.empty and not (p.default is None and "null" in schema["type"]):
            raise UserError(f"{where} has a default; strict mode makes every parameter required — "
                            f"remove the default, or write `{p.name}: X | None = None` so the model can send null")
        if p.name in described:
            schema["description"] = described[p.name]
        properties[p.name] = schema
    parameters = {"type": "object", "properties": properties, "required": list(properties),
                  "additionalProperties": False}
    return Tool(name, description, parameters, fn, risk, egress=egress)


class ToolRegistry:
    """The tools of a run, by name. Accepts Tool objects or plain functions (made into tools).

    Example: registry = ToolRegistry([calculate, get_weather]); registry.names()
    """

    def __init__(self, tools=()):
        self.tools = {}
        for t in tools:
            t = t if isinstance(t, Tool) else tool(t)
            if t.name in self.tools:
                raise UserError(f"two tools are named {t.name!r} — give one another name: tool(fn, name=...)")
            self.tools[t.name] = t

    def get(self, name):
        if name not in self.tools:
            raise UserError(f"no tool named {name!r} — registered: {', '.join(self.tools) or 'none'}")
        return self.tools[name]

    def names(self):
        return list(self.tools)

    def specs(self, api=None):
        """What a model is offered: the Tool objects, or the JSON shape an API wants ("responses"/"chat")."""
        return [t if api is None else to_api(t, api) for t in self.tools.values()]

    def __iter__(self):
        return iter(self.tools.values())

    def __contains__(self, name):
        return name in self.tools

    def __len__(self):
        return len(self.tools)

    def __repr__(self):
        return f"ToolRegistry({', '.join(self.tools)})"


def to_api(t, api):
    """A tool as the Responses API or the Chat Completions API wants it in `tools=[...]`.

    Example: to_api(get_weather, "chat")  ->  {"type": "function", "function": {"name": ..., ...}}
    """
    spec = {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}
    if api == "responses":
        return {"type": "function", **spec}
    if api == "chat":
        return {"type": "function", "function": spec}
    raise UserError(f"api {api!r} is not one of responses, chat")


# ---------------------------------------------------------------- executing a call

def failure(kind, message):
    """A result that tells the model what went wrong and how to fix it."""
    return {"ok": False, "error": kind, "message": message}


def _capped(data):
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    if len(text) <= MAX_RESULT_CHARS:
        return {"ok": True, "data": data}
    marker = f" ...[truncated: showing {MAX_RESULT_CHARS:,} of {len(text):,} characters]"
    return {"ok": True, "data": text[:MAX_RESULT_CHARS] + marker, "truncated": True}


def execute(call, registry, allowed=None):
    """Run one tool call: whitelist, then parse, validate and normalize, then the function. Never raises.

    Returns {"ok": True, "data": ...} or {"ok": False, "error": kind, "message": how to fix}.
    A PermissionError from the tool comes back as error "permission_denied" (the loop stops on it).
    Example: execute(ToolCall("call_1", "calculate", '{"expression": "2+2"}'), registry)
             ->  {"ok": True, "data": {"expression": "2+2", "result": 4}}
    """
    if call.problem:                    # a name or arguments that were not text (models.ToolCall)
        return failure("malformed_call", call.problem)
    usable = [n for n in registry.names() if allowed is None or n in allowed]   # what the model may call
    if allowed is not None and call.name not in allowed:
        return failure("not_allowed", f"{call.name} is not allowed in this run — use one of: "
                                      f"{', '.join(usable) or 'none (answer in text)'}")
    if call.name not in registry:
        return failure("unknown_tool", f"there is no tool named {call.name!r} — use one of: "
                                       f"{', '.join(usable) or 'none (answer in text)'}")
    t = registry.get(call.name)
    try:
        arguments = parse_arguments(call.arguments)
        validate_arguments(arguments, t.parameters)
        arguments = normalize_arguments(arguments, t.parameters)
    except ArgumentError as exc:
        return failure(exc.kind, f"{exc} (then call {t.name} again)")
    try:
        data = t.fn(**arguments)
    except PermissionError as exc:
        return failure("permission_denied", redact(f"{t.name} was refused: {exc}"))
    except ToolError as exc:
        return failure(exc.kind, redact(str(exc)))
    except Exception as exc:            # subtle: a crashing tool is the tool's fault; the run goes on
        return failure("tool_crashed", redact(f"{t.name} crashed ({type(exc).__name__}: {exc}) — a bug in "
                                              "the tool, not your call; try another way or tell the user"))
    try:
        return _capped(data)
    except (TypeError, ValueError):     # a set, an object, NaN: nothing the model could read as JSON
        return failure("bad_result", f"{t.name} returned something that is not JSON — a bug in the tool, "
                                     "not your call; try another way or tell the user")


def result_text(result):
    """The tool message content for a result. Example: result_text({"ok": True, "data": 4}) -> '{"ok": true, "data": 4}'"""
    return json.dumps(result, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------- consent: one rule for every yes

# What counts as an explicit yes, after trimming spaces and case and one final . ! 。 or ！
YES_WORDS = frozenset({"y", "yes", "是", "是的", "好", "好的", "可以", "同意"})


def approved(answer):
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


# ---------------------------------------------------------------- teaching tools

CALC_MAX_CHARS, CALC_MAX_NODES, CALC_MAX_MAGNITUDE = 200, 60, 1e15
_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
              ast.Div: lambda a, b: a / b, ast.UAdd: lambda a: +a, ast.USub: lambda a: -a}


def _evaluate(node):
    """Evaluate a whitelisted expression tree; anything else is refused, never run."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        value = _OPERATORS[type(node.op)](_evaluate(node.operand))
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ToolError("division by zero: the expression divides by 0, which has no value — "
                            "check the divisor", "division_by_zero")
        value = _OPERATORS[type(node.op)](left, right)
    else:
        shown = ast.unparse(node)[:30] if not isinstance(node, ast.expr_context) else type(node).__name__
        raise ToolError(f"{shown!r} is not allowed: use numbers, + - * /, unary minus and parentheses "
                        "only (no names, calls, powers or attributes)", "bad_expression")
    if not math.isfinite(value) or abs(value) > CALC_MAX_MAGNITUDE:
        raise ToolError(f"a value in the expression exceeds {CALC_MAX_MAGNITUDE:g} — use smaller numbers",
                        "too_large")
    return value


@tool
def calculate(expression: str) -> dict:
    """Evaluate an arithmetic expression: numbers, + - * /, unary minus and parentheses.

    Args:
        expression: the arithmetic to evaluate, e.g. "14 * 9 / 5 + 32"
    """
    if len(expression) > CALC_MAX_CHARS:
        raise ToolError(f"the expression has {len(expression)} characters; the limit is {CALC_MAX_CHARS} "
                        "— split the calculation into steps", "too_long")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolError(f"{expression[:40]!r} is not an arithmetic expression — write e.g. '(3 + 4) * 2'",
                        "bad_expression") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > CALC_MAX_NODES:
        raise ToolError(f"the expression has {nodes} parts; the limit is {CALC_MAX_NODES} — split it "
                        "into steps", "too_long")
    return {"expression": expression, "result": _evaluate(tree)}


TEACHING_DATA_NOTE = "fixed teaching data, not a real forecast"
WEATHER = {                             # city -> (condition, temperature in °C); invented for lessons
    "Beijing": ("sunny", 22), "Cairo": ("clear", 31), "London": ("overcast", 12),
    "Nairobi": ("light rain", 19), "New York": ("windy", 16), "Paris": ("light rain", 14),
    "São Paulo": ("humid", 26), "Sydney": ("clear", 20), "Tokyo": ("cloudy", 18),
}


@tool
def get_weather(city: str) -> dict:
    """Current weather for a city, from fixed teaching data (not a real forecast).

    Args:
        city: the city name in English, e.g. "Paris"
    """
    found = next((c for c in WEATHER if c.casefold() == city.strip().casefold()), None)
    if found is None:
        raise ToolError(f"no teaching data for {city[:40]!r} ({TEACHING_DATA_NOTE}) — known cities: "
                        f"{', '.join(WEATHER)}", "unknown_city")
    condition, celsius = WEATHER[found]
    return {"city": found, "condition": condition, "temperature_c": celsius, "source": TEACHING_DATA_NOTE}


DOCS_DIR = REPO_ROOT / "data" / "docs"
DOC_PATTERN = re.compile(r"^handbook-[a-z0-9][a-z0-9-]*\.md$")  # the handbook: what the agent may read
MAX_DOC_BYTES = 16_000


def _doc_names(root):
    if not root.is_dir():
        return []
    with os.scandir(root) as entries:   # subtle: symlinks are never listed, so never readable
        return sorted(e.name for e in entries if DOC_PATTERN.match(e.name) and e.is_file(follow_symlinks=False))


def _refuse_name(name):
    """Why `name` can never be a handbook document (traversal, absolute, NUL, ...), or None."""
    if "\x00" in name:
        return "the name contains a NUL byte"
    if name.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", name):
        return "absolute paths are refused"
    if "/" in name or "\\" in name or ".." in name:
        return "paths are refused; give a bare file name"
    if not name.strip().lower().endswith(".md"):   # judge the extension the caller meant
        return "only Markdown (.md) documents can be read"
    return None


def _not_found(name, names):
    """Why `name` is not listed; names the listed one it differs from only in case or spacing."""
    near = next((n for n in names if n == name.strip().lower()), None)
    if near is None:
        return f"no document named {name!r} — call list_docs to see the names"
    extra = [what for what, differs in (("white space around it", name.strip() != name),
                                        ("upper-case letters", name.strip() != near)) if differs]
    return (f"no document named {name!r}: names are exact and this one has {' and '.join(extra)}"
            f" — use {near!r}")


def doc_tools(root=DOCS_DIR):
    """The list_docs and read_doc tools, confined to the handbook-*.md files directly inside `root`.

    Example: list_docs, read_doc = doc_tools(tmp_path)   # tests use a temporary folder
    """
    root = Path(root)

    @tool
    def list_docs() -> dict:
        """List the handbook documents you can read with read_doc."""
        return {"docs": _doc_names(root)}

    @tool
    def read_doc(doc: str) -> dict:
        """Read one handbook document by its name, as list_docs shows it.

        Args:
            doc: a document name from list_docs, e.g. "handbook-tools.md"
        """
        name = doc
        why = _refuse_name(name)
        if why:
            raise ToolError(f"refused {name[:60]!r}: {why} — call list_docs and use a name it shows", "refused")
        path = root / name
        if path.is_symlink():
            raise ToolError(f"refused {name!r}: it is a symbolic link — call list_docs", "refused")
        names = _doc_names(root)
        if name not in names:
            raise ToolError(_not_found(name, names), "not_found")
        raw = path.read_bytes()
        if len(raw) > MAX_DOC_BYTES:
            raise ToolError(f"{name} is {len(raw):,} bytes; the limit is {MAX_DOC_BYTES:,} — it cannot be "
                            "read whole", "too_large")
        if b"\x00" in raw:
            raise ToolError(f"{name} contains NUL bytes — it is not a text document", "refused")
        return {"name": name, "text": raw.decode("utf-8", errors="replace")}

    return list_docs, read_doc


list_docs, read_doc = doc_tools()


# ---------------------------------------------------------------- 02_tools hands-on task

def _task():
    from .check import Case, Task
    return Task("compare two JSON values the way JSON Schema's enum does (json_equal)", [
        Case("same string", ("celsius", "celsius"), True, "two equal strings are equal"),
        Case("1 and 1.0", (1, 1.0), True, "JSON has one number type: 1 and 1.0 are the same number"),
        Case("1 and true", (1, True), False, "a boolean is never a number, although Python says 1 == True"),
        Case("0 and false", (0, False), False, "check the JSON type first: bool before int"),
        Case("null and false", (None, False), False, "null equals only null"),
        Case("null and null", (None, None), True, "null equals null"),
        Case("arrays in order", ([1, "a"], [1.0, "a"]), True, "compare arrays item by item"),
        Case("arrays in another order", ([1, 2], [2, 1]), False, "array order matters"),
        Case("a boolean inside an array", ([1, True], [1, 1]), False, "apply the same rule inside arrays"),
        Case("objects ignore key order", ({"a": 1, "b": 2}, {"b": 2, "a": 1}), True,
             "objects are equal when they have the same keys with equal values"),
        Case("object with an extra key", ({"a": 1}, {"a": 1, "b": 2}), False, "the key sets must match"),
        Case("a boolean inside an object", ({"a": 0}, {"a": False}), False, "recurse into object values"),
        Case("string and number", ("1", 1), False, "different JSON types are never equal"),
    ], reference=json_equal, compare=lambda got, expected: got is expected)


TASK = _task()
