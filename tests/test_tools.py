"""labkit.tools: validation against jsonschema, strict schemas, the registry, execute, teaching tools."""
import json
import math
import random
import re
import typing
from pathlib import Path
from typing import Literal

import jsonschema
import pytest

import labkit
from labkit.errors import ModelBehaviorError, ToolError, UserError
from labkit.live import ChatModel, ResponsesModel
from labkit.models import ToolCall, user
from labkit.tools import (MAX_RESULT_CHARS, RISKS, ArgumentError, Tool, ToolRegistry, UnsupportedSchema,
                          calculate, canonical, check_schema, doc_tools, execute, get_weather,
                          json_equal, json_type, list_docs, parse_arguments, read_doc, result_text,
                          to_api, tool, validate_arguments)

SUITE = json.loads((Path(__file__).parent / "data" / "json_schema_suite_subset.json").read_text())


def ours(schema, instance):
    """True/False from validate_arguments (UnsupportedSchema propagates: it must never happen here)."""
    try:
        validate_arguments(instance, schema)
        return True
    except ArgumentError:
        return False


def theirs(schema, instance):
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


# ---------------------------------------------------------------- the official test suite subset

SUITE_CASES = [pytest.param(g["schema"], t["data"], t["valid"], id=f'{g["file"]}: {g["description"]}: {t["description"]}')
               for g in SUITE["groups"] for t in g["tests"]]


def test_the_suite_subset_is_large_enough():
    assert len(SUITE_CASES) >= 170


@pytest.mark.parametrize("schema, instance, valid", SUITE_CASES)
def test_official_suite_subset_agrees(schema, instance, valid):
    assert ours(schema, instance) is valid
    assert theirs(schema, instance) is valid


# ---------------------------------------------------------------- hand-written cases, side by side

OBJ = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
       "required": ["city"], "additionalProperties": False}
NESTED = {"type": "object", "properties": {
    "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
              "required": ["x", "y"], "additionalProperties": False},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    "mode": {"type": ["string", "null"], "enum": ["fast", "slow", None]}},
    "required": ["point"], "additionalProperties": False}
SCHEMAS = [
    {}, True, False, {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "null"}, {"type": "array"}, {"type": "object"}, {"type": ["integer", "string"]},
    {"type": ["number", "null"]}, {"enum": [1, "1", None]}, {"enum": [True]}, {"enum": [0]},
    {"enum": [[1, 2], {"a": 1}]}, {"enum": [{"a": False}]}, {"type": "integer", "enum": [1, 2, 3]},
    {"required": ["a"]}, {"properties": {"a": {"type": "string"}}}, {"additionalProperties": False},
    {"additionalProperties": {"type": "integer"}}, {"properties": {"a": False}},
    {"items": {"type": "integer"}}, {"items": False}, {"type": "array", "items": {"type": "array", "items": True}},
    OBJ, NESTED, {"description": "annotations do nothing", "title": "t", "type": "string"},
]
INSTANCES = [
    None, True, False, 0, 1, -1, 1.0, 1.5, -0.0, 10**20, 1e300, "", "1", "city", [], [1], [1, 2], [True],
    ["a", "b"], ["c"], [[1]], {}, {"a": 1}, {"a": "x"}, {"a": False}, {"city": "Paris"},
    {"city": "Paris", "days": 3}, {"city": "Paris", "days": 3.0}, {"city": "Paris", "days": True},
    {"city": 3}, {"days": 3}, {"city": "Paris", "extra": 1}, {"point": {"x": 1, "y": 2.5}},
    {"point": {"x": 1}}, {"point": {"x": "1", "y": 2}}, {"point": {"x": 1, "y": 2}, "tags": ["a", "c"]},
    {"point": {"x": 1, "y": 2}, "mode": None}, {"point": {"x": 1, "y": 2}, "mode": "medium"},
    {"point": {"x": 1, "y": 2, "z": 3}},
]


def test_hand_written_cases_agree_with_jsonschema():
    pairs = [(s, i) for s in SCHEMAS for i in INSTANCES]
    disagreements = [(s, i) for s, i in pairs if ours(s, i) != theirs(s, i)]
    assert len(pairs) > 1000 and disagreements == []


JSON_LEAVES = [None, True, False, 0, 1, -7, 2.5, 1.0, "", "a", "b", "city"]


def random_value(rng, depth=0):
    if depth > 2 or rng.random() < 0.5:
        return rng.choice(JSON_LEAVES)
    if rng.random() < 0.5:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("abc"): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def random_schema(rng, depth=0):
    if rng.random() < 0.08:
        return rng.choice([True, False])
    schema = {}
    if rng.random() < 0.6:
        types = rng.sample(["string", "integer", "number", "boolean", "object", "array", "null"], rng.randint(1, 2))
        schema["type"] = types[0] if len(types) == 1 else types
    if rng.random() < 0.25:
        schema["enum"] = [random_value(rng, 2) for _ in range(rng.randint(1, 3))]
    if depth < 2 and rng.random() < 0.4:
        schema["properties"] = {k: random_schema(rng, depth + 1) for k in rng.sample("abc", rng.randint(1, 2))}
    if rng.random() < 0.3:
        schema["required"] = rng.sample("abc", rng.randint(1, 2))
    if rng.random() < 0.3:
        schema["additionalProperties"] = False if rng.random() < 0.6 else random_schema(rng, 2)
    if depth < 2 and rng.random() < 0.3:
        schema["items"] = random_schema(rng, depth + 1)
    return schema


def test_seeded_random_schemas_and_values_agree_with_jsonschema():
    rng = random.Random(20261129)            # fixed seed: the same 3,000 pairs on every run
    pairs = [(random_schema(rng), random_value(rng)) for _ in range(3000)]
    disagreements = [(s, i) for s, i in pairs if ours(s, i) != theirs(s, i)]
    assert disagreements == []
    assert 0.2 < sum(ours(s, i) for s, i in pairs) / len(pairs) < 0.8     # both outcomes well covered


# ---------------------------------------------------------------- where the two differ, on purpose

@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0}, {"pattern": "^a"},
    {"format": "email"}, {"const": 1}, {"$ref": "#/$defs/x"}, {"allOf": [{}]}, {"anyOf": [{}]},
    {"oneOf": [{}]}, {"not": {}}, {"prefixItems": [{}]}, {"patternProperties": {"a": {}}},
    {"minItems": 1}, {"uniqueItems": True}, {"default": 1, "type": "string"}, {"maxLenght": 3},
    {"type": "object", "properties": {"deep": {"type": "array", "items": {"type": "string", "minLength": 1}}}},
    {"type": "object", "additionalProperties": {"exclusiveMaximum": 3}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
    {"type": "float"}, {"type": ["string", 3]}, {"required": "city"}, {"enum": "a"}, {"properties": []}, [],
])
def test_keywords_outside_the_subset_are_refused_even_when_the_value_never_reaches_them(schema):
    with pytest.raises(UnsupportedSchema):
        validate_arguments({}, schema)          # {} has no "deep" property: a lazy validator would pass it


def test_unsupported_message_says_what_to_do():
    with pytest.raises(UnsupportedSchema, match=r"schema.properties.deep.items uses 'minLength'.*jsonschema"):
        check_schema({"properties": {"deep": {"items": {"minLength": 1}}}})


def test_intentional_differences_from_jsonschema():
    # 1. A keyword outside the subset: jsonschema checks it (or ignores an unknown one); we refuse.
    assert theirs({"maxLenght": 3}, "abcdef") is True          # a typo, silently ignored by jsonschema
    with pytest.raises(UnsupportedSchema):
        validate_arguments("abcdef", {"maxLenght": 3})
    assert theirs({"format": "email"}, "not an email") is True  # format is only an annotation there
    # 2. Python values JSON cannot hold: jsonschema accepts NaN as a number; we say it is not JSON.
    assert theirs({"type": "number"}, math.nan) is True
    with pytest.raises(ArgumentError, match="JSON cannot hold"):
        validate_arguments(math.nan, {"type": "number"})
    assert theirs({}, (1, 2)) is True
    with pytest.raises(ArgumentError, match="not a JSON value"):
        validate_arguments((1, 2), {})


def test_bool_and_integer_and_enum_equality_follow_json_not_python():
    # Python's own rules would get all three wrong; jsonschema and validate_arguments agree on JSON's.
    assert isinstance(True, int) and True in [1] and 0 == False  # noqa: E712  (the trap)
    for schema, instance in [({"type": "integer"}, True), ({"enum": [1]}, True), ({"enum": [True]}, 1),
                             ({"enum": [0]}, False), ({"enum": [[1]]}, [True]), ({"type": "number"}, False)]:
        assert ours(schema, instance) is False and theirs(schema, instance) is False
    assert ours({"type": "integer"}, 1.0) and theirs({"type": "integer"}, 1.0)   # 1.0 is an integer in JSON
    assert json_equal(1, 1.0) and not json_equal(1, True) and json_type(True) == "boolean"


@pytest.mark.parametrize("value, got", [(None, "got null"), ("1", 'got string "1"'),
                                        (True, "got boolean true"), ([2], "got array [2]")])
def test_a_wrong_type_names_the_type_and_then_the_value_once(value, got):
    with pytest.raises(ArgumentError) as info:
        validate_arguments({"n": value},
                           {"type": "object", "properties": {"n": {"type": "integer"}}})
    assert str(info.value) == f"arguments.n should be integer, {got}"


def test_error_messages_say_where_and_how_to_fix():
    with pytest.raises(ArgumentError) as info:
        validate_arguments({"point": {"x": "1"}, "tags": ["a", "c"], "zzz": 1}, NESTED)
    message = str(info.value)
    assert "arguments.point.x should be number, got string \"1\"" in message
    assert "missing the required property 'y'" in message
    assert "(and 1 more)" in message and isinstance(info.value, ModelBehaviorError)


def test_deep_values_are_refused_not_a_recursion_error():
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ArgumentError, match="nested"):
        validate_arguments(deep, {})


# ---------------------------------------------------------------- parsing the model's text

@pytest.mark.parametrize("text, needle", [
    ('{"city": "Paris"', "not valid JSON"), ("{'city': 'Paris'}", "double-quoted"), ("", "not valid JSON"),
    ('```json\n{"city": "Paris"}\n```', "not valid JSON"), ('{"x": NaN}', "NaN is not valid JSON"),
    ('{"x": Infinity}', "Infinity"), ('{"x": -Infinity}', "-Infinity"), ('{"x": 1e999}', "too large"),
    ('{"a": 1, "a": 2}', "appears twice"), ('{"o": {"a": 1, "a": 1}}', "appears twice"),
    ('["Paris"]', "must be a JSON object"), ('"Paris"', "must be a JSON object"), ("null", "got null"),
    ('{"n": ' + "1" * 5000 + "}", "could not be read"), ("[" * 100_000, "limit is"),
    ("[" * 5000 + "]" * 5000, "could not be read"), (None, "must be JSON text"),
])
def test_parse_arguments_refuses_with_a_message_the_model_can_act_on(text, needle):
    with pytest.raises(ArgumentError, match=needle.replace("(", r"\(")) as info:
        parse_arguments(text)
    assert info.value.kind == "invalid_json"


LONE_SURROGATES = [('{"city": "\\ud83d"}', "arguments.city"),            # valid JSON: half of 😀
                   ('{"city": "Par\udcffis"}', "arguments.city"),         # a byte, not UTF-8
                   ('{"\\udfff": "Paris"}', "a key of arguments"),
                   ('{"days": [1, {"note": "\\ud800"}]}', "arguments.days[1].note")]


@pytest.mark.parametrize("text, where", LONE_SURROGATES)
def test_parse_arguments_refuses_text_utf8_cannot_encode_and_says_where(text, where):
    with pytest.raises(ArgumentError, match=rf"^{re.escape(where)} holds .*whole characters") as e:
        parse_arguments(text)
    assert e.value.kind == "invalid_text"
    str(e.value).encode("utf-8")                        # the message is text the model can read


@pytest.mark.parametrize("text, where", LONE_SURROGATES)
def test_execute_returns_a_result_for_text_utf8_cannot_encode(text, where):
    log = []
    result = execute(ToolCall("call_1", "add", text), spy_registry(log))
    assert (result["ok"], result["error"]) == (False, "invalid_text") and where in result["message"]
    assert log == [] and result_text(result).encode("utf-8")


def test_a_whole_emoji_is_text_and_canonical_refuses_half_of_one():
    assert parse_arguments('{"city": "\\ud83d\\ude00"}') == {"city": "😀"}
    assert canonical({"city": "😀"}) == '{"city":"😀"}'
    with pytest.raises(ArgumentError, match="UTF-8 cannot encode") as info:
        canonical({"city": "\ud83d"})
    assert info.value.kind == "invalid_text"


def test_parse_arguments_accepts_plain_json():
    assert parse_arguments(' {"city": "São Paulo", "days": 3, "x": 1.5e3} ') == {"city": "São Paulo", "days": 3,
                                                                                  "x": 1500.0}


# ---------------------------------------------------------------- tools, the decorator, the registry

def test_decorator_derives_a_strict_schema_from_hints_and_docstring():
    @tool(risk="medium")
    def book(city: str, nights: int, kind: Literal["hotel", "hostel"], guests: list[str],
             note: str | None = None) -> dict:
        """Book a room.

        Args:
            city: where to stay
            nights (int): how many nights
        """
        return {"city": city}

    assert book.name == "book" and book.description == "Book a room." and book.risk == "medium"
    assert book.parameters == {"type": "object", "properties": {
        "city": {"type": "string", "description": "where to stay"},
        "nights": {"type": "integer", "description": "how many nights"},
        "kind": {"type": "string", "enum": ["hotel", "hostel"]},
        "guests": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]}},
        "required": ["city", "nights", "kind", "guests", "note"], "additionalProperties": False}
    jsonschema.Draft202012Validator.check_schema(book.parameters)


def no_hint(x):
    """Doc."""


def dict_hint(x: dict):
    """Doc."""


def with_default(x: int = 3):
    """Doc."""


def star_args(*xs: int):
    """Doc."""


def no_doc(x: int):
    pass


def tuple_hint(x: tuple[int, int]):
    """Doc."""


def union_hint(x: int | str):
    """Doc."""


def any_hint(x: typing.Any):
    """Doc."""


@pytest.mark.parametrize("fn, needle", [
    (no_hint, "no type hint"), (dict_hint, "cannot express"), (with_default, "has a default"),
    (star_args, r"\*args"), (no_doc, "no docstring"), (tuple_hint, "cannot express"),
    (union_hint, "cannot express"), (any_hint, "cannot express"),
])
def test_decorator_refuses_to_guess(fn, needle):
    with pytest.raises(UserError, match=needle):
        tool(fn)


def test_literal_none_is_allowed_in_the_enum_when_nullable():
    @tool
    def f(unit: Literal["c", "f"] | None = None):
        """Doc."""
    assert f.parameters["properties"]["unit"] == {"type": ["string", "null"], "enum": ["c", "f", None]}
    assert ours(f.parameters, {"unit": None}) and not ours(f.parameters, {"unit": "k"})


@pytest.mark.parametrize("kwargs, needle", [
    (dict(name="bad name"), "not allowed"), (dict(risk="extreme"), "risk"),
    (dict(parameters={"type": "string"}), "object"), (dict(parameters={"type": "object", "properties": {}}),
                                                       "additionalProperties"),
    (dict(parameters={"type": "object", "properties": {"a": {"type": "string"}}, "required": [],
                      "additionalProperties": False}), "every property"),
    (dict(parameters={"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}},
                      "required": ["a"], "additionalProperties": False}), "pattern"),
])
def test_tool_refuses_schemas_strict_mode_rejects(kwargs, needle):
    fields = dict(name="t", description="d", parameters={"type": "object", "properties": {}, "required": [],
                                                         "additionalProperties": False}, fn=lambda: 1)
    with pytest.raises(UserError, match=needle):
        Tool(**{**fields, **kwargs})


def test_registry_accepts_tools_and_plain_functions():
    def shout(text: str) -> str:
        """Uppercase the text."""
        return text.upper()

    registry = ToolRegistry([calculate, shout])
    assert registry.names() == ["calculate", "shout"] and "shout" in registry and len(registry) == 2
    assert registry.get("shout")(text="hi") == "HI" and [t.name for t in registry] == registry.names()
    with pytest.raises(UserError, match="registered: calculate, shout"):
        registry.get("nope")
    with pytest.raises(UserError, match="two tools are named"):
        ToolRegistry([calculate, calculate])
    assert RISKS == ("low", "medium", "high")


def test_specs_match_what_the_live_adapters_send():
    registry = ToolRegistry([calculate, get_weather])
    key = "sk-test-" + "0" * 24
    for cls, api in ((ResponsesModel, "responses"), (ChatModel, "chat")):
        body = cls("gpt-test", api_key=key).request_preview([user("hi")], list(registry))
        assert body["tools"] == registry.specs(api)
    assert to_api(calculate, "responses")["strict"] is True
    with pytest.raises(UserError):
        to_api(calculate, "soap")


# ---------------------------------------------------------------- execute

def spy_registry(log):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        log.append((a, b))
        return a + b

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        if reason == "permission":
            raise PermissionError("the user did not approve")
        if reason == "tool":
            raise ToolError("no such record — check the id", "not_found")
        if reason == "key":
            raise RuntimeError("auth failed for sk-abcdefghijklmnopqrstuvwxyz123456")
        if reason == "json":
            return {1, 2}
        if reason == "nan":
            return float("nan")
        if reason == "big":
            return "x" * 10_000
        raise KeyError(reason)

    return ToolRegistry([add, explode])


@pytest.mark.parametrize("name, arguments, kind", [
    ("add", '{"a": 1, "b": "2"}', "invalid_arguments"), ("add", '{"a": 1}', "invalid_arguments"),
    ("add", '{"a": 1, "b": 2, "c": 3}', "invalid_arguments"), ("add", '{"a": true, "b": 2}', "invalid_arguments"),
    ("add", '{"a": 1, "b": 2', "invalid_json"), ("add", '{"a": NaN, "b": 2}', "invalid_json"),
    ("subtract", '{"a": 1, "b": 2}', "unknown_tool"), ("explode", '{"reason": "permission"}', "permission_denied"),
    ("explode", '{"reason": "tool"}', "not_found"), ("explode", '{"reason": "other"}', "tool_crashed"),
    ("explode", '{"reason": "json"}', "bad_result"), ("explode", '{"reason": "nan"}', "bad_result"),
])
def test_execute_turns_every_failure_into_a_result(name, arguments, kind):
    log = []
    result = execute(ToolCall("call_1", name, arguments), spy_registry(log))
    assert result["ok"] is False and result["error"] == kind and result["message"]
    assert log == []                            # the function never ran on bad arguments
    json.loads(result_text(result))


def test_execute_runs_valid_calls_and_respects_the_whitelist():
    log = []
    registry = spy_registry(log)
    assert execute(ToolCall("c", "add", '{"a": 2, "b": 3}'), registry) == {"ok": True, "data": 5}
    refused = execute(ToolCall("c", "add", '{"a": 2, "b": 3}'), registry, allowed=["explode"])
    assert refused["error"] == "not_allowed" and "use one of: explode" in refused["message"]
    assert log == [(2, 3)]


def test_execute_caps_long_results_visibly_and_redacts_keys():
    registry = spy_registry([])
    big = execute(ToolCall("c", "explode", '{"reason": "big"}'), registry)
    assert big["ok"] and big["truncated"] and len(big["data"]) < MAX_RESULT_CHARS + 80
    assert big["data"].endswith("characters]") and "truncated: showing 4,000 of 10,002" in big["data"]
    crashed = execute(ToolCall("c", "explode", '{"reason": "key"}'), registry)
    assert "abcdefghijklmnop" not in crashed["message"] and "RuntimeError" in crashed["message"]


def test_seeded_random_payloads_never_escape_and_never_reach_the_function_unvalidated():
    log = []
    registry = spy_registry(log)
    rng = random.Random(7)
    pieces = ['{', '}', '"a"', '"b"', ':', ',', '1', '-2', '2.5', 'true', 'null', '"x"', '[', ']', 'NaN', ' ']
    payloads = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(1500)]
    payloads += [json.dumps({"a": random_value(rng), "b": random_value(rng)}) for _ in range(1500)]
    payloads += [json.dumps({"a": rng.randint(-9, 9), "b": rng.choice([1, 2.0, 2.5, True, "3", None])})
                 for _ in range(500)]
    for payload in payloads:
        result = execute(ToolCall("c", "add", payload), registry)
        assert set(result) >= {"ok"} and (result["ok"] or result["error"] in ("invalid_json", "invalid_arguments"))
    # every call that ran had arguments valid by an independent judge (1.0 is an integer in JSON)
    schema = registry.get("add").parameters
    assert len(log) > 100 and all(theirs(schema, {"a": a, "b": b}) for a, b in log)


# ---------------------------------------------------------------- calculate

@pytest.mark.parametrize("expression, expected", [
    ("2 + 2", 4), ("14 * 9 / 5 + 32", 57.2), ("-(3 - 5) * 2", 4), ("((1))", 1), ("1_000 / 8", 125.0),
    ("+7", 7), ("0.1 + 0.2", 0.30000000000000004), ("999999999999999", 999999999999999),
])
def test_calculate(expression, expected):
    assert calculate(expression=expression) == {"expression": expression, "result": expected}


def test_division_by_zero_is_explained():
    with pytest.raises(ToolError, match="divides by 0") as info:
        calculate(expression="1 / (2 - 2)")
    assert info.value.kind == "division_by_zero"


CALC_ESCAPES = [
    "__import__('os').system('touch CANARY')", "open('CANARY', 'w')", "(1).__class__", "().__class__.__bases__",
    "[].__class__.__mro__", "globals()", "locals()", "exec('1')", "eval('1')", "x", "True", "None", "'a' * 3",
    "2 ** 10", "9 ** 9 ** 9", "10 ** 100", "1e16 * 10", "99999999 * 99999999", "1e999", "[1, 2]", "{1: 2}",
    "(lambda: 1)()", "1 if 1 else 2", "1 < 2", "1 and 2", "7 % 3", "7 // 2", "1 << 40", "~1", "1 & 1",
    "f'{1}'", "a := 1", "(" * 150 + "1" + ")" * 150, "1 + " * 40 + "1", "1" * 300, "-" * 190 + "1",
    "import os", "1; 2", "lambda: 1", "print(1)", "𝟏 + 1", "1j * 2", "\x00", "", "   ",
]


@pytest.mark.parametrize("expression", CALC_ESCAPES)
def test_calculate_escape_attempts_are_all_refused(expression, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = execute(ToolCall("c", "calculate", json.dumps({"expression": expression})), ToolRegistry([calculate]))
    assert result["ok"] is False and result["error"] in ("bad_expression", "too_long", "too_large")
    assert not (tmp_path / "CANARY").exists()


def test_there_are_enough_escape_attempts():
    assert len(CALC_ESCAPES) >= 25 and len(PATH_ESCAPES) >= 25


# ---------------------------------------------------------------- get_weather

def test_get_weather_says_it_is_teaching_data_in_every_result():
    registry = ToolRegistry([get_weather])
    for city in ["Paris", "paris", " Tokyo ", "São Paulo", "Atlantis", "x" * 500]:
        result = execute(ToolCall("c", "get_weather", json.dumps({"city": city})), registry)
        assert "fixed teaching data" in json.dumps(result, ensure_ascii=False)
    assert get_weather(city="PARIS")["temperature_c"] == 14


# ---------------------------------------------------------------- list_docs / read_doc

SECRET = "TOP-SECRET-CONTENT"


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (tmp_path / "secret.md").write_text(SECRET)
    (tmp_path / "handbook-outside.md").write_text(SECRET)
    (root / "handbook-tools.md").write_text("# Tools\nUse them well.\n")
    (root / "handbook-big.md").write_text("x" * 20_000)
    (root / "handbook-nul.md").write_bytes(b"abc\x00def")
    (root / "handbook-notes.txt").write_text(SECRET)
    (root / "other.md").write_text(SECRET)
    (root / "handbook-link.md").symlink_to(tmp_path / "secret.md")
    (root / "handbook-dir.md").mkdir()
    (root / "handbook-dir.md" / "x.md").write_text(SECRET)
    return ToolRegistry(doc_tools(root))


PATH_ESCAPES = [
    "../secret.md", "../../etc/passwd", "/etc/passwd", "/tmp/secret.md", "..", ".", "",
    "handbook-tools.md/../../secret.md", "./handbook-tools.md/../../secret.md", "..\\secret.md",
    "C:\\Windows\\win.ini", "c:secret.md", "~/secret.md", "~root/.bashrc", "handbook-tools.md\x00.txt",
    "%2e%2e%2fsecret.md", "..%2fsecret.md", "handbook-link.md", "handbook-dir.md", "handbook-dir.md/x.md",
    "handbook-notes.txt", "other.md", "handbook-big.md", "handbook-nul.md", "secret.md", "HANDBOOK-TOOLS.MD",
    "handbook-outside.md", "docs/handbook-tools.md", "handbook-tools.md ", " handbook-tools.md",
    "handbook-tools.md/", "／etc／passwd", "handbook-tools.md\n../secret.md", "\\\\server\\share\\x.md",
    "file:///etc/passwd", "handbook-../secret.md",
]


@pytest.mark.parametrize("name", PATH_ESCAPES)
def test_read_doc_escape_attempts_are_all_refused(docs, name):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["ok"] is False and SECRET not in json.dumps(result)
    assert result["error"] in ("refused", "not_found", "too_large")


def test_read_doc_reads_listed_docs_and_says_what_to_do_when_missing(docs):
    listed = execute(ToolCall("c", "list_docs", "{}"), docs)
    assert listed == {"ok": True, "data": {"docs": ["handbook-big.md", "handbook-nul.md", "handbook-tools.md"]}}
    ok = execute(ToolCall("c", "read_doc", '{"doc": "handbook-tools.md"}'), docs)
    assert ok == {"ok": True, "data": {"name": "handbook-tools.md", "text": "# Tools\nUse them well.\n"}}
    missing = execute(ToolCall("c", "read_doc", '{"doc": "handbook-retries.md"}'), docs)
    assert missing["error"] == "not_found" and "call list_docs" in missing["message"]


@pytest.mark.parametrize("name, differs", [
    ("handbook-tools.md ", "white space around it"),
    ("\thandbook-tools.md\n", "white space around it"),
    ("HANDBOOK-TOOLS.MD", "upper-case letters"), ("handbook-tools.MD", "upper-case letters"),
    (" Handbook-Tools.md", "white space around it and upper-case letters"),
])
def test_read_doc_says_a_near_miss_is_spacing_or_case_not_the_extension(docs, name, differs):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["ok"] is False and result["error"] == "not_found"
    assert result["message"] == (f"no document named {name!r}: names are exact and this one has "
                                 f"{differs} — use 'handbook-tools.md'")


@pytest.mark.parametrize("name", ["handbook-notes.txt", "handbook-tools.md.txt ", "HANDBOOK-X.TXT"])
def test_read_doc_blames_the_extension_only_when_it_is_not_markdown(docs, name):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["error"] == "refused" and "only Markdown (.md)" in result["message"]


def test_read_doc_suggests_only_listed_names(docs):
    result = execute(ToolCall("c", "read_doc", '{"doc": "HANDBOOK-OUTSIDE.MD"}'), docs)
    assert result["message"] == ("no document named 'HANDBOOK-OUTSIDE.MD' — call list_docs to see "
                                 "the names")


def test_the_shipped_handbook_is_readable():
    names = list_docs()["docs"]
    assert len(names) >= 3 and all(n.startswith("handbook-") for n in names)
    for name in names:
        assert read_doc(doc=name)["text"].startswith("# ")


# ---------------------------------------------------------------- the hands-on task

def test_task_reference_passes_its_own_cases():
    assert labkit.check(json_equal, "02_tools", quiet=True)


def test_task_catches_the_python_equality_trap():
    assert not labkit.check(lambda a, b: a == b, "02_tools", quiet=True)


def test_whole_number_floats_reach_an_integer_parameter_as_int():
    from labkit.tools import Tool, ToolRegistry, execute, normalize_arguments
    schema = {"type": "object", "properties": {"lines": {"type": "integer"}, "scale": {"type": "number"},
                                               "ids": {"type": "array", "items": {"type": "integer"}}},
              "required": ["lines", "scale", "ids"], "additionalProperties": False}
    seen = []
    registry = ToolRegistry([Tool("dump", "d", schema, lambda lines, scale, ids: seen.append((lines, scale, ids)) or "ok")])
    assert execute(ToolCall("c1", "dump", '{"lines": 2.0, "scale": 2.0, "ids": [1.0, 3]}'), registry)["ok"]
    assert seen == [(2, 2.0, [1, 3])] and type(seen[0][0]) is int and type(seen[0][1]) is float
    assert normalize_arguments({"n": 2.5}, {"type": "object", "properties": {"n": {"type": "integer"}}}) == {"n": 2.5}


def test_suggestions_name_only_the_tools_this_run_may_call():
    from labkit.tools import ToolRegistry, calculate, execute, get_weather
    registry = ToolRegistry([calculate, get_weather])
    unknown = execute(ToolCall("c1", "get_forecast", "{}"), registry, allowed=["get_weather", "get_forecast"])
    assert "calculate" not in unknown["message"] and "get_weather" in unknown["message"]
    refused = execute(ToolCall("c2", "calculate", '{"expression": "1+1"}'), registry, allowed=["get_weather", "nope"])
    assert refused["error"] == "not_allowed" and "nope" not in refused["message"]
