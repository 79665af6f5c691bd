"""A small MCP server over stdio that misbehaves on purpose, for tests/test_mcp.py.

Usage: python tests/mcp_faulty.py MODE, where MODE is one of FAULTS (or "ok"); its echo tool
answers "$NAME" with the environment variable NAME; a hanging mode writes the method it hangs on
to the file $MCP_FAULTY_MARK, if set. Hand-written JSON-RPC (as 09_mcp's Build it
writes it) with no SDK import, so it starts in a blink. It speaks the 2025-11-25 handshake; the
SDK's first request, server/discover, is answered "no such method".
"""

import json
import os
import sys
import time

FAULTS = (
    "exit-at-start",  # exits before reading anything, with a line on stderr
    "garbage-at-start",  # answers the first request with a line that is not JSON-RPC
    "hang-at-start",  # never answers the first request
    "crash-on-call",  # lists its tool, then dies when it is called
    "hang-on-call",  # lists its tool, then never answers the call
    "garbage-on-call",  # lists its tool, then answers the call with garbage
)
TOOLS = [
    {
        "name": "echo",
        "description": "Repeat the text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    }
]


def answer(message, result=None, error=None):
    reply = {"jsonrpc": "2.0", "id": message["id"]}
    reply.update({"error": error} if error else {"result": result})
    print(json.dumps(reply), flush=True)


def serve(mode):
    if mode == "exit-at-start":
        print("mcp_faulty: cannot start (planted)", file=sys.stderr, flush=True)
        sys.exit(3)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:  # a notification: never answered
            continue
        method = message["method"]
        fault = mode.split("-", 1)[0] if mode.endswith("start") or method == "tools/call" else ""
        if fault == "garbage":
            print("this is not JSON-RPC", flush=True)
        elif fault == "hang":
            if os.environ.get("MCP_FAULTY_MARK"):  # tells a test the request has arrived
                with open(os.environ["MCP_FAULTY_MARK"], "w") as mark:
                    mark.write(method)
            time.sleep(3600)
        elif fault == "crash":
            print("mcp_faulty: crashed (planted)", file=sys.stderr, flush=True)
            os._exit(1)
        elif method == "initialize":
            answer(message, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                             "serverInfo": {"name": "faulty", "version": "0"}})  # fmt: skip
        elif method == "tools/list":
            answer(message, {"tools": TOOLS})
        elif method == "tools/call":
            text = message["params"]["arguments"]["text"]
            if text.startswith("$"):  # "$NAME": what this server sees of its environment
                text = os.environ.get(text[1:], "(unset)")
            answer(message, {"content": [{"type": "text", "text": text}], "isError": False})
        else:
            answer(message, error={"code": -32601, "message": f"no method {method}"})


if __name__ == "__main__":
    serve(sys.argv[1])
