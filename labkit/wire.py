"""The wire: the JSON bodies labkit POSTs to each API and what it reads from their replies.

Built in 01_setup, with live.py. `responses_body` (POST /responses, store=False) and `chat_body`
(POST /chat/completions) turn labkit's messages, tool specs, output cap, output schema and
tool_choice into each API's JSON; `read_output`, `sent_call` and `read_usage` read the parts of a
reply both adapters share. Pure functions of JSON: no SDK, no settings, no network.
Left out: images and audio, every field labkit does not send.
"""

import json
from collections.abc import Sequence
from typing import Any

from .messages import (
    OutputSchema,
    ToolCall,
    Usage,
    check_pairing,
    check_tool_choice,
    choice_to_api,
    to_api,
)


def read_output(items: list) -> tuple[str, list[ToolCall]]:
    """Read a Responses API `output` list into (text, [ToolCall, ...]); skip reasoning and others.

    Example: read_output([{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}])
             ->  ("hi", [])
    """
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            continue  # not an item at all: nothing to read
        if item.get("type") == "message":
            texts.append(
                "".join(
                    part.get("text") or part.get("refusal") or ""
                    for part in item.get("content") or []
                )
            )
        elif item.get("type") == "function_call":
            call_id = item.get("call_id") or f"call_{len(calls) + 1}"
            calls.append(sent_call(call_id, item.get("name"), item.get("arguments")))
    return "\n".join(t for t in texts if t), calls


def sent_call(call_id: str, name: Any, arguments: Any) -> ToolCall:
    """A ToolCall from what a server sent. Arguments sent as a JSON object or array (some local
    servers do) become their JSON text — what the model meant; none at all are "{}". A name that
    is missing or not text stays as sent: the loop refuses that call as malformed.

    Example: sent_call("call_1", "f", {"city": "Paris"}).arguments  ->  '{"city": "Paris"}'
    """
    if arguments is None or arguments == "":
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(call_id, name, arguments)


def responses_body(
    model: str,
    messages: list,
    tools: Sequence[object] = (),
    replay_reasoning: bool = False,
    max_output_tokens: int | None = None,
    output_schema: OutputSchema | None = None,
    tool_choice: str = "auto",
) -> dict:
    """The JSON body for POST /responses (store=False: the server keeps nothing between turns)."""
    check_pairing(messages)
    check_tool_choice(tool_choice, tools)
    items = []
    for m in messages:
        if m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
            continue
        if replay_reasoning:
            items += [r for r in m.reasoning if r.get("encrypted_content")]
        if m.content or m.role != "assistant":
            items.append({"role": m.role, "content": m.content})
        items += [
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in m.tool_calls
        ]
    body = {"model": model, "input": items, "store": False}
    if tools:
        body["tools"] = [to_api(t, "responses") for t in tools]
    _choose(body, tool_choice, tools, "responses")
    if replay_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    if max_output_tokens:
        body["max_output_tokens"] = max_output_tokens  # reasoning tokens count too
    if output_schema:
        body["text"] = {"format": {"type": "json_schema", **_strict(output_schema)}}
    return body


def _choose(body, tool_choice, tools, api):
    """Add tool_choice to a body: only when it says more than "auto" and there are tools."""
    if tools and tool_choice != "auto":  # "auto" is the APIs' default: old bodies stay the same
        body["tool_choice"] = choice_to_api(tool_choice, api)


def _strict(output_schema):
    return {"name": output_schema.name, "schema": output_schema.schema, "strict": True}


def chat_body(
    model: str,
    messages: list,
    tools: Sequence[object] = (),
    max_output_tokens: int | None = None,
    output_schema: OutputSchema | None = None,
    cap_name: str = "max_completion_tokens",
    tool_choice: str = "auto",
) -> dict:
    """The JSON body for POST /chat/completions (tool results are role "tool" messages).

    cap_name: OpenAI wants max_completion_tokens; most other servers only know max_tokens.
    """
    check_pairing(messages)
    check_tool_choice(tool_choice, tools)
    out = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content,  # text, even empty: some servers refuse null
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    body: dict = {"model": model, "messages": out}
    if tools:
        body["tools"] = [to_api(t, "chat") for t in tools]
    _choose(body, tool_choice, tools, "chat")
    if max_output_tokens:
        body[cap_name] = max_output_tokens
    if output_schema:
        body["response_format"] = {"type": "json_schema", "json_schema": _strict(output_schema)}
    return body


def read_reasoning(items: list) -> list[dict]:
    """The reasoning items of a Responses `output` that can be replayed (encrypted content kept).

    Example: read_reasoning([{"type": "reasoning", "id": "rs_1", "encrypted_content": "x"}])
             ->  [{"type": "reasoning", "id": "rs_1", "encrypted_content": "x"}]
    """
    return [
        {k: item[k] for k in ("type", "id", "summary", "encrypted_content") if k in item}
        for item in items
        if item.get("type") == "reasoning" and item.get("encrypted_content")
    ]


def read_usage(data: dict, names: tuple[str, str]) -> Usage | None:
    """Usage from a response body, or None when the server did not report it (local servers).

    Example: read_usage({"usage": {"prompt_tokens": 9, "completion_tokens": 2}},
                        ("prompt_tokens", "completion_tokens"))  ->  Usage(9, 2, 11)
    """
    raw = data.get("usage")
    if not isinstance(raw, dict):
        return None
    inp, out = int(raw.get(names[0]) or 0), int(raw.get(names[1]) or 0)
    return Usage(inp, out, int(raw.get("total_tokens") or inp + out))
