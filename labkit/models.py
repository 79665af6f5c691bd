"""Messages, replies, and models. A model is anything with `respond(messages, tools) -> Reply`.

Built in 01_setup. `ScriptedModel` is the offline default: its steps are literally what a model
would say (`say`, `call`), nothing more. `ResponsesModel` and `ChatModel` send the same messages
through the official `openai` SDK; `connect()` picks one from the settings, and
`request_preview()` shows the exact JSON body a live model would POST, computed offline.

Deliberately left out: streaming, images and audio, structured outputs, async, automatic retries.
"""
import copy
import json
import re
from dataclasses import dataclass, field
from itertools import count

from .config import (DEFAULT_MODEL, OFFICIAL_BASE_URL, TIMEOUT_SECONDS, describe_failure, key_problem,
                     load_settings, redact)
from .errors import ServiceError, UserError


@dataclass
class ToolCall:
    id: str                   # pairs the call with its output: "call_1"
    name: str                 # the tool the model wants to run
    arguments: str            # the raw JSON text the model wrote; the tool layer parses it


@dataclass
class Message:
    role: str                 # "system" | "user" | "assistant" | "tool"
    content: str = ""
    tool_calls: list = field(default_factory=list)     # assistant: [ToolCall, ...]
    tool_call_id: str | None = None                    # tool: the ToolCall.id this answers
    reasoning: list = field(default_factory=list)      # assistant: encrypted reasoning items, opaque


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False   # True when labkit estimated it (scripted model), not a server

    def __add__(self, other):
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.total_tokens + other.total_tokens, self.estimated or other.estimated)


@dataclass
class Reply:
    text: str = ""
    tool_calls: list = field(default_factory=list)     # [ToolCall, ...]
    usage: Usage | None = None                         # None when the server did not report it
    status: str = "completed"                          # "completed" | "incomplete"
    incomplete_reason: str | None = None               # e.g. "max_output_tokens"
    reasoning: list = field(default_factory=list)      # replayable reasoning items (Responses API)

    def to_message(self):
        """The assistant message to append to the history."""
        return Message("assistant", self.text, list(self.tool_calls), reasoning=list(self.reasoning))


def system(text):
    return Message("system", text)


def user(text):
    return Message("user", text)


def tool_message(call, content):
    """The output of one tool call, paired with it by id. Example: tool_message(call, '{"ok": true}')"""
    return Message("tool", content, tool_call_id=call.id)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict          # a JSON schema whose root is an object
    strict: bool = True       # OpenAI strict mode: additionalProperties false, all properties required


def as_tool_spec(tool):
    """Accept a ToolSpec, a dict, or any object with name/description/parameters (a labkit Tool)."""
    if isinstance(tool, ToolSpec):
        return tool
    get = tool.get if isinstance(tool, dict) else lambda key, default=None: getattr(tool, key, default)
    if not get("name") or not isinstance(get("parameters"), dict):
        raise UserError(f"{tool!r} is not a tool — give a name, a description and a parameters schema")
    return ToolSpec(get("name"), get("description", ""), get("parameters"), get("strict", True))


def estimate_tokens(text):
    """A rough token count: about 4 characters per token in English, 1 per CJK character.

    Example: estimate_tokens("hello world")  ->  3     Real tokenizers (tiktoken) differ.
    """
    cjk = len(re.findall(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]", text))
    return cjk + -(-(len(text) - cjk) // 4)


def _estimate_messages(messages):
    return sum(3 + estimate_tokens(m.content) + sum(estimate_tokens(c.arguments) for c in m.tool_calls)
               for m in messages)


# ---------------------------------------------------------------- the scripted model


@dataclass(frozen=True)
class Step:
    """One scripted turn: what the model says and which tools it calls."""
    text: str = ""
    calls: tuple = ()                    # ((name, arguments_json), ...)
    status: str = "completed"
    incomplete_reason: str | None = None

    def __str__(self):
        parts = [f"say({self.text!r})"] if self.text or not self.calls else []
        parts += [f"call {name}({arguments})" for name, arguments in self.calls]
        return " + ".join(parts) + (f" [incomplete: {self.incomplete_reason}]" if self.status != "completed" else "")


def say(text):
    """A step where the model answers in text. Example: say("pong")"""
    return Step(text=text)


def call(name, **arguments):
    """A step where the model calls a tool. Example: call("get_weather", city="Beijing")"""
    return Step(calls=((name, json.dumps(arguments, ensure_ascii=False)),))


def raw_call(name, arguments):
    """A call whose arguments text is given verbatim, e.g. broken JSON. Example: raw_call("f", '{"x": ')"""
    return Step(calls=((name, arguments),))


def turn(*steps):
    """Several steps said in one turn (text plus parallel calls). Example: turn(say("Checking."), call(...))"""
    return Step(" ".join(s.text for s in steps if s.text), sum((s.calls for s in steps), ()))


def incomplete(text="", reason="max_output_tokens"):
    """A reply the server cut short. Example: incomplete("The weather in Par", "max_output_tokens")"""
    return Step(text=text, status="incomplete", incomplete_reason=reason)


@dataclass
class Seen:
    messages: list            # a copy of the messages the model was shown
    tools: list               # the names of the tools it was offered


class ScriptedModel:
    """The offline model: replays its steps, in order, whatever it is asked.

    A step is a Step (`say`, `call`, ...) or a function (messages, tools) -> Step for a lesson
    about reacting to input. It records what it was shown (`seen`), fails loudly when the script
    runs out, and `unused()` lists steps never reached. Usage is estimated, and marked so.

    Example: ScriptedModel([say("pong")]).respond([user("ping")]).text  ->  "pong"
    """

    def __init__(self, steps=()):
        self.steps = list(steps)
        self.position = 0
        self.seen = []
        self.usage = Usage(estimated=True)
        self._ids = count(1)

    def respond(self, messages, tools=()):
        self.seen.append(Seen(copy.deepcopy(list(messages)), [as_tool_spec(t).name for t in tools]))
        if self.position >= len(self.steps):
            raise UserError(f"the scripted model has no step {self.position + 1}: its script has "
                            f"{len(self.steps)} step(s) and was asked for another turn — add a step "
                            "(say/call), or check why the loop did not stop")
        step = self.steps[self.position]
        self.position += 1
        if callable(step) and not isinstance(step, Step):
            step = step(messages, tools)            # a computed step reacts to what it was shown
        if not isinstance(step, Step):
            raise UserError(f"script step {self.position} is {step!r}, not a step — use say(...) or call(...)")
        calls = [ToolCall(f"call_{next(self._ids)}", name, arguments) for name, arguments in step.calls]
        spoken = step.text + "".join(name + arguments for name, arguments in step.calls)
        usage = Usage(_estimate_messages(messages), estimate_tokens(spoken), estimated=True)
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        self.usage = self.usage + usage
        return Reply(step.text, calls, usage, step.status, step.incomplete_reason)

    def unused(self):
        """The steps never reached, as text. Example: model.unused()  ->  ["say('bye')"]"""
        return [str(s) if isinstance(s, Step) else "<computed step>" for s in self.steps[self.position:]]

    def __repr__(self):
        return f"ScriptedModel({len(self.steps)} steps, {self.position} used)"


# ---------------------------------------------------------------- talking to a real API


def check_pairing(messages):
    """Every tool call must be answered by exactly one tool message, right after it, by call id."""
    waiting = {}
    for i, m in enumerate(messages):
        if m.role not in ("system", "user", "assistant", "tool"):
            raise UserError(f"message {i} has role {m.role!r} — use system, user, assistant or tool")
        if m.role == "tool":
            if m.tool_call_id not in waiting:
                raise UserError(f"message {i} answers call {m.tool_call_id!r}, which no assistant message "
                                "before it made (or was already answered) — append reply.to_message() "
                                "before the tool results")
            del waiting[m.tool_call_id]
            continue
        if waiting:
            raise UserError(f"message {i} comes before the output of call(s) {', '.join(waiting)} — append "
                            "one tool_message(call, result) per call first")
        waiting = {c.id: c for c in m.tool_calls} if m.role == "assistant" else {}
    if waiting:
        raise UserError(f"call(s) {', '.join(waiting)} have no output yet — append one tool_message per call")


def read_output(items):
    """Read a Responses API `output` list into (text, [ToolCall, ...]); skip reasoning and others.

    Example: read_output([{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}])
             ->  ("hi", [])
    """
    texts, calls = [], []
    for item in items:
        if item.get("type") == "message":
            texts.append("".join(part.get("text") or part.get("refusal") or ""
                                 for part in item.get("content") or []))
        elif item.get("type") == "function_call":
            calls.append(ToolCall(item["call_id"], item["name"], item.get("arguments") or "{}"))
    return "\n".join(t for t in texts if t), calls


def _usage(data, names):
    """Usage from a response body, or None when the server did not report it (local servers)."""
    raw = data.get("usage")
    if not isinstance(raw, dict):
        return None
    inp, out = int(raw.get(names[0]) or 0), int(raw.get(names[1]) or 0)
    return Usage(inp, out, int(raw.get("total_tokens") or inp + out))


class _LiveModel:
    """What both adapters share: settings, sending, turning SDK failures into labkit errors."""

    def __init__(self, model=DEFAULT_MODEL, *, api_key=None, base_url=OFFICIAL_BASE_URL,
                 timeout=TIMEOUT_SECONDS, max_retries=0, key_name="OPENAI_API_KEY"):
        problem = key_problem(api_key, official=base_url == OFFICIAL_BASE_URL, key_name=key_name)
        if problem:
            raise UserError(problem)
        import openai
        self.model, self.base_url, self.timeout = model, base_url, timeout
        self.usage = Usage()                    # sums only what the server reported
        self.unreported_turns = 0               # replies that came without usage
        self._secrets = (api_key,) if api_key else ()
        # subtle: base_url is always passed, so the SDK never reads a stray OPENAI_BASE_URL
        self._client = openai.OpenAI(api_key=api_key or "no-key-needed", base_url=base_url,
                                     timeout=timeout, max_retries=max_retries)

    def respond(self, messages, tools=()):
        body = self.request_preview(messages, tools)
        try:
            raw = self._send(body)
        except Exception as exc:                # subtle: re-raised without the SDK's traceback
            cls, message = describe_failure(exc, self.model, self.base_url, self.timeout)
            error = cls(redact(message, self._secrets))
            if isinstance(error, ServiceError):
                error.status = getattr(exc, "status_code", None)
            raise error from None
        if isinstance(raw, str):                # the SDK hands back text when the body was not JSON
            raise ServiceError(f"bad response: {self.base_url} answered with a web page or plain text, "
                               "not JSON — the base URL must be the API root (usually ending in /v1)")
        data = raw.to_dict() if hasattr(raw, "to_dict") else raw
        reply = self._parse(data)
        if reply.usage is None:
            self.unreported_turns += 1
        else:
            self.usage = self.usage + reply.usage
        return reply

    def __repr__(self):
        return f"{type(self).__name__}(model={self.model!r}, endpoint={self.base_url!r})"


class ResponsesModel(_LiveModel):
    """The Responses API (store=False): the default live model.

    Reasoning items are dropped unless replay_reasoning=True, which asks for their encrypted
    content and sends it back. subtle: under store=False the API answers 404 to a replayed
    reasoning item without encrypted_content, so a bare one is never sent.

    Example: ResponsesModel("gpt-5-mini", api_key=key).respond([user("ping")]).text
    """

    def __init__(self, model=DEFAULT_MODEL, *, replay_reasoning=False, **options):
        super().__init__(model, **options)
        self.replay_reasoning = replay_reasoning

    def request_preview(self, messages, tools=()):
        """The exact JSON body this model would POST to /responses. Example: model.request_preview(msgs)"""
        check_pairing(messages)
        items = []
        for m in messages:
            if m.role == "tool":
                items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
                continue
            if self.replay_reasoning:
                items += [r for r in m.reasoning if r.get("encrypted_content")]
            if m.content or m.role != "assistant":
                items.append({"role": m.role, "content": m.content})
            items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                      for c in m.tool_calls]
        body = {"model": self.model, "input": items, "store": False}
        if tools:
            body["tools"] = [{"type": "function", "name": s.name, "description": s.description,
                              "parameters": s.parameters, "strict": s.strict}
                             for s in map(as_tool_spec, tools)]
        if self.replay_reasoning:
            body["include"] = ["reasoning.encrypted_content"]
        return body

    def _send(self, body):
        return self._client.responses.create(**body)

    def _parse(self, data):
        if data.get("status") == "failed" or data.get("error"):
            message = redact((data.get("error") or {}).get("message", "no message"), self._secrets)
            raise ServiceError(f"the response failed on the server ({message}) — try again")
        text, calls = read_output(data.get("output") or [])
        reasoning = [{k: item[k] for k in ("type", "id", "summary", "encrypted_content") if k in item}
                     for item in data.get("output") or []
                     if item.get("type") == "reasoning" and item.get("encrypted_content")]
        status = "incomplete" if data.get("status") == "incomplete" else "completed"
        reason = (data.get("incomplete_details") or {}).get("reason") if status == "incomplete" else None
        return Reply(text, calls, _usage(data, ("input_tokens", "output_tokens")), status, reason,
                     reasoning if self.replay_reasoning else [])


class ChatModel(_LiveModel):
    """The Chat Completions API with tool_calls: what most OpenAI-compatible servers speak.

    Example: ChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1").respond([user("ping")])
    """

    def request_preview(self, messages, tools=()):
        """The exact JSON body this model would POST to /chat/completions."""
        check_pairing(messages)
        out = []
        for m in messages:
            if m.role == "tool":
                out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
            elif m.role == "assistant" and m.tool_calls:
                out.append({"role": "assistant", "content": m.content or None, "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls]})
            else:
                out.append({"role": m.role, "content": m.content})
        body = {"model": self.model, "messages": out}
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": s.name, "description": s.description, "parameters": s.parameters, "strict": s.strict}}
                for s in map(as_tool_spec, tools)]
        return body

    def _send(self, body):
        return self._client.chat.completions.create(**body)

    def _parse(self, data):
        choices = data.get("choices") or []
        if not choices:
            raise ServiceError(f"bad response: {self.base_url} returned no choices — try again, or check "
                               "that the server supports this model")
        message, finish = choices[0].get("message") or {}, choices[0].get("finish_reason")
        calls = [ToolCall(c.get("id") or f"call_{i}", c["function"]["name"], c["function"].get("arguments") or "{}")
                 for i, c in enumerate(message.get("tool_calls") or [], 1)]
        reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish)
        return Reply(message.get("content") or message.get("refusal") or "", calls,
                     _usage(data, ("prompt_tokens", "completion_tokens")),
                     "incomplete" if reason else "completed", reason)


def connect(mode=None, script=()):
    """The model the settings ask for: scripted offline (the default), or live.

    Example: model = connect(script=[say("pong")])   # offline: replays the script
             model = connect(mode="live")            # live: OPENAI_API_KEY from .env
    """
    s = load_settings(mode)
    if s.mode == "offline":
        return ScriptedModel(script)
    problem = key_problem(s.api_key, s.official, s.key_name)
    if problem:
        raise UserError(problem)
    cls = ResponsesModel if s.api == "responses" else ChatModel
    return cls(s.model, api_key=s.api_key, base_url=s.base_url, timeout=s.timeout,
               max_retries=s.max_retries, key_name=s.key_name)


def describe(model):
    """One line saying which model answers and how to switch. Example: print(describe(model))"""
    if isinstance(model, ScriptedModel):
        return (f"offline: a scripted model replays {len(model.steps)} written step(s); no key, no "
                "network. To go live set LABKIT_MODE=live and OPENAI_API_KEY in .env, then restart the kernel.")
    where = "the OpenAI API" if model.base_url == OFFICIAL_BASE_URL else model.base_url
    api = "Responses API" if isinstance(model, ResponsesModel) else "Chat Completions API"
    return f"live: {model.model} via {where} ({api}); answers vary from run to run."


# ---------------------------------------------------------------- 01_setup hands-on task

def _task():
    from .check import Case, Task
    msg = lambda *texts: {"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": t} for t in texts]}
    fc = lambda call_id, name, args: {"type": "function_call", "call_id": call_id, "name": name,
                                      "arguments": args}
    weather = fc("call_a", "get_weather", '{"city": "Paris"}')
    a = ToolCall("call_a", "get_weather", '{"city": "Paris"}')
    b = ToolCall("call_b", "calculate", '{"expression": "2+2"}')
    return Task("read a Responses API `output` list into (text, [ToolCall, ...])", [
        Case("one message, no calls", ([msg("pong")],), ("pong", []),
             "a message item keeps its text in content[i]['text']"),
        Case("one function call", ([weather],), ("", [a]),
             "build ToolCall(item['call_id'], item['name'], item['arguments']); use call_id, not id"),
        Case("a reasoning item before the call", ([{"type": "reasoning", "id": "rs_1", "summary": []}, weather],),
             ("", [a]), "skip items whose type you do not handle (reasoning, web_search_call, ...)"),
        Case("two parallel calls keep their order", ([weather, fc("call_b", "calculate", '{"expression": "2+2"}')],),
             ("", [a, b]), "append calls in the order they appear"),
        Case("text split into two parts", ([msg("Hel", "lo")],), ("Hello", []),
             "join all output_text parts of a message with ''"),
        Case("text and a call in one reply", ([msg("Checking."), weather],), ("Checking.", [a]),
             "a reply can hold a message and calls at once; keep both"),
        Case("empty output", ([],), ("", []), "no items: return ('', [])"),
    ], reference=read_output)


TASK = _task()
