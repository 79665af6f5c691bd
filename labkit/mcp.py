"""Tools over the Model Context Protocol: attach any MCP server; its tools become labkit Tools.

Built in 09_mcp. `stdio(command)`, `http(url)` and `memory(server)` open a Connection, whose calls
are synchronous (the SDK's async client runs on a thread of its own: labkit.mcp_transport).
`tools()` gives Tools named server__tool, schemas closed and checked strict (or refused, with why;
labkit.mcp_trust), risk and egress from your policy only (a tool it does not name is high risk and
sends data out), pinned by hash when first listed (a changed tool is refused and cannot be
called); hidden text is shown escaped. A crash, garbage or a hang past `timeout` closes the
connection with one clear error, its process reaped. Left out: sampling, elicitation, roots,
OAuth, list-change notices; production also sandboxes each server and gives it narrow credentials.
"""

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .config import checked_timeout
from .errors import LabkitError, ServiceError, ToolError, UserError
from .injection import detect_injection
from .mcp_transport import Runner, explain, last_words, leaf, stdio_params
from .mcp_trust import Tail, kinds, offered_text, reap, shown, strip
from .schema import canonical
from .tools import NAME, RISKS, Tool, look_alike
from .trace import clip

if TYPE_CHECKING:
    from mcp import types as mcp_types

SEPARATOR = "__"  # server__tool: allowed by the APIs' tool-name pattern, where "." and "/" are not
DEFAULT_TIMEOUT = 30.0  # seconds for the handshake and for each request
UNNAMED_RISK, UNNAMED_EGRESS = "high", True  # a tool your policy does not name: ask; assume out
HIDDEN_POLICIES = ("refuse", "strip")  # a description or schema with text a reader cannot see


# ---------------------------------------------------------------- schemas, names and pins


def closed(schema: dict) -> dict:
    """A strict copy of an MCP tool's input schema: every object closed, every property required.

    An object without additionalProperties gets false; an optional top-level property becomes
    required and nullable, as @tool writes `x: str | None` (its null is dropped before the server
    sees it, so the server applies its own default; the default moves into the description).
    Anything else strict mode needs is left for check_strict to refuse, with why.
    Example: closed({"type": "object", "properties": {"n": {"type": "integer"}}})
             ->  {"type": "object", "properties": {"n": {"type": ["integer", "null"]}},
                  "required": ["n"], "additionalProperties": False}
    """
    schema = _close(schema)
    properties, required = schema.get("properties", {}), schema.get("required", [])
    optional = [name for name in properties if name not in required]
    for name in optional:
        properties[name] = _nullable(properties[name])
    if optional:
        schema["required"] = [*required, *optional]
    return schema


def _close(schema):
    if not isinstance(schema, dict):
        return schema
    copy = {k: _close(v) if k == "items" else v for k, v in schema.items()}
    if "properties" in schema:
        copy["properties"] = {k: _close(v) for k, v in schema["properties"].items()}
    is_object = schema.get("type") == "object" or "properties" in schema
    if is_object and "additionalProperties" not in schema:
        copy["additionalProperties"] = False
    return copy


def _nullable(schema):
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    if "default" in schema:  # the server applies it when the argument is left out (null)
        said = f"null for the default, {json.dumps(schema.pop('default'))}"
        schema["description"] = (
            f"{schema['description']} ({said})" if "description" in schema else said
        )
    if "type" in schema:
        kinds = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        schema["type"] = kinds if "null" in kinds else [*kinds, "null"]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def pin(listed: "mcp_types.Tool") -> str:
    """The sha256 of what the model is told about a tool: its name, description and schema.

    Example: pin(server.listing["get_current_time"])  ->  "3f2a…" (64 hex digits)
    """
    told = {"name": listed.name, "description": listed.description, "schema": listed.input_schema}
    try:
        text = canonical(told)
    except (LabkitError, TypeError, ValueError, RecursionError):  # unencodable, NaN, too deep
        text = repr(told)  # still one text per listing, so a change is still seen
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def changed_tools(pins: dict, listed: list) -> list[str]:
    """The names of the listed tools whose pin is not the one approved (the rug pull). A tool
    never pinned is not "changed": it is pinned when first listed.

    Example: changed_tools({"add": pin(add_v1)}, [add_v2])  ->  ["add"]
    """
    return [t.name for t in listed if t.name in pins and pins[t.name] != pin(t)]


def server_name(name: object) -> str:
    """A namespace for a server's tools: runs of anything but letters, digits and - become "_".

    Example: server_name("mcp time")  ->  "mcp_time"
    """
    return re.sub(r"[^A-Za-z0-9-]+", "_", str(name)).strip("_") or "server"


def result_data(result: "mcp_types.CallToolResult") -> dict[str, Any] | str:
    """A CallToolResult as labkit data: its structured content, else its text. An error result
    (isError) raises ToolError "server_error", which execute() turns into {"ok": false, ...}.

    Example: result_data(CallToolResult(content=[TextContent(text="3")]))  ->  "3"
    """
    texts = [b.text if b.type == "text" else f"[{b.type}, not shown]" for b in result.content]
    if result.is_error:
        said = clip(" ".join(texts), 500) or "(it said nothing)"
        raise ToolError(f"the server's tool failed: {said}", "server_error")
    if result.structured_content is not None:
        return result.structured_content
    return "\n".join(texts)


# ---------------------------------------------------------------- a connection


class Connection:
    """One MCP server, attached. Open it with stdio(), http() or memory(), in a `with` block.

    `tools()` lists the server's tools as labkit Tools (refused ones in `refused`, with why);
    `call(tool, arguments)` calls one by the server's own name; `sdk(fn)` runs any SDK request
    (resources, prompts). `pins` maps each tool to the hash approved when it was first listed:
    save it and pass pins=... next time, and a tool changed since is refused. print() shows what
    you approve. After a crash, garbage or a timeout the connection is closed (`closed` says why).
    """

    def __init__(
        self,
        target: object,
        name: str | None = None,
        *,
        risk: dict[str, str] | None = None,
        egress: dict[str, bool] | None = None,
        pins: dict[str, str] | None = None,
        timeout: float | None = None,
        what: str = "",
        hidden: str = "refuse",
    ):
        if hidden not in HIDDEN_POLICIES:
            raise UserError(f"hidden={hidden!r} — use one of {', '.join(HIDDEN_POLICIES)}")
        self.hidden = hidden  # what to do with a tool whose text holds characters nobody sees
        self.name = None if name is None else server_name(name)
        self.what = what  # the command or URL, for messages until the server tells its name
        self.risk, self.egress = _policy(risk, egress)
        self.pins = dict(pins or {})
        self.timeout = checked_timeout(DEFAULT_TIMEOUT if timeout is None else timeout)
        self.refused: dict[str, str] = {}  # tool name -> why it is not offered
        self.listing: dict[str, mcp_types.Tool] = {}
        self.closed: str | None = "not opened yet"
        self._target, self._lock = target, threading.Lock()
        self._errlog: Tail | None = None
        self._optional: dict[str, set[str]] = {}
        self._marker: str | None = None
        self._runner: Runner | None = None

    def __enter__(self) -> "Connection":
        return self.open()

    def __exit__(self, *exc):
        self.close("the with block ended")

    def open(self) -> "Connection":
        """Start the server (or reach it) and do the MCP handshake. Example: server.open()"""
        target = self._target() if callable(self._target) else self._target
        self._runner = runner = Runner(target, self.timeout)
        weakref.finalize(self, runner.stop)  # reaped at exit even if close() is never called
        self.closed = None
        try:
            runner.start()
        except BaseException as exc:
            self._fail(exc, "the handshake")
        assert runner.client is not None  # start() returned: the handshake is done
        info = runner.client.server_info
        self.name = self.name or server_name(getattr(info, "name", None) or "server")
        return self

    def close(self, why: str = "closed by close()") -> None:
        """End the session and stop the server's process; safe to call again."""
        if self._runner is not None:
            self._runner.stop()
        self._runner, self.closed = None, self.closed or why
        if self._marker is not None:  # what the server left running, detached or not
            reap(self._marker)
        if self._errlog is not None:
            self._errlog.close()

    def sdk(self, fn: Callable[..., Awaitable[Any]], doing: str = "a request") -> Any:
        """`await fn(client)` with the SDK's mcp.Client, within the timeout; any failure that is
        not the server refusing this one request closes the connection with one labkit error.

        Example: server.sdk(lambda client: client.list_resources()).resources
        """
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        failure: BaseException  # closes the connection, unless a ToolError (one refused request)
        with self._lock:  # one request at a time: the API is synchronous anyway
            if self._runner is None:
                raise UserError(
                    f"the connection to MCP server {self.name} is closed ({self.closed}) — open "
                    "a new one: with labkit.mcp.stdio([...]) as server: ..."
                )
            try:
                return self._runner.run(fn)
            except MCPError as exc:  # a JSON-RPC error: the server refused this request only
                failure = exc
                if exc.error.code != CONNECTION_CLOSED:
                    refused = clip(exc.error.message, 300)
                    failure = ToolError(
                        f"{self.name} refused the request: {refused}", "server_refused"
                    )
            except BaseException as exc:
                failure = exc
        # raised out here, so the SDK's exception is not even the __context__ of labkit's
        if isinstance(failure, ToolError):
            raise failure
        self._fail(failure, doing)

    def _fail(self, exc, doing):
        """Close the connection (the process is reaped) and raise one error saying what failed."""
        exc = leaf(exc)
        if self._marker:  # stuck, lying or interrupted: killed now, not after the SDK gives it
            reap(self._marker)  # 2 s to exit on its own (a crashed one is gone already)
        if isinstance(exc, KeyboardInterrupt):
            self.close("interrupted (Ctrl+C)")
            raise exc
        who, fault = f"the MCP server {self.name or self.what}", self._runner.fault
        self.close()  # the process stopped first: all it wrote on stderr is in the tail now
        error = explain(exc, doing, who, fault, self.timeout, last_words(self._errlog))
        self.closed = str(error)
        raise error from None

    # ------------------------------------------------------------ tools

    def tools(self) -> list[Tool]:
        """The server's tools now, as labkit Tools; `refused` says why any other is not offered.

        Example: with stdio([sys.executable, "-m", "mcp_server_time"]) as time: time.tools()
        """
        listed: list = []
        cursor = None
        for _ in range(100):  # pages: a server that never stops paging cannot hang this
            page = self.sdk(lambda c, at=cursor: c.list_tools(cursor=at), "tools/list")
            listed, cursor = listed + list(page.tools), page.next_cursor
            if cursor is None:
                break
        listing = {t.name: t for t in listed}
        unknown = sorted((set(self.risk) | set(self.egress)) - set(listing))
        if unknown:
            raise UserError(
                f"your policy names {', '.join(unknown)}, which {self.name} does not list — its "
                f"tools: {', '.join(listing) or 'none'}"
            )
        tools, refused = [], _look_alikes(listing)
        optional: dict = {}
        changed = changed_tools(self.pins, listed)
        pins = {**{t.name: pin(t) for t in listed}, **self.pins}  # the approved pin stays
        for name, listed_tool in listing.items():
            if name in changed:
                refused[name] = (
                    "changed since it was approved (its description or schema) — read it with "
                    f"print(server); to approve it again: server.pins.pop({name!r})"
                )
            if name in refused:
                continue
            try:
                tools.append(self.as_tool(listed_tool, optional))
            except UserError as exc:
                refused[name] = str(exc)
        # commit only a listing that went through whole: nothing half-done
        self.listing, self.refused, self.pins, self._optional = listing, refused, pins, optional
        return tools

    def as_tool(self, listed: "mcp_types.Tool", optional: dict[str, set[str]]) -> Tool:
        """A listed tool as a labkit Tool that calls it. Example: server.as_tool(listed, {}).name"""
        name = f"{self.name}{SEPARATOR}{listed.name}"
        if not NAME.match(name):
            raise UserError(
                f"{name!r} is not a tool name the APIs accept (1-64 letters, digits, _ or -) — "
                "give the server a shorter name: name=..."
            )
        # labkit.mcp_trust: the schema at every depth, the description's size and hidden text
        description, schema = offered_text(
            listed.description or "", listed.input_schema, self.hidden
        )
        parameters, required = closed(schema), schema.get("required", [])
        optional[listed.name] = set(schema.get("properties", {})) - set(required)
        risk, egress = self.policy_for(listed.name)

        def forward(**arguments):
            return self.call(listed.name, arguments)

        return Tool(name, description, parameters, forward, risk, egress=egress)

    def policy_for(self, tool: str) -> tuple:
        """(risk, egress) for one of the server's tools: your policy's, else high and True.

        Example: server.policy_for("delete_file")  ->  ("high", True)
        """
        return self.risk.get(tool, UNNAMED_RISK), self.egress.get(tool, UNNAMED_EGRESS)

    def call(self, tool: str, arguments: dict | None = None) -> dict[str, Any] | str:
        """Call one tool by the server's name for it; its data, or a ToolError saying what failed.

        Example: time.call("get_current_time", {"timezone": "Europe/Paris"})["timezone"]
        """
        if tool in self.refused:  # a Tool object or a name from before the tool was refused
            raise ToolError(
                f"{self.name}__{tool} is refused: {clip(self.refused[tool], 200)}", "refused"
            )
        dropped = self._optional.get(tool, set())
        arguments = {
            k: v for k, v in (arguments or {}).items() if v is not None or k not in dropped
        }
        try:
            result = self.sdk(lambda c: c.call_tool(tool, arguments), f"tools/call {tool}")
        except ServiceError as exc:
            raise ToolError(str(exc), "server_failed") from None
        return result_data(result)

    def __str__(self):
        lines = [f"MCP server {self.name}: {len(self.listing)} tools listed"]
        for name, listed in self.listing.items():
            description = listed.description or ""
            flags = detect_injection(strip(description)).rules
            unseen = kinds(description + repr(listed.input_schema))
            if name in self.refused:
                state = f"refused: {clip(self.refused[name], 70)}"
            else:
                risk, egress = self.policy_for(name)
                state = f"risk {risk}, egress {egress}, pin {self.pins[name][:12]}"
            lines.append(f"  {self.name}{SEPARATOR}{name}: {state}")
            lines.append(f"    {clip(shown(description) or '(no description)', 90)}")
            if unseen:
                what = "stripped" if name not in self.refused else "refused"
                lines.append(f"    HIDDEN TEXT ({', '.join(unseen)}), shown escaped above: {what}")
            if flags:
                lines.append(f"    detector (advice): {', '.join(flags)}")
        return "\n".join(lines)


def _look_alikes(listing) -> dict:
    """Refusals for tools whose names differ only by case or look-alike characters: both go."""
    seen: dict = {}
    refused: dict = {}
    for name in listing:
        twin = seen.setdefault(look_alike(name), name)
        if twin != name:
            for a, b in ((name, twin), (twin, name)):
                refused[a] = f"its name looks like {b!r} (case or look-alike characters)"
    return refused


def _policy(risk, egress):
    """Your policy checked: {tool: risk level} and {tool: egress}; the server has no say in it."""
    risk, egress = dict(risk or {}), dict(egress or {})
    for tool, level in risk.items():
        if level not in RISKS:
            raise UserError(f"risk[{tool!r}] is {level!r} — use one of {', '.join(RISKS)}")
    return risk, egress


# ---------------------------------------------------------------- the three ways to attach


def stdio(
    command: list[str],
    *,
    name: str | None = None,
    risk: dict[str, str] | None = None,
    egress: dict[str, bool] | None = None,
    pins: dict[str, str] | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    hidden: str = "refuse",
) -> Connection:
    """Attach a server that runs as a subprocess and speaks MCP over its stdin and stdout.

    It gets a minimal environment (PATH, HOME, ...; no API keys) plus `env`. risk and egress map
    the server's tool names to your policy; a tool they do not name is high risk and egress.
    Example: with stdio([sys.executable, "-m", "mcp_server_time"],
                        risk={"get_current_time": "low"}) as time:
                 tools = time.tools()
    """
    from mcp.client.stdio import stdio_client

    params, marker, what = stdio_params(command, env)
    connection = Connection(
        None, name, risk=risk, egress=egress, pins=pins, timeout=timeout, what=what, hidden=hidden
    )
    # the server's stderr goes to a bounded tail: shown in errors, never mixed into a notebook
    connection._marker = marker

    def target():
        if connection._errlog is not None:
            connection._errlog.close()
        connection._errlog = Tail()
        return stdio_client(params, errlog=connection._errlog)

    connection._target = target
    return connection


def http(url: str, *, name=None, risk=None, egress=None, pins=None, timeout=None, hidden="refuse"):
    """Attach a server over Streamable HTTP at `url` (its MCP endpoint, often ending in /mcp).

    Example: with http("http://127.0.0.1:8000/mcp", risk={"calculate": "low"}) as server: ...
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UserError(
            f"url {clip(repr(url), 60)} is not an http(s) URL — e.g. http://127.0.0.1:8000/mcp"
        )
    return Connection(
        url, name, risk=risk, egress=egress, pins=pins, timeout=timeout, what=url, hidden=hidden
    )


def memory(server, *, name=None, risk=None, egress=None, pins=None, timeout=None, hidden="refuse"):
    """Attach a server object running in this process (mcp's Server or MCPServer): tests and labs.

    Example: with memory(build_server(), risk={"calculate": "low"}) as server: server.tools()
    """
    what = "in this process"
    return Connection(
        server, name, risk=risk, egress=egress, pins=pins, timeout=timeout, what=what, hidden=hidden
    )
