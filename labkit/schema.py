"""JSON arguments: parse the model's text, validate it against a schema, one canonical form.

Built in 02_tools (the first Build-it). `parse_arguments` refuses what JSON forbids (duplicate
keys, NaN, a non-object); `validate_arguments` checks a small stated subset of JSON Schema and
refuses the rest (`check_schema`); `check_strict` is what OpenAI strict mode accepts;
`normalize_arguments` and `canonical` give one value and one text per intent (05 repeats, 07 ids).
Ids and text that any store can hold are checked here too (`required_id`, `check_text`).
Deliberately left out: most of JSON Schema (production uses the jsonschema library).
"""

import json
import math
from collections.abc import Iterator
from typing import Any, TypeVar

from .errors import ModelBehaviorError, UserError

T = TypeVar("T")

MAX_ARGUMENT_CHARS = 20_000  # longer arguments are refused before parsing
MAX_DEPTH = 32  # nesting of arguments; deeper is refused, never a RecursionError
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


class ArgumentError(ModelBehaviorError):
    """The model's arguments are not valid JSON or do not match the schema. `kind` names which."""

    def __init__(self, message: str, kind: str = "invalid_arguments") -> None:
        super().__init__(message)
        self.kind = kind


class UnsupportedSchema(UserError):
    """A schema keyword validate_arguments does not check: refused, never silently accepted."""


# ---------------------------------------------------------------- parsing the model's JSON text


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ArgumentError(
                f"the key {key!r} appears twice — send each argument once", "invalid_json"
            )
        seen[key] = value
    return seen


def _finite(text):
    number = float(text)
    if not math.isfinite(number):  # json.loads turns 1e999 into inf without complaint
        raise ArgumentError(
            f"the number {text} is too large for JSON — send a finite number", "invalid_json"
        )
    return number


def _no_constant(name):
    raise ArgumentError(f"{name} is not valid JSON — send a finite number or null", "invalid_json")


def parse_arguments(text: str) -> dict:
    """Parse the model's arguments text into a dict; refuse what JSON forbids.

    Example: parse_arguments('{"city": "Paris"}')  ->  {"city": "Paris"}
    """
    if not isinstance(text, str):
        raise ArgumentError(
            f"arguments must be JSON text, got {type(text).__name__}", "invalid_json"
        )
    if len(text) > MAX_ARGUMENT_CHARS:
        raise ArgumentError(
            f"arguments are {len(text):,} characters; the limit is {MAX_ARGUMENT_CHARS:,} "
            "— send shorter arguments",
            "invalid_json",
        )
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_float=_finite, parse_constant=_no_constant
        )
        problem = None
    except json.JSONDecodeError as exc:
        problem = (
            f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}) — send one JSON object with double-quoted keys, e.g. "
            '{"city": "Paris"}'
        )
    except (ValueError, RecursionError) as exc:  # e.g. an integer of 5,000 digits, deep nesting
        problem = (
            f"arguments could not be read ({type(exc).__name__}) — send a small, flat JSON object"
        )
    if problem:  # raised out here: the decoder's error is not its __context__
        raise ArgumentError(problem, "invalid_json")
    if not isinstance(value, dict):
        raise ArgumentError(
            f"arguments must be a JSON object, got {json_type(value)} — wrap them: "
            '{"name": value}',
            "invalid_json",
        )
    return check_text(value, "arguments")  # "\\ud83d" is valid JSON, yet it is not text


# ---------------------------------------------------------------- text and ids anything can store


def printable(value: object) -> str:
    """Anything as text a message, trace or file can hold: repr for non-strings, bad text escaped.

    Example: printable(["a"])  ->  "['a']";  a lone surrogate comes back as the 6 characters \\udcff
    """
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


WHOLE_CHARACTERS = "use whole characters (an emoji as itself, or both its halves: \\ud83d\\ude00)"


def unencodable(value: object, path: str = "text") -> str | None:
    """Where `value` holds text UTF-8 cannot encode, in one line (what, not the fix); else None.

    A lone surrogate ("\\ud83d", half of a UTF-16 pair; or a byte that was not UTF-8, as Python
    decodes command-line arguments) is a valid Python string and valid JSON, but no UTF-8 file,
    database or HTTP body can hold it. Strings and keys are checked at any depth.
    Example: unencodable({"city": "\\ud83d"}, "arguments")  ->  "arguments.city holds '\\ud83d' ..."
    """
    stack = [(value, path)]
    while stack:  # a loop, not recursion: deep nesting cannot overflow
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (
                    f"{where} holds {ascii(item[exc.start : exc.end])} at character {exc.start}, "
                    "a lone surrogate UTF-8 cannot encode (half of a UTF-16 pair, or a byte "
                    "that was not UTF-8)"
                )
        elif isinstance(item, dict):
            for k, v in reversed(item.items()):  # popped in order: a key, then its value
                stack += [(v, f"{where}.{printable(k)}"), (k, f"a key of {where}")]
        elif isinstance(item, (list, tuple)):
            stack += reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)])
    return None


def check_text(value: T, path: str = "arguments", error: type[Exception] | None = None) -> T:
    """`value` if all its text is UTF-8; else ArgumentError "invalid_text", or `error` if given.

    ArgumentError is the model's to fix (its arguments); pass error=UserError for the caller's text.
    Example: check_text({"city": "\\ud83d"})   # ArgumentError: arguments.city holds '\\ud83d' ...
    """
    problem = unencodable(value, path)
    if problem:
        message = f"{problem} — {WHOLE_CHARACTERS}"
        raise error(message) if error else ArgumentError(message, "invalid_text")
    return value


def required_id(value: object, name: str, how: str) -> str:
    """`value` when it is a usable id: a string, not blank, no spaces at its ends, all UTF-8 text.

    Anything else (None, 3, "", "  ", " ana", "\\udcff") raises UserError naming `name`, then `how`
    (how to make a proper one). Ids, tenants, principals and scopes all pass through here.
    Example: required_id("ana", "tenant", "pass tenant='ana'")  ->  "ana"
    """
    what: str | None
    if value is None:
        what = f"{name} is missing"
    elif not isinstance(value, str):
        what = f"{name} must be a string, got {type(value).__name__} {printable(value)[:40]}"
    elif not value.strip():
        what = f"{name} is blank ({value!r})"
    elif value != value.strip():  # " ana" and "ana" would be two ids nobody tells apart
        what = f"{name} {value!r} has spaces at its ends"
    else:
        what = unencodable(value, name)
        if what is None:
            return value
    raise UserError(f"{what} — {how}")


# ---------------------------------------------------------------- validating against a schema

KEYWORDS = ("type", "required", "properties", "additionalProperties", "enum", "items")
ANNOTATIONS = ("description", "title", "$comment", "$schema")  # no effect on validity
JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")


def json_type(value: object) -> str:
    """The JSON type name of a parsed value ("integer" for 3, "boolean" for True, never both).

    Example: json_type(True)  ->  "boolean"
    """
    if value is None:
        return "null"
    if isinstance(value, bool):  # subtle: before int, as True is an int in Python
        return "boolean"
    names = {int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return next((n for cls, n in names.items() if isinstance(value, cls)), type(value).__name__)


def is_number(value: object) -> bool:
    """Whether `value` is a JSON number: an int or a float, never a bool (True is an int in Python).

    Example: is_number(True)  ->  False
    """
    return json_type(value) in ("integer", "number")


def _types(schema):
    """The schema's type names as a list: "string" is ["string"], no type is []."""
    types = schema.get("type", [])
    return [types] if isinstance(types, str) else types


def _has_type(value, name):
    kind = json_type(value)
    if name == "integer":  # JSON Schema: 1.0 is an integer, True is not
        return kind == "integer" or (kind == "number" and value.is_integer())
    return kind == name or (name == "number" and kind == "integer")


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it: 1 == 1.0, but 1 != true and 0 != false (unlike Python).

    Example: json_equal(1, True)  ->  False
    """
    ka, kb = json_type(a), json_type(b)
    if {ka, kb} <= {"integer", "number"}:
        return a == b
    if ka != kb:
        return False
    if ka == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if ka == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def check_schema(schema: object, path: str = "schema") -> None:
    """Raise UnsupportedSchema unless validate_arguments checks every keyword, at every depth.

    Example: check_schema({"type": "string", "maxLength": 3})   # raises: maxLength is not checked
    """
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise UnsupportedSchema(f"{path} is {schema!r}, not a schema — use a dict (or true/false)")
    for key in schema:
        if key not in KEYWORDS + ANNOTATIONS:
            raise UnsupportedSchema(
                f"{path} uses {key!r}, which validate_arguments does not check — remove "
                f"it, or validate with the jsonschema library (checked here: "
                f"{', '.join(KEYWORDS)})"
            )
    if schema.get("$schema", DRAFT_2020_12).rstrip("#") != DRAFT_2020_12:
        raise UnsupportedSchema(
            f"{path} declares $schema {schema['$schema']!r} — only draft 2020-12 is checked"
        )
    _check_values(schema, path)
    for name, sub in schema.get("properties", {}).items():
        check_schema(sub, f"{path}.properties.{name}")
    for key in ("additionalProperties", "items"):
        if key in schema:
            check_schema(schema[key], f"{path}.{key}")


def _check_values(schema, path):
    """Each keyword holds what it should: type names, property names, values, schemas."""
    types = _types(schema)
    if not isinstance(types, list) or any(t not in JSON_TYPES for t in types):
        raise UnsupportedSchema(
            f"{path}.type is {schema['type']!r} — use one of {', '.join(JSON_TYPES)}"
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UnsupportedSchema(f"{path}.required must be a list of property names")
    if not isinstance(schema.get("enum", []), list):
        raise UnsupportedSchema(f"{path}.enum must be a list of allowed values")
    if not isinstance(schema.get("properties", {}), dict):
        raise UnsupportedSchema(f"{path}.properties must map names to schemas")


def _check_json(value, path, depth=0):
    """Refuse Python values JSON cannot hold (NaN, tuples, sets, non-string keys, deep nesting)."""
    if depth > MAX_DEPTH:
        raise ArgumentError(
            f"{path} is nested more than {MAX_DEPTH} levels deep — send flatter arguments"
        )
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


def violations(value: Any, schema: dict[str, Any] | bool, path: str) -> Iterator[str]:
    """Yield one line per way `value` breaks `schema` (already checked by check_schema).

    Example: list(violations(3, {"type": "string"}, "x"))  ->  ["x should be string, got integer 3"]
    """
    if schema is True:
        return
    if schema is False:
        yield f"{path} is not allowed here — remove it"
        return
    wrong = _wrong_type(value, schema, path)
    if wrong:
        yield wrong
        return  # other keywords would only repeat the same mistake
    if "enum" in schema and not any(json_equal(value, e) for e in schema["enum"]):
        yield f"{path} is {_show(value)}; allowed: {', '.join(map(_show, schema['enum']))}"
    if isinstance(value, dict):
        yield from _object_problems(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from violations(item, schema["items"], f"{path}[{i}]")


def _wrong_type(value, schema, path):
    """The line saying `value` is of none of the schema's types, else None."""
    types = _types(schema)
    if "type" not in schema or any(_has_type(value, t) for t in types):
        return None
    got = "null" if value is None else f"{json_type(value)} {_show(value)}"  # `integer 3`
    return f"{path} should be {' or '.join(types)}, got {got}"


def _object_problems(value, schema, path):
    """Required properties present; each one valid by its schema, else additionalProperties."""
    for name in schema.get("required", []):
        if name not in value:
            yield f"{path} is missing the required property {name!r} — add it"
    properties = schema.get("properties", {})
    for name, item in value.items():
        if name in properties:
            yield from violations(item, properties[name], f"{path}.{name}")
        elif schema.get("additionalProperties") is False:
            yield (
                f"{path} has an unexpected property {name!r} — allowed: "
                f"{', '.join(properties) or 'none'}"
            )
        elif "additionalProperties" in schema:
            yield from violations(item, schema["additionalProperties"], f"{path}.{name}")


def validate_arguments(arguments: Any, schema: dict[str, Any], path: str = "arguments") -> None:
    """Check a parsed JSON value against a schema of the supported subset; raise on problems.

    Raises UnsupportedSchema for a keyword outside the subset, ArgumentError (listing up to three
    problems, each with where and how to fix) for an invalid value.
    Example: city = {"type": "object", "properties": {"city": {"type": "string"}}}
             validate_arguments({"city": 3}, city)
             # ArgumentError: arguments.city should be string, got integer 3
    """
    check_schema(schema)
    _check_json(arguments, path)
    problems = list(violations(arguments, schema, path))
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ArgumentError("; ".join(problems[:3]) + more)


def normalize_arguments(value: Any, schema: dict[str, Any] | None) -> Any:
    """Valid arguments in one form: a whole-number float becomes an int where that is the type.

    JSON does not tell 30 from 30.0, and validation accepts both as an integer (as JSON Schema
    does): the tool and any operation id derived from the arguments (07_runtime) must see one value.
    Example: whole = {"type": "object", "properties": {"n": {"type": "integer"}}}
             normalize_arguments({"n": 2.0}, whole)  ->  {"n": 2}
    """
    if not isinstance(schema, dict):
        return value
    types = _types(schema)
    whole = isinstance(value, float) and value.is_integer()
    if whole and "integer" in types and "number" not in types:
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


def canonical(arguments: Any) -> str:
    """One text per JSON value: sorted keys, no spaces, 30.0 written as 30 (05 repeats, 07 ids).

    subtle: validation accepts 30.0 as an integer (JSON Schema does), so if 30 and 30.0 were two
    texts, one intent would derive two operation_ids (07_runtime) and run twice. Numbers are folded
    here, without a schema, so an id derived from the raw arguments is the same id (as RFC 8785
    does). Text UTF-8 cannot encode has no such text: ArgumentError "invalid_text" (check_text).
    Example: canonical({"b": 1.0, "a": 2})  ->  '{"a":2,"b":1}'
    """
    check_text(arguments, "the value")
    return json.dumps(
        _one_number(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def check_strict(schema: dict[str, Any] | bool, path: str = "parameters") -> None:
    """Raise UserError unless `schema` is what OpenAI strict mode accepts, at every depth.

    Strict mode wants every object closed (additionalProperties: false) and every property required.
    Example: check_strict({"type": "object", "properties": {}, "required": [],
                           "additionalProperties": False})
    """
    check_schema(schema, path)
    if isinstance(schema, bool):
        raise UserError(f"{path} is {schema!r} — strict mode needs a typed schema")
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            raise UserError(f'{path} needs "additionalProperties": false in strict mode — add it')
        if sorted(schema.get("required", [])) != sorted(properties):
            raise UserError(
                f"{path}.required must list every property in strict mode "
                f"({', '.join(properties) or 'none'}) — make optional ones nullable instead"
            )
        for name, sub in properties.items():
            check_strict(sub, f"{path}.properties.{name}")
    if "items" in schema:
        check_strict(schema["items"], f"{path}.items")
