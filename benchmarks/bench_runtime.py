"""What durability costs: dispatch throughput of labkit's ToolRuntime against what people use
instead.

    python -m benchmarks runtime

Side by side in one run, on one trivial tool (so the runtime's own cost is what is measured):
calling the function directly (no idempotency at all), a dict of operation_id -> result (idempotent
until the process dies), ToolRuntime on SQLite WAL with synchronous=FULL (the default: an fsync per
commit, two commits per new operation), the same with synchronous=NORMAL, and replaying a stored id.
Compare the ratios, not the absolute numbers: fsync speed depends on the disk.
"""

import tempfile
import time
from pathlib import Path

from labkit.runtime import OperationStore, ToolRuntime, operation_id
from labkit.schema import normalize_arguments, validate_arguments
from labkit.tools import Tool

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "amount"],
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
}


def refund(order_id, amount):
    return {"refund_id": f"R-{order_id}", "amount": amount}


TOOL = Tool("refund", "Refund an order.", SCHEMA, refund, risk="high")


def requests(n, tag):
    out = []
    for i in range(n):
        arguments = {"order_id": f"{tag}-{i}", "amount": i}
        out.append((arguments, operation_id("bench", "refund", arguments, tag)))
    return out


def per_second(fn, items):
    start = time.perf_counter()
    for arguments, op in items:
        fn(arguments, op)
    return len(items) / (time.perf_counter() - start)


def checked(arguments):
    """What every way does to a model's arguments before the tool runs (ToolRuntime does the
    same)."""
    validate_arguments(arguments, SCHEMA)
    return normalize_arguments(arguments, SCHEMA)


def direct(arguments, op):
    return refund(**checked(arguments))


def with_dict():
    done = {}

    def dispatch(arguments, op):
        arguments = checked(arguments)
        if op not in done:
            done[op] = refund(**arguments)
        return done[op]

    return dispatch


def with_runtime(folder, synchronous):
    runtime = ToolRuntime(
        [TOOL], "high", OperationStore(Path(folder) / f"{synchronous}.db", synchronous)
    )
    return lambda arguments, op: runtime.dispatch("refund", arguments, op)


def main(n=300, fast=20_000):
    with tempfile.TemporaryDirectory() as folder:
        full = with_runtime(folder, "FULL")
        rows = [
            ("direct call, no idempotency", per_second(direct, requests(fast, "a"))),
            (
                "dict operation_id -> result (lost on crash)",
                per_second(with_dict(), requests(fast, "b")),
            ),
            ("ToolRuntime, SQLite WAL + synchronous=FULL", per_second(full, requests(n, "c"))),
            (
                "ToolRuntime, SQLite WAL + synchronous=NORMAL",
                per_second(with_runtime(folder, "NORMAL"), requests(n, "d")),
            ),
            ("ToolRuntime FULL, replay of a stored id", per_second(full, requests(n, "c"))),
        ]
    base, memo = rows[0][1], rows[1][1]
    print(f"tool dispatch of a trivial tool ({fast} calls per in-memory row, {n} per SQLite row)")
    print(f"  {'way':<46}{'ops/s':>10}{'us/op':>9}{'vs direct':>11}{'vs dict':>9}")
    for name, rate in rows:
        print(
            f"  {name:<46}{rate:>10.0f}{1e6 / rate:>9.1f}{base / rate:>10.1f}x{memo / rate:>8.1f}x"
        )
    added = 1 / rows[2][1] - 1 / base
    print(
        f"  durable (FULL) adds {added * 1e3:.2f} ms per new operation: {added / 0.1:.1%} of a 100 "
        "ms API call"
    )
    return rows


if __name__ == "__main__":
    main()
