"""labkit.tools: strict schemas from type hints, the registry, execute, risk and the tool specs."""

import json
import random
import typing
from typing import Literal

import jsonschema
import pytest

from labkit.errors import ToolError, UserError
from labkit.live import ChatModel, ResponsesModel
from labkit.models import ToolCall, to_api, user
from labkit.toolbox import calculate, get_weather
from labkit.tools import (
    MAX_RESULT_CHARS,
    RISKS,
    Tool,
    ToolRegistry,
    as_registry,
    execute,
    result_text,
    risk_above,
    tool,
)

from test_schema import LONE_SURROGATES, ours, random_value, theirs


@pytest.mark.parametrize("text, where", LONE_SURROGATES)
def test_execute_returns_a_result_for_text_utf8_cannot_encode(text, where):
    log = []
    result = execute(ToolCall("call_1", "add", text), spy_registry(log))
    assert (result["ok"], result["error"]) == (False, "invalid_text") and where in result["message"]
    assert log == [] and result_text(result).encode("utf-8")


# ---------------------------------------------------------------- tools, the decorator, the
# registry


def test_decorator_derives_a_strict_schema_from_hints_and_docstring():
    @tool(risk="medium")
    def book(
        city: str,
        nights: int,
        kind: Literal["hotel", "hostel"],
        guests: list[str],
        note: str | None = None,
    ) -> dict:
        """Book a room.

        Args:
            city: where to stay
            nights (int): how many nights
        """
        return {"city": city}

    assert book.name == "book" and book.description == "Book a room." and book.risk == "medium"
    assert book.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "where to stay"},
            "nights": {"type": "integer", "description": "how many nights"},
            "kind": {"type": "string", "enum": ["hotel", "hostel"]},
            "guests": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
        },
        "required": ["city", "nights", "kind", "guests", "note"],
        "additionalProperties": False,
    }
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


@pytest.mark.parametrize(
    "fn, needle",
    [
        (no_hint, "no type hint"),
        (dict_hint, "cannot express"),
        (with_default, "has a default"),
        (star_args, r"\*args"),
        (no_doc, "no docstring"),
        (tuple_hint, "cannot express"),
        (union_hint, "cannot express"),
        (any_hint, "cannot express"),
    ],
)
def test_decorator_refuses_to_guess(fn, needle):
    with pytest.raises(UserError, match=needle):
        tool(fn)


def test_literal_none_is_allowed_in_the_enum_when_nullable():
    @tool
    def f(unit: Literal["c", "f"] | None = None):
        """Doc."""

    assert f.parameters["properties"]["unit"] == {
        "type": ["string", "null"],
        "enum": ["c", "f", None],
    }
    assert ours(f.parameters, {"unit": None}) and not ours(f.parameters, {"unit": "k"})


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(name="bad name"), "not allowed"),
        (dict(risk="extreme"), "risk"),
        (dict(parameters={"type": "string"}), "object"),
        (dict(parameters={"type": "object", "properties": {}}), "additionalProperties"),
        (
            dict(
                parameters={
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "required": [],
                    "additionalProperties": False,
                }
            ),
            "every property",
        ),
        (
            dict(
                parameters={
                    "type": "object",
                    "properties": {"a": {"type": "string", "pattern": "x"}},
                    "required": ["a"],
                    "additionalProperties": False,
                }
            ),
            "pattern",
        ),
    ],
)
def test_tool_refuses_schemas_strict_mode_rejects(kwargs, needle):
    fields = dict(
        name="t",
        description="d",
        parameters={
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        },
        fn=lambda: 1,
    )
    with pytest.raises(UserError, match=needle):
        Tool(**{**fields, **kwargs})


def test_registry_accepts_tools_and_plain_functions():
    def shout(text: str) -> str:
        """Uppercase the text."""
        return text.upper()

    registry = ToolRegistry([calculate, shout])
    assert registry.names() == ["calculate", "shout"] and "shout" in registry and len(registry) == 2
    assert (
        registry.get("shout")(text="hi") == "HI" and [t.name for t in registry] == registry.names()
    )
    with pytest.raises(UserError, match="registered: calculate, shout"):
        registry.get("nope")
    with pytest.raises(UserError, match="two tools are named"):
        ToolRegistry([calculate, calculate])
    assert RISKS == ("low", "medium", "high")


def test_as_registry_keeps_a_registry_and_makes_one_from_a_list():
    registry = ToolRegistry([calculate])
    assert as_registry(registry) is registry
    assert as_registry([calculate, get_weather]).names() == ["calculate", "get_weather"]
    assert as_registry(()).names() == []


@pytest.mark.parametrize(
    "risk, max_risk, above",
    [
        ("low", "low", False),
        ("medium", "low", True),
        ("high", "medium", True),
        ("medium", "high", False),
        ("high", "high", False),
        ("low", "high", False),
    ],
)
def test_risk_above_orders_low_medium_high(risk, max_risk, above):
    assert risk_above(risk, max_risk) is above


@pytest.mark.parametrize("cls, api", [(ResponsesModel, "responses"), (ChatModel, "chat")])
def test_specs_match_what_the_live_adapters_send(cls, api):
    registry = ToolRegistry([calculate, get_weather])
    body = cls("gpt-test", api_key="sk-test-" + "0" * 24).request_preview(
        [user("hi")], list(registry)
    )
    assert body["tools"] == registry.specs(api)


def test_to_api_renders_for_the_two_apis_only():
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


@pytest.mark.parametrize(
    "name, arguments, kind",
    [
        ("add", '{"a": 1, "b": "2"}', "invalid_arguments"),
        ("add", '{"a": 1}', "invalid_arguments"),
        ("add", '{"a": 1, "b": 2, "c": 3}', "invalid_arguments"),
        ("add", '{"a": true, "b": 2}', "invalid_arguments"),
        ("add", '{"a": 1, "b": 2', "invalid_json"),
        ("add", '{"a": NaN, "b": 2}', "invalid_json"),
        ("subtract", '{"a": 1, "b": 2}', "unknown_tool"),
        ("explode", '{"reason": "permission"}', "permission_denied"),
        ("explode", '{"reason": "tool"}', "not_found"),
        ("explode", '{"reason": "other"}', "tool_crashed"),
        ("explode", '{"reason": "json"}', "bad_result"),
        ("explode", '{"reason": "nan"}', "bad_result"),
    ],
)
def test_execute_turns_every_failure_into_a_result(name, arguments, kind):
    log = []
    result = execute(ToolCall("call_1", name, arguments), spy_registry(log))
    assert result["ok"] is False and result["error"] == kind and result["message"]
    assert log == []  # the function never ran on bad arguments
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
    assert (
        big["data"].endswith("characters]") and "truncated: showing 4,000 of 10,002" in big["data"]
    )
    crashed = execute(ToolCall("c", "explode", '{"reason": "key"}'), registry)
    assert "abcdefghijklmnop" not in crashed["message"] and "RuntimeError" in crashed["message"]


def test_seeded_random_payloads_never_escape_and_never_reach_the_function_unvalidated():
    log = []
    registry = spy_registry(log)
    rng = random.Random(7)
    pieces = [
        "{",
        "}",
        '"a"',
        '"b"',
        ":",
        ",",
        "1",
        "-2",
        "2.5",
        "true",
        "null",
        '"x"',
        "[",
        "]",
        "NaN",
        " ",
    ]
    payloads = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(1500)]
    payloads += [json.dumps({"a": random_value(rng), "b": random_value(rng)}) for _ in range(1500)]
    payloads += [
        json.dumps({"a": rng.randint(-9, 9), "b": rng.choice([1, 2.0, 2.5, True, "3", None])})
        for _ in range(500)
    ]
    for payload in payloads:
        result = execute(ToolCall("c", "add", payload), registry)
        assert set(result) >= {"ok"} and (
            result["ok"] or result["error"] in ("invalid_json", "invalid_arguments")
        )
    # every call that ran had arguments valid by an independent judge (1.0 is an integer in JSON)
    schema = registry.get("add").parameters
    assert len(log) > 100 and all(theirs(schema, {"a": a, "b": b}) for a, b in log)


def test_whole_number_floats_reach_an_integer_parameter_as_int():
    from labkit.schema import normalize_arguments
    from labkit.tools import Tool, ToolRegistry, execute

    schema = {
        "type": "object",
        "properties": {
            "lines": {"type": "integer"},
            "scale": {"type": "number"},
            "ids": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["lines", "scale", "ids"],
        "additionalProperties": False,
    }
    seen = []
    registry = ToolRegistry(
        [
            Tool(
                "dump",
                "d",
                schema,
                lambda lines, scale, ids: seen.append((lines, scale, ids)) or "ok",
            )
        ]
    )
    assert execute(
        ToolCall("c1", "dump", '{"lines": 2.0, "scale": 2.0, "ids": [1.0, 3]}'), registry
    )["ok"]
    assert seen == [(2, 2.0, [1, 3])] and type(seen[0][0]) is int and type(seen[0][1]) is float
    assert normalize_arguments(
        {"n": 2.5}, {"type": "object", "properties": {"n": {"type": "integer"}}}
    ) == {"n": 2.5}


def test_suggestions_name_only_the_tools_this_run_may_call():
    from labkit.toolbox import calculate, get_weather
    from labkit.tools import ToolRegistry, execute

    registry = ToolRegistry([calculate, get_weather])
    unknown = execute(
        ToolCall("c1", "get_forecast", "{}"), registry, allowed=["get_weather", "get_forecast"]
    )
    assert "calculate" not in unknown["message"] and "get_weather" in unknown["message"]
    refused = execute(
        ToolCall("c2", "calculate", '{"expression": "1+1"}'),
        registry,
        allowed=["get_weather", "nope"],
    )
    assert refused["error"] == "not_allowed" and "nope" not in refused["message"]
