"""Argument validation: labkit's hand-written validate_arguments beside the validators people use.

Same schemas, same instances, one run: jsonschema (a validator built once, the usual production
choice), jsonschema.validate() (re-checks the schema on every call, as many snippets do), and
fastjsonschema (compiles the schema to Python code). Compare the ratios, not the microseconds.
"""

import timeit

import fastjsonschema
import jsonschema

from labkit.schema import ArgumentError, validate_arguments
from labkit.toolbox import calculate, get_weather
from labkit.tools import tool


@tool
def book_room(city: str, nights: int, guests: list[str], note: str | None = None) -> dict:
    """Book a room (benchmark schema: nested array, nullable string)."""


CASES = [  # (label, schema, arguments)
    ("calculate, valid", calculate.parameters, {"expression": "14 * 9 / 5 + 32"}),
    ("get_weather, wrong key", get_weather.parameters, {"town": "Paris"}),
    (
        "book_room, valid",
        book_room.parameters,
        {"city": "Paris", "nights": 3, "guests": ["Ada", "Alan"], "note": None},
    ),
    (
        "book_room, bad item",
        book_room.parameters,
        {"city": "Paris", "nights": 3, "guests": ["Ada", 7], "note": None},
    ),
]


def ours(schema, arguments):
    try:
        validate_arguments(arguments, schema)
        return True
    except ArgumentError:
        return False


def per_call_us(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def measure(label, schema, arguments, number):
    """µs per call: labkit, a reused jsonschema validator, jsonschema.validate, fastjsonschema."""
    built = jsonschema.Draft202012Validator(schema)
    compiled = fastjsonschema.compile(schema)

    def fast():
        try:
            compiled(arguments)
            return True
        except fastjsonschema.JsonSchemaValueException:
            return False

    def validate_each_time():
        try:
            jsonschema.validate(arguments, schema, cls=jsonschema.Draft202012Validator)
            return True
        except jsonschema.ValidationError:
            return False

    verdicts = {ours(schema, arguments), built.is_valid(arguments), fast(), validate_each_time()}
    assert len(verdicts) == 1, f"validators disagree on {label}"
    return [
        per_call_us(lambda: ours(schema, arguments), number),
        per_call_us(lambda: built.is_valid(arguments), number),
        per_call_us(validate_each_time, number // 10),
        per_call_us(fast, number),
    ]


def main(number=2000):
    print(
        f"{'case':24} {'labkit':>9} {'jsonschema':>11} {'validate()':>11} {'fastjsonschema':>15}   "
        "(µs per call)"
    )
    ratios = []
    for label, schema, arguments in CASES:
        times = measure(label, schema, arguments, number)
        ratios.append([t / times[0] for t in times])
        print(f"{label:24} {times[0]:9.1f} {times[1]:11.1f} {times[2]:11.1f} {times[3]:15.2f}")
    mean = [sum(r[i] for r in ratios) / len(ratios) for i in range(4)]
    print(
        f"{'time ÷ labkit (mean)':24} {mean[0]:9.2f} {mean[1]:11.2f} {mean[2]:11.2f} "
        f"{mean[3]:15.2f}"
    )
    print(
        "All four agree on every case. Build a jsonschema validator once and reuse it; never call "
        "jsonschema.validate() per call in a hot path."
    )


if __name__ == "__main__":
    main()
