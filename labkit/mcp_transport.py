"""The plumbing under labkit.mcp: the SDK's async client on a thread, stdio processes, one error.

Built in 09_mcp (its appendix prints Runner.run and Runner.timed). The SDK is async, so each
connection runs its client on an event loop in a thread of its own (`Runner`): every call is
synchronous, bounded by a timeout, and works inside Jupyter's running loop. `stdio_params` checks
a command and marks its process, so whatever the server leaves running can be reaped; `explain`
turns a crash, a line that is not JSON-RPC, a hang or an unreachable URL into one labkit error.
Left out: OAuth for HTTP, and any sandbox around a server's process.
"""

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .config import redact
from .errors import LabkitError, ServiceError, UserError
from .mcp_trust import MARKER, Tail
from .trace import clip

if TYPE_CHECKING:
    import anyio
    from mcp import Client

CLOSING = 15.0  # the SDK's own shutdown is bounded (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL)
# The SDK logs every fault with a traceback; labkit reports it as one error instead. Your own
# logging configuration still sees the SDK's lines.
logging.getLogger("mcp").addHandler(logging.NullHandler())


class Runner:
    """An event loop in a thread of its own, holding one SDK client open until stop()."""

    def __init__(self, target: object, timeout: float):
        self.target, self.timeout = target, timeout  # target: what mcp.Client takes
        self.client: Client | None = None
        self.fault: Exception | None = None
        self._owner_scope: anyio.CancelScope | None = None
        self._call_scope: anyio.CancelScope | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="labkit-mcp", daemon=True)

    def start(self) -> None:
        """Connect and do the handshake; raise what went wrong (TimeoutError past the timeout)."""
        self.thread.start()
        self._stop = asyncio.Event()
        self._ready = ready = concurrent.futures.Future[None]()
        self.owner = asyncio.run_coroutine_threadsafe(self._own(ready), self.loop)
        ready.result(self.timeout)

    async def _own(self, ready):
        import anyio
        from mcp import Client

        try:
            with anyio.CancelScope() as self._owner_scope:  # cancelled by stop() or by garbage
                async with Client(self.target, cache=None, message_handler=self._heard) as client:
                    self.client = client
                    ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
        if not ready.done():  # cancelled in the handshake: the line that cancelled it says why
            ready.set_exception(self.fault or TimeoutError())

    async def _heard(self, message):
        """The SDK hands over each line that was not JSON-RPC: the connection cannot be trusted."""
        if isinstance(message, Exception):
            self.fault = message
            if not self._ready.done():  # in the handshake: say so now, not after the SDK's
                self._ready.set_exception(message)  # 2 s wait for the process to exit
            for scope in (self._call_scope, self._owner_scope):
                if scope is not None:
                    scope.cancel()

    def run(self, fn: Callable[..., Awaitable[Any]], timeout: float | None = None) -> Any:
        """`await fn(client)` on the loop, within the timeout; raise what went wrong."""
        future = asyncio.run_coroutine_threadsafe(self.timed(fn, timeout), self.loop)
        return future.result()

    async def timed(self, fn: Callable[..., Awaitable[Any]], timeout: float | None) -> Any:
        """`await fn(client)` on the loop's thread; raise the fault, or TimeoutError past it.

        Example: await runner.timed(lambda client: client.list_tools(), 5.0)
        """
        import anyio

        if self.fault is None:
            with anyio.move_on_after(timeout or self.timeout) as self._call_scope:
                return await fn(self.client)
        raise self.fault or TimeoutError()

    def stop(self) -> None:
        """End the session (the SDK stops and reaps a subprocess), then the loop. Idempotent."""
        if self.loop.is_closed():
            return
        connected, self.client = self.client is not None, None
        if self.thread.is_alive() and hasattr(self, "owner"):
            self.loop.call_soon_threadsafe(self._stop.set)
            # a call still waiting (Ctrl+C), or a handshake that never finished: stop it now
            for scope in (self._call_scope, None if connected else self._owner_scope):
                if scope is not None:
                    self.loop.call_soon_threadsafe(scope.cancel)
            try:
                self.owner.result(CLOSING)
            except BaseException:  # its failure was reported where it happened
                pass
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(CLOSING)
        self.loop.close()


_started = 0  # stdio servers started by this process: each one's marker


def stdio_params(command: list, env: dict | None) -> tuple:
    """(the SDK's parameters, the process's marker, the command to name in messages).

    The marker goes into the server's environment: mcp_trust.reap finds whatever it leaves running.
    Example: stdio_params(["/usr/bin/python3", "-m", "mcp_server_time"], None)[2]
             ->  "python3 -m mcp_server_time"
    """
    from mcp.client.stdio import StdioServerParameters

    strings = isinstance(command, list | tuple) and all(isinstance(c, str) for c in command)
    if not (strings and command):
        raise UserError(
            f"command must be a list of strings, got {clip(repr(command), 60)} — e.g. "
            "[sys.executable, '-m', 'mcp_server_time']"
        )
    global _started
    _started += 1
    marker = f"{os.getpid()}-{_started}"
    env = {**(env or {}), MARKER: marker}
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)
    what = clip(" ".join(os.path.basename(c) if os.sep in c else c for c in command), 50)
    return params, marker, what


def last_words(errlog: Tail | None) -> str:
    """The last line the server wrote on stderr (stdio only), clipped and redacted.

    Example: last_words(tail)  ->  "ValueError: unknown timezone"
    """
    if errlog is None:
        return ""
    lines = [line for line in errlog.text().splitlines() if line.strip()]
    return clip(redact(lines[-1]), 160) if lines else ""


def leaf(exc: BaseException) -> BaseException:
    """The first real exception inside anyio's exception groups.

    Example: leaf(ExceptionGroup("", [TimeoutError()]))  ->  TimeoutError()
    """
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _line(exc) -> str:
    """The start of the line that was not JSON-RPC (pydantic keeps it as the error's input)."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    text = errors[0].get("input", exc) if errors else exc
    return clip(redact(repr(text) if isinstance(text, str) else text), 60)


def explain(
    exc: BaseException,
    doing: str,
    who: str,
    fault: Exception | None,
    timeout: float,
    said: str,
) -> LabkitError:
    """One labkit error for what failed during `doing`: `fault` is the line that was not JSON-RPC
    (Runner.fault), `said` the server's last words on stderr.

    Example: explain(TimeoutError(), "the handshake", "the MCP server calc", None, 30.0, "")
             ->  ServiceError("the MCP server calc did not answer the handshake within 30 s; …")
    """
    import httpx2

    said = f"; its last words on stderr: {said!r}" if said else ""
    gone = "the connection is closed and its process stopped"
    if fault is not None or type(exc).__name__ == "ValidationError":
        return ServiceError(
            f"{who} answered {doing} with a line that is not JSON-RPC ({_line(fault or exc)});"
            f" {gone} — a server writes only MCP messages on stdout, its logs on stderr"
        )
    if isinstance(exc, TimeoutError):
        return ServiceError(
            f"{who} did not answer {doing} within {timeout:g} s{said}; {gone} — raise "
            "timeout= if it is only slow"
        )
    if isinstance(exc, OSError) and doing == "the handshake":  # the program did not start
        return UserError(
            f"could not start {who}: {exc.strerror or exc} — check the command, e.g. "
            "[sys.executable, '-m', 'mcp_server_time']"
        )
    if isinstance(exc, httpx2.HTTPError):
        return ServiceError(
            f"could not reach {who} ({type(exc).__name__}: {clip(exc, 60)}) — is it running, "
            "and is the URL its MCP endpoint (often ending in /mcp)?"
        )
    if type(exc).__name__ == "MCPError":  # the connection closed under a request
        return ServiceError(
            f"{who} closed the connection during {doing} (it exited or crashed){said}; {gone}"
            " — fix the server or its command, then open a new connection"
        )
    return ServiceError(
        f"{who} failed during {doing} ({type(exc).__name__}: {clip(redact(exc), 160)}); {gone}"
    )
