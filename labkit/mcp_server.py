"""labkit's own MCP server: the teaching tools, the documents as resources, one prompt.

Built in 09_mcp (Meet the SDK). `build_server()` serves labkit Tools with their own strict schemas
through the official SDK's low-level `Server`, one handler per method; `python -m labkit.mcp_server`
runs it over stdio, `--http PORT` over Streamable HTTP on 127.0.0.1, and `serving_http()` runs that
in a subprocess for as long as a `with` block lasts. Left out: authentication (an HTTP server
anyone on the machine can reach), subscriptions, sampling; production puts OAuth in front of HTTP.
"""

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from mcp import MCPError, types
from mcp.server import Server
from mcp.types import INVALID_PARAMS

from .errors import ServiceError, ToolError
from .models import ToolCall
from .toolbox import calculate, get_weather, list_docs, read_doc
from .tools import Tool, as_registry, execute
from .trace import clip

if TYPE_CHECKING:
    from mcp.server import MCPServer

TEACHING_TOOLS = (calculate, get_weather, list_docs, read_doc)
PROMPT = (
    "Answer the question below from the documents of the labkit server only: read the ones that "
    "matter with read_doc and name the document after each claim, e.g. (handbook-retries.md). "
    "If the documents do not say, answer that they do not.\n\nQuestion: {question}"
)


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def build_server(tools: Iterable[Tool] = TEACHING_TOOLS, name: str = "labkit") -> Server:
    """An MCP server offering `tools` (labkit Tools), read_doc's documents and one prompt.

    Example: with labkit.mcp.memory(build_server()) as server: server.tools()
    """
    registry = as_registry(tools)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        listed = [
            types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
            for t in registry
        ]
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params) -> types.CallToolResult:
        # labkit's own execute(): the same validation and the same results as a direct call
        call = ToolCall("mcp", params.name, json.dumps(params.arguments or {}))
        result = execute(call, registry)
        if not result["ok"]:
            return types.CallToolResult(content=[_text(result["message"])], is_error=True)
        data = result["data"]
        structured = data if isinstance(data, dict) else None  # MCP's structured result: an object
        return types.CallToolResult(
            content=[_text(json.dumps(data, ensure_ascii=False))], structured_content=structured
        )

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        names = list_docs.fn()["docs"] if "list_docs" in registry else []
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=f"docs://{n}", name=n, mime_type="text/markdown") for n in names
            ]
        )

    async def read_resource(ctx, params) -> types.ReadResourceResult:
        name = str(params.uri).removeprefix("docs://")
        try:
            text = read_doc.fn(name)["text"]  # read_doc's confinement: bare names, no paths
        except ToolError as exc:  # a refusal, not a crash: one JSON-RPC error, no traceback logged
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        contents = types.TextResourceContents(uri=params.uri, mime_type="text/markdown", text=text)
        return types.ReadResourceResult(contents=[contents])

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        question = types.PromptArgument(name="question", description="what to ask", required=True)
        prompt = types.Prompt(
            name="cite_docs", description="Answer from the documents", arguments=[question]
        )
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(ctx, params) -> types.GetPromptResult:
        question = (params.arguments or {}).get("question", "")
        message = types.PromptMessage(role="user", content=_text(PROMPT.format(question=question)))
        return types.GetPromptResult(description="Answer from the documents", messages=[message])

    return Server(
        name,
        instructions="Teaching tools and documents from labkit (fixed data, nothing live).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def quiet_server(name: str) -> "MCPServer":
    """The SDK's high-level MCPServer (tools from type hints), leaving this process's logging as
    it was: MCPServer() calls logging.basicConfig, which would print the SDK's log in a notebook.

    Example: server = quiet_server("calc"); server.add_tool(add)
    """
    import logging

    from mcp.server import MCPServer

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    server = MCPServer(name, log_level="WARNING")
    root.setLevel(level)
    root.handlers[:] = handlers
    return server


# ---------------------------------------------------------------- running it


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the OS picks it).

    Example: free_port()  ->  40123
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving_http(port: int | None = None, timeout: float = 30.0) -> Iterator[str]:
    """Run this server over Streamable HTTP on 127.0.0.1 in a subprocess; yield its URL.

    The process is stopped and reaped when the block ends, however it ends.
    Example: with serving_http() as url: labkit.mcp.http(url)
    """
    port = port or free_port()
    command = [sys.executable, "-m", "labkit.mcp_server", "--http", str(port)]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            _wait_for_port(process, port, timeout, log)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:  # it ignored the polite stop
                process.kill()
                process.wait()


def _wait_for_port(process, port, timeout, log):
    """Return once the port accepts connections; ServiceError if the server died or is late."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            said = clip(" ".join(log.read().split()[-30:]), 200)
            raise ServiceError(
                f"the MCP HTTP server exited at start (code {process.returncode}): {said} — "
                "is the port taken? try another, or run python -m labkit.mcp_server --http PORT"
            )
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise ServiceError(f"the MCP HTTP server did not listen on 127.0.0.1 within {timeout:g} s")


def main(argv: Sequence[str] | None = None) -> None:
    """python -m labkit.mcp_server [--http PORT]: serve the teaching tools over stdio or HTTP."""
    parser = argparse.ArgumentParser(prog="python -m labkit.mcp_server", description=main.__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="Streamable HTTP on 127.0.0.1")
    args = parser.parse_args(argv)
    if args.http is not None and not 0 < args.http < 65_536:
        parser.exit(2, f"error: --http {args.http} is not a TCP port — use 1 to 65535, e.g. 8000\n")
    server = build_server()
    if args.http is None:
        import anyio
        from mcp.server.stdio import stdio_server

        async def serve():
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
