"""Live models: the same messages sent to a real API through the official `openai` SDK.

Built in 01_setup. `ResponsesModel` (Responses API, store=False, the default) and `ChatModel`
(Chat Completions, what most OpenAI-compatible local servers speak) return the same Reply as the
scripted model, whole (`respond`) or streamed (`stream`), with strict JSON-schema output and a
tool_choice (translated for each API) on request.
`connect()` picks a model from the settings (scripted, live, recording or replaying a cassette);
`request_preview()` shows the exact JSON body live mode would POST, computed offline. Every SDK
failure becomes a one-line labkit error without the key; the key itself lives only in the SDK
client (`openai_client` makes every one). `doctor()` and `probe()` are in probe.py.
Deliberately left out: images and audio, async, automatic retries.
"""

import json

from . import cassettes
from .config import (
    DEFAULT_MODEL,
    OFFICIAL_BASE_URL,
    PROVIDERS,
    TIMEOUT_SECONDS,
    checked_retries,
    checked_timeout,
    key_required,
    load_settings,
    redact,
    shown_url,
)
from .errors import ServiceError, UserError, call_service
from .keys import key_problem
from .models import (
    Completed,
    OutputSchema,
    Reply,
    ScriptedModel,
    ToolCall,
    Usage,
    check_pairing,
    check_tool_choice,
    choice_to_api,
    tighter,
    to_api,
)
from .stream import chat_events, responses_events


def read_output(items: list) -> tuple[str, list[ToolCall]]:
    """Read a Responses API `output` list into (text, [ToolCall, ...]); skip reasoning and others.

    Example: read_output([{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}])
             ->  ("hi", [])
    """
    texts, calls = [], []
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


def sent_call(call_id: str, name, arguments) -> ToolCall:
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
    tools=(),
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
    tools=(),
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
    body = {"model": model, "messages": out}
    if tools:
        body["tools"] = [to_api(t, "chat") for t in tools]
    _choose(body, tool_choice, tools, "chat")
    if max_output_tokens:
        body[cap_name] = max_output_tokens
    if output_schema:
        body["response_format"] = {"type": "json_schema", "json_schema": _strict(output_schema)}
    return body


def request_preview(
    messages: list,
    tools=(),
    api: str | None = None,
    model: str | None = None,
    tool_choice: str = "auto",
) -> dict:
    """The exact JSON body live mode would POST, computed offline (no key, no network).

    Example: request_preview([user("ping")])["input"]  ->  [{"role": "user", "content": "ping"}]
    request_preview(msgs, [get_weather], "chat", tool_choice="get_weather")["tool_choice"]
             ->  {"type": "function", "function": {"name": "get_weather"}}
    """
    s = load_settings()
    api, model = api or s.api, model or s.model
    if api not in ("responses", "chat"):
        raise UserError(f"api={api!r} is not an API — use 'responses' or 'chat'")
    if api == "responses":
        return responses_body(model, messages, tools, tool_choice=tool_choice)
    return chat_body(model, messages, tools, tool_choice=tool_choice)


def _usage(data, names):
    """Usage from a response body, or None when the server did not report it (local servers)."""
    raw = data.get("usage")
    if not isinstance(raw, dict):
        return None
    inp, out = int(raw.get(names[0]) or 0), int(raw.get(names[1]) or 0)
    return Usage(inp, out, int(raw.get("total_tokens") or inp + out))


def openai_client(
    api_key: str | None = None,
    base_url: str = OFFICIAL_BASE_URL,
    timeout: float = TIMEOUT_SECONDS,
    max_retries: int = 0,
    key_name: str = "OPENAI_API_KEY",
    key_source: str | None = None,
):
    """The one way labkit makes an `openai.OpenAI` client: the key and the settings checked first.

    Live models and live embeddings (labkit.embed) both get their client here.
    Example: openai_client(settings.api_key, settings.base_url).models.list()
    """
    official, required = base_url == OFFICIAL_BASE_URL, key_required(base_url, key_name)
    problem = key_problem(api_key, official, key_name, key_source, required)
    if problem:
        raise UserError(problem)
    timeout, max_retries = checked_timeout(timeout), checked_retries(max_retries)
    import openai  # imported here: offline lessons never need it

    # base_url is always passed, so the SDK never reads a stray OPENAI_BASE_URL
    return openai.OpenAI(
        api_key=api_key or "no-key-needed",
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
    )


class _LiveModel:
    """What both adapters share: settings, sending, turning SDK failures into labkit errors."""

    def __init__(
        self,
        model=DEFAULT_MODEL,
        *,
        api_key=None,
        base_url=OFFICIAL_BASE_URL,
        timeout=TIMEOUT_SECONDS,
        max_retries=0,
        key_name="OPENAI_API_KEY",
        key_source=None,
        max_output_tokens=None,
    ):
        self._client = openai_client(api_key, base_url, timeout, max_retries, key_name, key_source)
        self._key_sent = bool(api_key)  # False: a local server that takes no key got none
        # the URL as shown (a password in it masked); the client keeps the real one, and the key
        self.model, self.base_url = model, shown_url(base_url)
        self.timeout = self._client.timeout
        self.key_source = key_source  # where the key was set, for a 401's fix
        # a cap on each reply; None: the server's default
        self.max_output_tokens = max_output_tokens
        self.usage = Usage()  # sums only what the server reported
        self.unreported_turns = 0  # replies that came without usage
        self.last_raw = None  # the JSON the SDK returned for the last reply sent whole

    def _redact(self, text):
        """text without this model's key (which need not be a configured one)."""
        return redact(text, (self._client.api_key,))

    def _call(self, body):
        """POST the body through the SDK; a failure to start becomes one labkit error."""
        raw = call_service(
            lambda: self._send(body),
            self.model,
            self.base_url,
            self.timeout,
            self.key_source,
            (self._client.api_key,),
            self._key_sent,
        )
        if isinstance(raw, str):  # the SDK hands back text when the body was not JSON
            raise ServiceError(
                f"bad response: {self.base_url} answered with a web page or plain text, "
                "not JSON — the base URL must be the API root (usually ending in /v1)"
            )
        return raw

    def _count(self, reply):
        if reply.usage is None:
            self.unreported_turns += 1
        else:
            self.usage = self.usage + reply.usage
        return reply

    def respond(
        self,
        messages: list,
        tools=(),
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Reply:
        """Send the messages; cap the reply at the tighter of the model's and this call's cap.

        Example: model.respond(messages, [get_weather], tool_choice="get_weather")
        """
        body = self.request_preview(messages, tools, max_output_tokens, output_schema, tool_choice)
        return self.send(body)

    def send(self, body: dict) -> Reply:
        """POST this exact body (a request_preview, perhaps changed) and read the reply.

        Example: model.send({**model.request_preview(msgs, tools), "tool_choice": "required"})
        """
        raw = self._call(body)
        # warnings=False — a server may send a field the SDK's types do not expect (a tool
        # name as a list); _parse reads whatever came, so the SDK's serializer warning is only noise
        self.last_raw = raw.to_dict(warnings=False) if hasattr(raw, "to_dict") else raw
        return self._count(self._parse(self.last_raw))

    def stream(
        self,
        messages: list,
        tools=(),
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ):
        """Send the messages with stream=True; yield TextDelta, ToolCallDelta, then Completed.

        Example: reply = collect(model.stream([user("ping")]))
        """
        body = self.request_preview(messages, tools, max_output_tokens, output_schema, tool_choice)
        events = self._read(self._call({**body, **self._streaming}), self._parse)
        for event in events:
            if isinstance(event, Completed):
                self._count(event.reply)
            yield event

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

    _streaming, _read = {"stream": True}, staticmethod(responses_events)

    def request_preview(
        self,
        messages: list,
        tools=(),
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> dict:
        """The exact JSON body this model would POST to /responses.
        Example: model.request_preview(msgs)"""
        cap = tighter(self.max_output_tokens, max_output_tokens)
        return responses_body(
            self.model, messages, tools, self.replay_reasoning, cap, output_schema, tool_choice
        )

    def _send(self, body):
        return self._client.responses.create(**body)

    def _parse(self, data):
        if data.get("status") == "failed" or data.get("error"):
            message = self._redact((data.get("error") or {}).get("message", "no message"))
            raise ServiceError(f"the response failed on the server ({message}) — try again")
        text, calls = read_output(data.get("output") or [])
        reasoning = [
            {k: item[k] for k in ("type", "id", "summary", "encrypted_content") if k in item}
            for item in data.get("output") or []
            if item.get("type") == "reasoning" and item.get("encrypted_content")
        ]
        status = "incomplete" if data.get("status") == "incomplete" else "completed"
        reason = (
            (data.get("incomplete_details") or {}).get("reason") if status == "incomplete" else None
        )
        return Reply(
            text,
            calls,
            _usage(data, ("input_tokens", "output_tokens")),
            status,
            reason,
            reasoning if self.replay_reasoning else [],
        )


class ChatModel(_LiveModel):
    """The Chat Completions API with tool_calls: what most OpenAI-compatible servers speak.

    Example: ChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1").respond([user("ping")])
    """

    # usage arrives in a last chunk only when asked for
    _streaming = {"stream": True, "stream_options": {"include_usage": True}}
    _read = staticmethod(chat_events)

    def request_preview(
        self,
        messages: list,
        tools=(),
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> dict:
        """The exact JSON body this model would POST to /chat/completions.
        Example: model.request_preview(msgs, [get_weather], tool_choice="required")"""
        cap = tighter(self.max_output_tokens, max_output_tokens)
        name = "max_completion_tokens" if self.base_url == OFFICIAL_BASE_URL else "max_tokens"
        return chat_body(self.model, messages, tools, cap, output_schema, name, tool_choice)

    def _send(self, body):
        return self._client.chat.completions.create(**body)

    def _parse(self, data):
        choices = data.get("choices") or []
        if not choices:
            raise ServiceError(
                f"bad response: {self.base_url} returned no choices — try again, or check "
                "that the server supports this model"
            )
        message, finish = choices[0].get("message") or {}, choices[0].get("finish_reason")
        calls = []
        for i, c in enumerate(message.get("tool_calls") or [], 1):
            c = c if isinstance(c, dict) else {}
            function = c.get("function") if isinstance(c.get("function"), dict) else {}
            call_id = c.get("id") or f"call_{i}"
            calls.append(sent_call(call_id, function.get("name"), function.get("arguments")))
        reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish)
        return Reply(
            message.get("content") or message.get("refusal") or "",
            calls,
            _usage(data, ("prompt_tokens", "completion_tokens")),
            "incomplete" if reason else "completed",
            reason,
        )


def connect(
    mode: str | None = None,
    script=(),
    max_output_tokens: int | None = None,
    cassette: str | None = None,
):
    """The model the settings ask for: scripted offline (the default), live, or a cassette's.

    Example: model = connect(script=[say("pong")], cassette="01_setup")
    offline: the script; live: a real model (OPENAI_API_KEY, or a LABKIT_PROVIDER preset's key);
    record: live, every reply also written to the cassette; replay: the cassette answers, offline
    (a connect without a cassette stays scripted). max_output_tokens caps each live reply (default:
    the preset's cap, if it has one). When live mode cannot start (no key, a bad setting) in a Go
    live cell (a script or a cassette given), it prints why in one line and returns the scripted
    model, so Run All goes on; a bare connect() raises.
    """
    s = load_settings(mode)
    preset = PROVIDERS.get(s.provider)
    path = cassettes.cassette_path(cassette, s.cassette_dir) if cassette else None
    if s.mode == "offline" or (s.mode == "replay" and path is None):
        return ScriptedModel(script)
    if s.mode == "replay":
        return cassettes.Replayer(path)
    cls = ResponsesModel if s.api == "responses" else ChatModel
    try:
        model = cls(
            s.model,
            api_key=s.api_key,
            base_url=s.base_url,
            timeout=s.timeout,
            max_retries=s.max_retries,
            key_name=s.key_name,
            key_source=s.key_source,
            max_output_tokens=max_output_tokens or (preset.max_output_tokens if preset else None),
        )
    except UserError as error:
        if not (script or cassette):  # not a notebook's Go live cell: the caller must see it
            raise
        print(f"live mode cannot start: {error}; this cell runs its scripted model instead.")
        return ScriptedModel(script)
    if s.mode == "live" or path is None:
        return model
    server = preset.server if preset else "OpenAI API" if s.official else shown_url(s.base_url)
    return cassettes.Recorder(model, path, cassettes.new_header(s, server))


def describe(model) -> str:
    """One line saying which model answers and how to switch. Example: print(describe(model))"""
    if isinstance(model, ScriptedModel):
        return (
            f"offline: a scripted model replays {len(model.steps)} written step(s); no key, no "
            "network. To go live set LABKIT_MODE=live and OPENAI_API_KEY in .env, then restart the "
            "kernel."
        )
    if isinstance(model, cassettes.Replayer):
        return f"replay: {model.label}; no key, no network."
    if isinstance(model, cassettes.Recorder):
        return f"{describe(model.live)} Recording to cassette {model.path.stem}."
    where = "the OpenAI API" if model.base_url == OFFICIAL_BASE_URL else model.base_url
    api = "Responses API" if isinstance(model, ResponsesModel) else "Chat Completions API"
    return f"live: {model.model} via {where} ({api}); answers vary from run to run."
