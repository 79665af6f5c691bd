"""labkit.schema: validation against jsonschema (the official suite, hand-written and random cases),
parsing the model's text, text UTF-8 cannot encode, canonical forms."""

import json
import math
import random
import re
from pathlib import Path

import jsonschema
import pytest

from labkit.errors import ModelBehaviorError
from labkit.schema import (
    ArgumentError,
    UnsupportedSchema,
    canonical,
    check_schema,
    is_number,
    json_equal,
    json_type,
    parse_arguments,
    validate_arguments,
)

SUITE = json.loads((Path(__file__).parent / "data" / "json_schema_suite_subset.json").read_text())


def ours(schema, instance):
    """True/False from validate_arguments (UnsupportedSchema propagates: it must never happen
    here)."""
    try:
        validate_arguments(instance, schema)
        return True
    except ArgumentError:
        return False


def theirs(schema, instance):
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


# ---------------------------------------------------------------- the official test suite subset

SUITE_CASES = [
    pytest.param(
        g["schema"],
        t["data"],
        t["valid"],
        id=f"{g['file']}: {g['description']}: {t['description']}",
    )
    for g in SUITE["groups"]
    for t in g["tests"]
]


def test_the_suite_subset_is_large_enough():
    assert len(SUITE_CASES) >= 170


@pytest.mark.parametrize("schema, instance, valid", SUITE_CASES)
def test_official_suite_subset_agrees(schema, instance, valid):
    assert ours(schema, instance) is valid
    assert theirs(schema, instance) is valid


# ---------------------------------------------------------------- hand-written cases, side by side

OBJ = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {
        "point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "mode": {"type": ["string", "null"], "enum": ["fast", "slow", None]},
    },
    "required": ["point"],
    "additionalProperties": False,
}
SCHEMAS = [
    {},
    True,
    False,
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": "object"},
    {"type": ["integer", "string"]},
    {"type": ["number", "null"]},
    {"enum": [1, "1", None]},
    {"enum": [True]},
    {"enum": [0]},
    {"enum": [[1, 2], {"a": 1}]},
    {"enum": [{"a": False}]},
    {"type": "integer", "enum": [1, 2, 3]},
    {"required": ["a"]},
    {"properties": {"a": {"type": "string"}}},
    {"additionalProperties": False},
    {"additionalProperties": {"type": "integer"}},
    {"properties": {"a": False}},
    {"items": {"type": "integer"}},
    {"items": False},
    {"type": "array", "items": {"type": "array", "items": True}},
    OBJ,
    NESTED,
    {"description": "annotations do nothing", "title": "t", "type": "string"},
]
INSTANCES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    1.5,
    -0.0,
    10**20,
    1e300,
    "",
    "1",
    "city",
    [],
    [1],
    [1, 2],
    [True],
    ["a", "b"],
    ["c"],
    [[1]],
    {},
    {"a": 1},
    {"a": "x"},
    {"a": False},
    {"city": "Paris"},
    {"city": "Paris", "days": 3},
    {"city": "Paris", "days": 3.0},
    {"city": "Paris", "days": True},
    {"city": 3},
    {"days": 3},
    {"city": "Paris", "extra": 1},
    {"point": {"x": 1, "y": 2.5}},
    {"point": {"x": 1}},
    {"point": {"x": "1", "y": 2}},
    {"point": {"x": 1, "y": 2}, "tags": ["a", "c"]},
    {"point": {"x": 1, "y": 2}, "mode": None},
    {"point": {"x": 1, "y": 2}, "mode": "medium"},
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
        types = rng.sample(
            ["string", "integer", "number", "boolean", "object", "array", "null"], rng.randint(1, 2)
        )
        schema["type"] = types[0] if len(types) == 1 else types
    if rng.random() < 0.25:
        schema["enum"] = [random_value(rng, 2) for _ in range(rng.randint(1, 3))]
    if depth < 2 and rng.random() < 0.4:
        schema["properties"] = {
            k: random_schema(rng, depth + 1) for k in rng.sample("abc", rng.randint(1, 2))
        }
    if rng.random() < 0.3:
        schema["required"] = rng.sample("abc", rng.randint(1, 2))
    if rng.random() < 0.3:
        schema["additionalProperties"] = False if rng.random() < 0.6 else random_schema(rng, 2)
    if depth < 2 and rng.random() < 0.3:
        schema["items"] = random_schema(rng, depth + 1)
    return schema


def test_seeded_random_schemas_and_values_agree_with_jsonschema():
    rng = random.Random(20261129)  # fixed seed: the same 3,000 pairs on every run
    pairs = [(random_schema(rng), random_value(rng)) for _ in range(3000)]
    disagreements = [(s, i) for s, i in pairs if ours(s, i) != theirs(s, i)]
    assert disagreements == []
    assert 0.2 < sum(ours(s, i) for s, i in pairs) / len(pairs) < 0.8  # both outcomes well covered


# ---------------------------------------------------------------- where the two differ, on purpose


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 3},
        {"type": "integer", "minimum": 0},
        {"pattern": "^a"},
        {"format": "email"},
        {"const": 1},
        {"$ref": "#/$defs/x"},
        {"allOf": [{}]},
        {"anyOf": [{}]},
        {"oneOf": [{}]},
        {"not": {}},
        {"prefixItems": [{}]},
        {"patternProperties": {"a": {}}},
        {"minItems": 1},
        {"uniqueItems": True},
        {"default": 1, "type": "string"},
        {"maxLenght": 3},
        {
            "type": "object",
            "properties": {"deep": {"type": "array", "items": {"type": "string", "minLength": 1}}},
        },
        {"type": "object", "additionalProperties": {"exclusiveMaximum": 3}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
        {"type": "float"},
        {"type": ["string", 3]},
        {"required": "city"},
        {"enum": "a"},
        {"properties": []},
        [],
    ],
)
def test_keywords_outside_the_subset_are_refused_even_when_the_value_never_reaches_them(schema):
    with pytest.raises(UnsupportedSchema):
        validate_arguments({}, schema)  # {} has no "deep" property: a lazy validator would pass it


def test_unsupported_message_says_what_to_do():
    with pytest.raises(
        UnsupportedSchema, match=r"schema.properties.deep.items uses 'minLength'.*jsonschema"
    ):
        check_schema({"properties": {"deep": {"items": {"minLength": 1}}}})


def test_intentional_differences_from_jsonschema():
    # 1. A keyword outside the subset: jsonschema checks it (or ignores an unknown one); we refuse.
    assert theirs({"maxLenght": 3}, "abcdef") is True  # a typo, silently ignored by jsonschema
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


@pytest.mark.parametrize(
    "schema, instance",
    [
        ({"type": "integer"}, True),
        ({"enum": [1]}, True),
        ({"enum": [True]}, 1),
        ({"enum": [0]}, False),
        ({"enum": [[1]]}, [True]),
        ({"type": "number"}, False),
    ],
)
def test_a_boolean_is_never_a_number_in_a_type_or_an_enum(schema, instance):
    assert ours(schema, instance) is False and theirs(schema, instance) is False


def test_bool_and_integer_and_enum_equality_follow_json_not_python():
    # Python's own rules would get all three wrong; jsonschema and validate_arguments agree on
    # JSON's.
    assert isinstance(True, int) and True in [1] and 0 == False  # noqa: E712  (the trap)
    assert ours({"type": "integer"}, 1.0) and theirs(
        {"type": "integer"}, 1.0
    )  # 1.0 is an integer in JSON
    assert json_equal(1, 1.0) and not json_equal(1, True) and json_type(True) == "boolean"


@pytest.mark.parametrize(
    "value, number",
    [(3, True), (2.5, True), (0, True), (True, False), (False, False), ("3", False), (None, False)],
)
def test_is_number_agrees_with_jsonschema_and_a_bool_is_not_one(value, number):
    assert is_number(value) is number
    assert theirs({"type": "number"}, value) is number


@pytest.mark.parametrize(
    "value, got",
    [
        (None, "got null"),
        ("1", 'got string "1"'),
        (True, "got boolean true"),
        ([2], "got array [2]"),
    ],
)
def test_a_wrong_type_names_the_type_and_then_the_value_once(value, got):
    with pytest.raises(ArgumentError) as info:
        validate_arguments(
            {"n": value}, {"type": "object", "properties": {"n": {"type": "integer"}}}
        )
    assert str(info.value) == f"arguments.n should be integer, {got}"


def test_error_messages_say_where_and_how_to_fix():
    with pytest.raises(ArgumentError) as info:
        validate_arguments({"point": {"x": "1"}, "tags": ["a", "c"], "zzz": 1}, NESTED)
    message = str(info.value)
    assert 'arguments.point.x should be number, got string "1"' in message
    assert "missing the required property 'y'" in message
    assert "(and 1 more)" in message and isinstance(info.value, ModelBehaviorError)


def test_deep_values_are_refused_not_a_recursion_error():
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ArgumentError, match="nested"):
        validate_arguments(deep, {})


# ---------------------------------------------------------------- parsing the model's text


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"city": "Paris"', "not valid JSON"),
        ("{'city': 'Paris'}", "double-quoted"),
        ("", "not valid JSON"),
        ('```json\n{"city": "Paris"}\n```', "not valid JSON"),
        ('{"x": NaN}', "NaN is not valid JSON"),
        ('{"x": Infinity}', "Infinity"),
        ('{"x": -Infinity}', "-Infinity"),
        ('{"x": 1e999}', "too large"),
        ('{"a": 1, "a": 2}', "appears twice"),
        ('{"o": {"a": 1, "a": 1}}', "appears twice"),
        ('["Paris"]', "must be a JSON object"),
        ('"Paris"', "must be a JSON object"),
        ("null", "got null"),
        ('{"n": ' + "1" * 5000 + "}", "could not be read"),
        ("[" * 100_000, "limit is"),
        ("[" * 5000 + "]" * 5000, "could not be read"),
        (None, "must be JSON text"),
    ],
)
def test_parse_arguments_refuses_with_a_message_the_model_can_act_on(text, needle):
    with pytest.raises(ArgumentError, match=needle.replace("(", r"\(")) as info:
        parse_arguments(text)
    assert info.value.kind == "invalid_json"


LONE_SURROGATES = [
    ('{"city": "\\ud83d"}', "arguments.city"),  # valid JSON: half of 😀
    ('{"city": "Par\udcffis"}', "arguments.city"),  # a byte, not UTF-8
    ('{"\\udfff": "Paris"}', "a key of arguments"),
    ('{"days": [1, {"note": "\\ud800"}]}', "arguments.days[1].note"),
]


@pytest.mark.parametrize("text, where", LONE_SURROGATES)
def test_parse_arguments_refuses_text_utf8_cannot_encode_and_says_where(text, where):
    with pytest.raises(ArgumentError, match=rf"^{re.escape(where)} holds .*whole characters") as e:
        parse_arguments(text)
    assert e.value.kind == "invalid_text"
    str(e.value).encode("utf-8")  # the message is text the model can read


def test_a_whole_emoji_is_text_and_canonical_refuses_half_of_one():
    assert parse_arguments('{"city": "\\ud83d\\ude00"}') == {"city": "😀"}
    assert canonical({"city": "😀"}) == '{"city":"😀"}'
    with pytest.raises(ArgumentError, match="UTF-8 cannot encode") as info:
        canonical({"city": "\ud83d"})
    assert info.value.kind == "invalid_text"


def test_parse_arguments_accepts_plain_json():
    assert parse_arguments(' {"city": "São Paulo", "days": 3, "x": 1.5e3} ') == {
        "city": "São Paulo",
        "days": 3,
        "x": 1500.0,
    }
