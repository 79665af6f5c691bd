"""Property-based tests (hypothesis): thousands of generated payloads against validation and
execute.

Each test draws 1,000 examples per run. No exception escapes; no tool function ever runs on
arguments that failed validation; validate_arguments agrees with jsonschema on generated schemas.
"""

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.models import ToolCall
from labkit.schema import ArgumentError, validate_arguments
from labkit.tools import ToolRegistry, execute, tool

MANY = settings(max_examples=1000, deadline=None, database=None, derandomize=True)
KEYS = st.sampled_from(["a", "b", "c"])
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(KEYS | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])


def schema_from(inner):
    """One level of schema built from the subset, with `inner` for the nested schemas."""
    return st.fixed_dictionaries(
        {},
        optional={
            "type": type_names | st.lists(type_names, min_size=1, max_size=3, unique=True),
            "enum": st.lists(json_values, min_size=1, max_size=3),
            "required": st.lists(KEYS, max_size=3, unique=True),
            "properties": st.dictionaries(KEYS, inner, max_size=3),
            "additionalProperties": inner,
            "items": inner,
        },
    )


schemas = st.recursive(st.booleans() | schema_from(st.just({})), schema_from, max_leaves=6)


def ours(schema, value):
    try:
        validate_arguments(value, schema)
        return True
    except ArgumentError:
        return False


@MANY
@given(schemas, json_values)
def test_validate_arguments_agrees_with_jsonschema(schema, value):
    assert ours(schema, value) == jsonschema.Draft202012Validator(schema).is_valid(value)


CALLS = []


@tool
def book(city: str, nights: int, tags: list[str], note: str | None = None) -> dict:
    """Book a room (records what it was called with)."""
    CALLS.append({"city": city, "nights": nights, "tags": tags, "note": note})
    return {"booked": city}


REGISTRY = ToolRegistry([book])
payload_texts = (
    st.text(max_size=60)
    | json_values.map(json.dumps)
    | st.fixed_dictionaries(
        {"city": json_values, "nights": json_values, "tags": json_values},
        optional={"note": json_values, "extra": json_values},
    ).map(json.dumps)
    | st.fixed_dictionaries(
        {
            "city": st.text(max_size=5) | json_values,
            "nights": st.integers() | st.floats() | st.booleans(),
            "tags": st.lists(st.text(max_size=3)) | json_values,
            "note": st.none() | st.text(max_size=3),
        },
        optional={"extra": st.none()},
    ).map(json.dumps)
)  # nearly valid: many of these pass


@MANY
@given(payload_texts)
def test_execute_never_raises_and_never_runs_on_invalid_arguments(text):
    before = len(CALLS)
    result = execute(ToolCall("call_1", "book", text), REGISTRY)
    assert isinstance(result, dict) and isinstance(result["ok"], bool)
    if result["ok"]:
        assert len(CALLS) == before + 1
        assert jsonschema.Draft202012Validator(book.parameters).is_valid(CALLS[-1])
    else:
        assert len(CALLS) == before and result["error"] in ("invalid_json", "invalid_arguments")
        assert result["message"]


def test_some_generated_calls_did_run():
    # the property above is only meaningful if valid payloads were generated too
    CALLS.clear()
    test_execute_never_raises_and_never_runs_on_invalid_arguments()
    assert len(CALLS) > 0
