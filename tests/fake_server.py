"""A fake OpenAI-compatible model server on 127.0.0.1, for driving the real `openai` SDK in tests.

It speaks POST /v1/responses, POST /v1/chat/completions and POST /v1/embeddings (hashed
bag-of-words vectors: deterministic, and similar texts get similar vectors). By default it behaves
like a tiny,
predictable model: offered tools and not yet given a tool output, it calls the first tool with
arguments filled from the schema; otherwise it answers in text. Like the real API it refuses a
function_call_output whose call_id it never saw in the input, and (under store=false) a replayed
reasoning item that lacks encrypted_content.

A test can instead queue faults: server.fail_next("401"), "403", "404", "429", "quota", "500",
"html", "403_page" (a 403 with a web page, as a proxy sends), "truncated", "slow", "incomplete",
"reasoning", "no_usage", and tool calls shaped as some servers send them: "arguments_object",
"arguments_list", "arguments_missing" (arguments that are not JSON text), "name_number",
"name_list", "name_missing". Every request is recorded (path, headers, body) in
server.requests, so tests can check what was sent, and to whom.

A request with "stream": true is answered with server-sent events (chunked), derived from the
reply it would have sent whole; the fault "cut" drops the connection half-way through them.
Capabilities can be switched off to play servers that lack them: FakeServer(apis=("chat",),
tool_calls=False, json_schema=False, usage=False), or loops=True for a server that answers a
Responses-style tool output by calling the tool again. A JSON-schema request is answered with
JSON filled from the schema. A tool_choice is honoured as the real API does: "none" answers in
text, "required" calls the first tool even after a tool output, a named function calls that one;
a tool_choice in the other API's shape, or naming no offered tool, is a 400.
Usage: with FakeServer() as server: ResponsesModel(base_url=server.url, ...)
"""

import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _fill(schema):
    """A value that satisfies a simple schema: what a cooperative model would send."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {name: _fill(sub) for name, sub in schema.get("properties", {}).items()}
    return {"string": "Paris", "integer": 2, "number": 2.5, "boolean": True, "array": []}.get(kind)


SHAPES = {  # fault -> (field, what it becomes; None: the field is left out)
    "arguments_object": ("arguments", lambda text: json.loads(text)),
    "arguments_list": ("arguments", lambda text: list(json.loads(text).values())),
    "arguments_missing": ("arguments", None),
    "name_number": ("name", lambda name: 7),
    "name_list": ("name", lambda name: [name]),
    "name_missing": ("name", None),
}


def _misshape(call, fault):
    """The call (a Responses item or a Chat `function`) with one field as the fault says."""
    if fault not in SHAPES:
        return call
    key, change = SHAPES[fault]
    call = dict(call)
    if change is None:
        del call[key]
    else:
        call[key] = change(call[key])
    return call


def _bad_request(message):
    return 400, {"error": {"message": message, "type": "invalid_request_error"}}


def chosen(body, api, tools, answered):
    """(error, tool): the tool the fake model calls under the body's tool_choice (None: it
    answers in text), or a 400 for a tool_choice this API would refuse. `answered`: the last
    input is a tool output, after which an "auto" model answers."""
    choice, offered = body.get("tool_choice", "auto"), body.get("tools") or []
    named = (lambda t: t.get("name")) if api == "responses" else (lambda t: t["function"]["name"])
    if isinstance(choice, dict):
        inner = choice if api == "responses" else choice.get("function") or {}
        name = inner.get("name")
        if choice.get("type") != "function" or not isinstance(name, str):
            field = "tool_choice.name" if api == "responses" else "tool_choice.function"
            return _bad_request(f"Missing required parameter: '{field}'."), None
        if name not in [named(t) for t in offered]:
            return _bad_request(f"Tool choice '{name}' not found in 'tools' parameter."), None
        return None, next((t for t in tools if named(t) == name), None)
    if choice not in ("auto", "none", "required"):
        return _bad_request(f"Invalid value for 'tool_choice': {choice!r}."), None
    if not tools or choice == "none" or (choice == "auto" and answered):
        return None, None
    return None, tools[0]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_POST(self):
        server = self.server.owner
        length = int(self.headers.get("content-length", 0))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        server.requests.append(
            {
                "path": self.path,
                "body": body,
                "headers": {k.lower(): v for k, v in self.headers.items()},
            }
        )
        fault = server.faults.pop(0) if server.faults else None
        api = {"/responses": "responses", "/chat/completions": "chat"}.get(
            next(
                (end for end in ("/responses", "/chat/completions") if self.path.endswith(end)), ""
            )
        )
        if api and api not in server.apis:
            status, payload = 404, {"error": {"message": "Not Found", "type": "not_found"}}
        elif api == "responses":
            status, payload = server.responses_reply(body, fault, self.headers)
        elif api == "chat":
            status, payload = server.chat_reply(body, fault, self.headers)
        elif self.path.endswith("/embeddings"):
            status, payload = server.embeddings_reply(body, fault, self.headers)
        else:
            status, payload = (
                404,
                {"error": {"message": f"no route {self.path}", "type": "not_found"}},
            )
        if status == 200 and api and body.get("stream"):
            events = (server.responses_events if api == "responses" else server.chat_events)(
                payload, body
            )
            return self._send_events(events, fault)
        self._send(status, payload, fault)

    def _send_events(self, events, fault):
        """Server-sent events, chunked; "cut" closes the connection after half of them."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if fault == "cut":
            events = events[: len(events) // 2]
        try:
            for event in events:
                data = (event if isinstance(event, str) else json.dumps(event)).encode()
                data = b"data: " + data + b"\n\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            if fault != "cut":
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True  # a cut stream ends without its last chunk

    def _send(self, status, payload, fault):
        if fault == "slow":
            time.sleep(self.server.owner.slow_seconds)
        if fault == "403_page":  # a proxy or firewall in front of the server says no
            status, fault = 403, "html"
        if fault == "html":
            data, ctype = (
                b"<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>",
                "text/html",
            )
        else:
            data, ctype = json.dumps(payload).encode(), "application/json"
            if fault == "truncated":
                data = data[: len(data) // 2]
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)


_ERRORS = {
    "401": (
        401,
        "Incorrect API key provided: {key}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
    ),
    "403": (403, "You are not allowed to sample from this model", "model_not_allowed"),
    "404": (
        404,
        "The model `{model}` does not exist or you do not have access to it.",
        "model_not_found",
    ),
    "429": (
        429,
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3.",
        "rate_limit_exceeded",
    ),
    "quota": (
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
    ),
    "500": (500, "The server had an error while processing your request.", "server_error"),
    "503": (503, "The engine is currently overloaded, please try again later.", "server_error"),
}


class FakeServer:
    def __init__(
        self,
        slow_seconds=2.0,
        apis=("responses", "chat"),
        tool_calls=True,
        json_schema=True,
        usage=True,
        loops=False,
    ):
        self.apis, self.tool_calls, self.json_schema = apis, tool_calls, json_schema
        self.usage, self.loops = usage, loops
        self.requests = []
        self.faults = []
        self.slow_seconds = slow_seconds
        self._ids = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    def fail_next(self, *faults):
        self.faults.extend(faults)

    def _next_id(self, prefix):
        self._ids += 1
        return f"{prefix}_{self._ids}"

    def _error(self, fault, model, headers):
        status, message, code = _ERRORS[fault]
        key = headers.get("authorization", "").removeprefix("Bearer ")
        # subtle: the real 401 echoes part of the key; this one echoes all of it, to test redaction
        return status, {
            "error": {
                "message": message.format(key=key, model=model),
                "type": "invalid_request_error",
                "code": code,
            }
        }

    # ------------------------------------------------------------ /v1/responses

    def responses_reply(self, body, fault, headers):
        if fault in _ERRORS:
            return self._error(fault, body.get("model"), headers)
        items = body.get("input") or []
        seen_calls = {
            i.get("call_id")
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        }
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output" and item.get("call_id") not in seen_calls:
                return 400, {
                    "error": {
                        "message": f"No tool call found for function call output with "
                        f"call_id {item.get('call_id')}.",
                        "type": "invalid_request_error",
                    }
                }
            if item.get("type") == "reasoning" and not item.get("encrypted_content"):
                return 404, {
                    "error": {
                        "message": f"Item with id '{item.get('id')}' not found. Items are not "
                        "persisted when `store` is set to false.",
                        "type": "invalid_request_error",
                    }
                }
        answered = {
            i.get("call_id")
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        }
        unanswered = seen_calls - answered
        if unanswered:
            return 400, {
                "error": {
                    "message": f"No tool output found for function call {sorted(unanswered)[0]}.",
                    "type": "invalid_request_error",
                }
            }
        output, last = [], items[-1] if items else {}
        if fault == "reasoning" or "reasoning.encrypted_content" in (body.get("include") or []):
            reasoning = {"type": "reasoning", "id": self._next_id("rs"), "summary": []}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                reasoning["encrypted_content"] = "gAAAA-opaque-" + reasoning["id"]
            output.append(reasoning)
        tools = (body.get("tools") or []) if self.tool_calls else []
        schema = ((body.get("text") or {}).get("format") or {}).get("schema")
        after_output = last.get("type") == "function_call_output" and not self.loops
        refused, tool = chosen(body, "responses", tools, after_output)
        if refused:
            return refused
        if tool:
            arguments = json.dumps(_fill(tool.get("parameters", {})))
            item = {
                "type": "function_call",
                "id": self._next_id("fc"),
                "name": tool["name"],
                "call_id": self._next_id("call"),
                "arguments": arguments,
                "status": "completed",
            }
            output.append(_misshape(item, fault))
        else:
            said = (
                last.get("output")
                if last.get("type") == "function_call_output"
                else last.get("content")
            )
            text = f"fake model heard: {said}"
            if schema and self.json_schema:
                text = json.dumps(_fill(schema))
            output.append(
                {
                    "type": "message",
                    "id": self._next_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        payload = {
            "id": self._next_id("resp"),
            "object": "response",
            "created_at": 0,
            "model": body.get("model"),
            "status": "completed",
            "output": output,
            "error": None,
            "incomplete_details": None,
            "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18},
        }
        if fault == "incomplete":
            payload["status"], payload["incomplete_details"] = (
                "incomplete",
                {"reason": "max_output_tokens"},
            )
        if fault == "no_usage" or not self.usage:
            del payload["usage"]
        return 200, payload

    def responses_events(self, payload, body):
        """The Responses API's stream events for a reply, ending with response.completed."""
        events = [{"type": "response.created", "response": {**payload, "output": []}}]
        for index, item in enumerate(payload["output"]):
            if item["type"] == "message":
                events.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "content": []},
                    }
                )
                for word in re.findall(r"\S+\s*", item["content"][0]["text"]):
                    events.append(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": word,
                        }
                    )
            elif item["type"] == "function_call":
                events.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "arguments": ""},
                    }
                )
                arguments = item.get("arguments") or ""
                for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                    events.append(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "delta": piece,
                        }
                    )
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        done = "response.incomplete" if payload["status"] == "incomplete" else "response.completed"
        events.append({"type": done, "response": payload})
        return [dict(e, sequence_number=n) for n, e in enumerate(events)]

    # ------------------------------------------------------------ /v1/chat/completions

    def chat_reply(self, body, fault, headers):
        if fault in _ERRORS:
            return self._error(fault, body.get("model"), headers)
        messages = body.get("messages") or []
        issued = {
            c["id"]
            for m in messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        for m in messages:
            if m.get("role") == "tool" and m.get("tool_call_id") not in issued:
                return 400, {
                    "error": {
                        "message": "Invalid parameter: messages with role 'tool' must be a "
                        "response "
                        "to a preceeding message with 'tool_calls'.",
                        "type": "invalid_request_error",
                    }
                }
        last = messages[-1] if messages else {}
        tools = (body.get("tools") or []) if self.tool_calls else []
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        refused, tool = chosen(body, "chat", tools, last.get("role") == "tool")
        if refused:
            return refused
        if tool:
            fn = tool["function"]
            arguments = json.dumps(_fill(fn.get("parameters", {})))
            function = _misshape({"name": fn["name"], "arguments": arguments}, fault)
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": self._next_id("call"), "type": "function", "function": function}
                ],
            }
            finish = "tool_calls"
        else:
            text = f"fake model heard: {last.get('content')}"
            if schema and self.json_schema:
                text = json.dumps(_fill(schema))
            message, finish = {"role": "assistant", "content": text}, "stop"
        if fault == "incomplete":
            finish = "length"
        payload = {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        if fault == "no_usage" or not self.usage:
            del payload["usage"]
        return 200, payload

    def chat_events(self, payload, body):
        """The Chat Completions stream chunks for a reply, then usage if asked, then [DONE]."""
        head = {k: payload[k] for k in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"
        choice, message = payload["choices"][0], payload["choices"][0]["message"]

        def chunk(delta, finish=None):
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [
            chunk({"content": w}) for w in re.findall(r"\S+\s*", message.get("content") or "")
        ]
        for j, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            start = {"index": j, "id": call["id"], "type": "function"}
            chunks.append(
                chunk({"tool_calls": [{**start, "function": {"name": function["name"]}}]})
            )
            arguments = function.get("arguments") or ""
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                chunks.append(
                    chunk({"tool_calls": [{"index": j, "function": {"arguments": piece}}]})
                )
        chunks.append(chunk({}, choice["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage") and "usage" in payload:
            chunks.append({**head, "choices": [], "usage": payload["usage"]})
        return [*chunks, "[DONE]"]

    # ------------------------------------------------------------ /v1/embeddings

    def embeddings_reply(self, body, fault, headers, dimensions=64):
        if fault in _ERRORS:
            return self._error(fault, body.get("model"), headers)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = []
        for index, text in enumerate(texts):
            vector = [0.0] * dimensions
            for word in re.findall(r"\w+", str(text).lower()):
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            data.append(
                {"object": "embedding", "index": index, "embedding": [v / norm for v in vector]}
            )
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model"),
            "usage": {"prompt_tokens": 3 * len(texts), "total_tokens": 3 * len(texts)},
        }
