"""What one tool call costs over MCP: a direct call, then the same call in memory, over stdio and
over Streamable HTTP on 127.0.0.1, in one run.

The tool is 02's calculate and every call goes through labkit's execute() (validation, the result
dict), so the difference is the protocol alone. Beside labkit's in-memory client: the SDK's own
async client awaited in a loop, the way an async program would call it (labkit's synchronous calls
hop to the connection's event-loop thread and back). Compare the ratios, not the microseconds.
"""

import asyncio
import json
import sys
import time

import labkit.mcp
from labkit.mcp_server import build_server, serving_http
from labkit.models import ToolCall
from labkit.toolbox import calculate
from labkit.tools import ToolRegistry, execute

ARGUMENTS = json.dumps({"expression": "14 * 9 / 5 + 32"})
POLICY = {"risk": {"calculate": "low"}, "egress": {"calculate": False}}
OVER_MCP = "labkit__calculate"  # the name labkit gives calculate from the server named labkit


def per_call_us(fn, number):
    """µs per call of fn(), the best of three rounds after one warm-up call."""
    fn()
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number * 1e6)
    return min(rounds)


def through(tools, name):
    """A function making the tool call through labkit's execute(), checking the answer."""
    registry = ToolRegistry(tools)

    def one():
        result = execute(ToolCall("call_1", name, ARGUMENTS), registry)
        assert result["ok"] and result["data"]["result"] == 57.2, result

    return one


def sdk_in_memory_us(number):
    """The SDK's async client awaited in a loop, in memory: no thread hop, no labkit."""
    from mcp import Client

    async def calls():
        async with Client(build_server()) as client:
            first = await client.call_tool("calculate", {"expression": "14 * 9 / 5 + 32"})
            assert first.structured_content["result"] == 57.2, first
            rounds = []
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(number):
                    await client.call_tool("calculate", {"expression": "14 * 9 / 5 + 32"})
                rounds.append((time.perf_counter() - start) / number * 1e6)
            return min(rounds)

    return asyncio.run(calls())


def main(number=200):
    rows = [("direct (execute, no MCP)", per_call_us(through([calculate], "calculate"), 2000))]
    rows.append(("SDK client, async, in memory", sdk_in_memory_us(number)))
    with labkit.mcp.memory(build_server(), **POLICY) as server:
        rows.append(("labkit.mcp.memory", per_call_us(through(server.tools(), OVER_MCP), number)))
    command = [sys.executable, "-m", "labkit.mcp_server"]
    with labkit.mcp.stdio(command, **POLICY) as server:
        rows.append(("labkit.mcp.stdio", per_call_us(through(server.tools(), OVER_MCP), number)))
    with serving_http() as url, labkit.mcp.http(url, **POLICY) as server:
        over_http = through(server.tools(), OVER_MCP)
        rows.append(("labkit.mcp.http (127.0.0.1)", per_call_us(over_http, number // 2)))
    direct = rows[0][1]
    print(f"{'one calculate call':30} {'µs per call':>12} {'÷ direct':>10}")
    for label, us in rows:
        print(f"{label:30} {us:12.1f} {us / direct:10.1f}")
    print(
        "Every row returns the same result. Here the protocol costs more than the tool; a "
        "model's turn (hundreds of milliseconds or more) still costs more than any row."
    )


if __name__ == "__main__":
    main()
