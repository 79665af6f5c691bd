"""Live models: the same messages sent to a real API through the official `openai` SDK.

Built in 01_setup. `ResponsesModel` (Responses API, store=False, the default) and `ChatModel`
(Chat Completions, what most OpenAI-compatible local servers speak) return the same Reply as the
scripted model, whole (`respond`) or streamed (`stream`), with strict JSON-schema output and a
tool_choice (translated for each API) on request.
`connect()` picks a model from the settings (scripted, live, recording or replaying a cassette);
`request_preview()` shows the exact JSON body live mode would POST, computed offline. Every SDK
failure becomes a one-line labkit error without the key; the key itself lives only in the SDK
client (`openai_client` makes every one). The JSON bodies and reply readers are in wire.py;
`doctor()` and `probe()` are in probe.py. Left out: images and audio, async, automatic retries.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

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
from .errors import ServiceError, UserError
from .failures import call_service
from .keys import key_problem
from .models import (
    Completed,
    Model,
    OutputSchema,
    Reply,
    ScriptedModel,
    StreamEvent,
    Usage,
    tighter,
)
from .stream import chat_events, responses_events
from .wire import (  # noqa: F401 (read_output and sent_call: labkit.live's, as 01 names them)
    chat_body,
    read_output,
    read_reasoning,
    read_usage,
    responses_body,
    sent_call,
)

if TYPE_CHECKING:  # the SDK is imported only when a live model is made
    import openai


def request_preview(
    messages: list,
    tools: Sequence[object] = (),
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


def openai_client(
    api_key: str | None = None,
    base_url: str = OFFICIAL_BASE_URL,
    timeout: float = TIMEOUT_SECONDS,
    max_retries: int = 0,
    key_name: str = "OPENAI_API_KEY",
    key_source: str | None = None,
) -> "openai.OpenAI":
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

    # each adapter sets these for its API
    _streaming: dict  # the body fields that ask for a stream
    _read: Callable[..., Iterator[StreamEvent]]  # (stream, parse) -> the stream's events

    def request_preview(
        self,
        messages: list,
        tools: Sequence[object] = (),
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> dict:
        raise NotImplementedError  # each adapter builds its API's body

    def _parse(self, data) -> Reply:
        raise NotImplementedError  # each adapter reads its API's reply

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
        tools: Sequence[object] = (),
        *,
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
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Iterator[StreamEvent]:
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

    def __init__(
        self, model: str = DEFAULT_MODEL, *, replay_reasoning: bool = False, **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.replay_reasoning = replay_reasoning

    _streaming, _read = {"stream": True}, staticmethod(responses_events)

    def request_preview(
        self,
        messages: list,
        tools: Sequence[object] = (),
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
        status, reason = "completed", None
        if data.get("status") == "incomplete":
            status, reason = "incomplete", (data.get("incomplete_details") or {}).get("reason")
        usage = read_usage(data, ("input_tokens", "output_tokens"))
        reasoning = read_reasoning(data.get("output") or []) if self.replay_reasoning else []
        return Reply(text, calls, usage, status, reason, reasoning)


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
        tools: Sequence[object] = (),
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
            read_usage(data, ("prompt_tokens", "completion_tokens")),
            "incomplete" if reason else "completed",
            reason,
        )


def connect(
    mode: str | None = None,
    script: Iterable[object] = (),  # Steps, or functions (messages, tools) -> Step
    max_output_tokens: int | None = None,
    cassette: str | None = None,
) -> Model:
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
    path = cassettes.cassette_path(cassette, s.cassette_dir) if cassette else None
    if s.mode == "offline" or (s.mode == "replay" and path is None):
        return ScriptedModel(script)
    if s.mode == "replay" and path is not None:  # replay without a path returned above
        return cassettes.Replayer(path)
    try:
        model = _live_model(s, max_output_tokens)
    except UserError as error:
        if not (script or cassette):  # not a notebook's Go live cell: the caller must see it
            raise
        print(f"live mode cannot start: {error}; this cell runs its scripted model instead.")
        return ScriptedModel(script)
    if s.mode == "live" or path is None:
        return model
    return cassettes.Recorder(model, path, cassettes.new_header(s, _server_name(s)))


def _live_model(settings, max_output_tokens: int | None = None) -> "ResponsesModel | ChatModel":
    """The live model the settings name, each reply capped at max_output_tokens (default: the
    provider preset's cap, if it has one). Example: _live_model(load_settings("live")).model"""
    preset = PROVIDERS.get(settings.provider)
    cls = ResponsesModel if settings.api == "responses" else ChatModel
    return cls(
        settings.model,
        api_key=settings.api_key,
        base_url=settings.base_url,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        key_name=settings.key_name,
        key_source=settings.key_source,
        max_output_tokens=max_output_tokens or (preset.max_output_tokens if preset else None),
    )


def _server_name(settings) -> str:
    """Who serves the settings' model, for a cassette's label: a preset's server, the OpenAI API,
    or the base URL as shown. Example: _server_name(load_settings())  ->  "OpenAI API" """
    preset = PROVIDERS.get(settings.provider)
    if preset:
        return preset.server
    return "OpenAI API" if settings.official else shown_url(settings.base_url)


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
