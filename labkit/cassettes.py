"""Cassettes: a live run recorded as the script a real model wrote, and replayed offline.

Built in 01_setup; every notebook's Go live replays one. A cassette is JSON lines: a header (the
label: model, server, provider, API, date, labkit version), then one line per reply: its Reply
fields, the fingerprint of the request (a hash of labkit's canonical request, secrets scrubbed),
that request's messages (to name where a changed one differs) and the raw JSON the SDK returned.
`Recorder` wraps a live model and writes; `Replayer` answers in order and stops at the first
request that differs from the recording. Deliberately left out: loose matching (a changed request
is an error: re-record), reasoning items, stream timing (a replayed stream is split into words).
"""

import copy
import datetime
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from . import errors
from .config import Settings, load_settings, redact
from .errors import LabkitError, UserError
from .keys import secrets_from_env
from .models import (
    CappedModel,
    Completed,
    NamedModel,
    OutputSchema,
    Reply,
    StreamEvent,
    StreamingModel,
    ToolCall,
    Usage,
    as_tool_spec,
    check_tool_choice,
    stream_reply,
)
from .trace import clip

FORMAT = 1  # the header's "cassette" field: which layout the lines follow
MAX_BYTES = 50_000_000  # a cassette larger than this is refused, never read whole
_started: set = set()  # cassettes this process began recording (later connects append to them)
_cursor: dict = {}  # cassette path -> where the last replaying model left off


def scrubbed(value: Any, secrets: Iterable[object] | None = None) -> Any:
    """Every string in a JSON value with keys, key-like text, URL credentials and the values of
    secret-named environment variables (…_TOKEN, …_KEY) redacted. Keys of objects too."""
    secrets = secrets_from_env() if secrets is None else secrets
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {scrubbed(k, secrets): scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(v, secrets) for v in value]
    return value


def _said(message) -> str:
    """One message as one line of text: what a reader compares."""
    text = (
        f"[{message.tool_call_id}] {message.content}" if message.tool_call_id else message.content
    )
    return text + "".join(f"\n-> {c.id} {c.name}({c.arguments})" for c in message.tool_calls)


def canonical_request(
    messages: list,
    tools: Sequence[object] = (),
    max_output_tokens: int | None = None,
    output_schema: OutputSchema | None = None,
    tool_choice: str = "auto",
) -> dict:
    """The request as labkit sends it, the same for both APIs, with secrets scrubbed.

    A tool_choice other than "auto" is part of it; "auto" is left out, so a cassette recorded
    before labkit had tool_choice keeps its fingerprints.
    Example: canonical_request([user("ping")])["messages"]  ->  [["user", "ping"]]
    """
    specs = [vars(as_tool_spec(t)) for t in tools]
    request = {
        "messages": [[m.role, _said(m)] for m in messages],
        "tools": specs,
        "max_output_tokens": max_output_tokens,
        "output_schema": vars(output_schema) if output_schema else None,
    }
    if check_tool_choice(tool_choice, tools) != "auto":
        request["tool_choice"] = tool_choice
    return scrubbed(request)


def request_fingerprint(request: dict) -> str:
    """A canonical request's short hash. Example: request_fingerprint(canonical_request(msgs))"""
    text = json.dumps(request, sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def label_line(header: dict) -> str:
    """The one line shown wherever a cassette is replayed.

    Example: label_line(header)  ->  "replaying a recording of SmolLM2-135M-Instruct (...) made ..."
    """
    return (
        f"replaying a recording of {header.get('model')} ({header.get('server')}) made "
        f"{header.get('date')}"
    )


@dataclass
class Cassette:
    name: str  # the notebook it belongs to, e.g. "04_loop"
    header: dict  # the label
    entries: list  # one dict per recorded reply


def cassette_path(name: str | Path, folder: str | Path) -> Path:
    """Where cassette `name` lives: <folder>/<name>.jsonl (a path ending in .jsonl is kept)."""
    path = Path(name)
    return path if path.suffix == ".jsonl" else Path(folder) / f"{name}.jsonl"


def load(path: str | Path) -> Cassette:
    """Read a cassette; a missing or damaged one is a UserError saying how to record it.

    Example: load("data/cassettes/04_loop.jsonl").header["model"]
    """
    path = Path(path)
    again = f"record it: make cassettes NB=notebooks/{path.stem}.ipynb"
    if not path.is_file():
        raise UserError(f"no cassette {path.stem} (looked for {path.name}) — {again}")
    with path.open("rb") as raw:  # bounded: a device file or a runaway recording cannot fill memory
        data = raw.read(MAX_BYTES + 1)
    lines, problem = [], None
    try:
        if len(data) > MAX_BYTES:
            raise ValueError(f"it is over {MAX_BYTES:,} bytes")
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        problem = f"it cannot be read ({clip(exc, 60)})"
    if problem is None and not (lines and isinstance(lines[0], dict)):
        problem = "it has no header line"
    if problem is None and lines[0].get("cassette") != FORMAT:
        problem = f"its header is not format {FORMAT}"
    for number, entry in enumerate(lines[1:] if problem is None else [], start=2):
        problem = _entry_problem(entry)
        if problem:
            problem = f"line {number} {problem}"
            break
    if problem:
        raise UserError(
            f"cassette {path.stem} is not a labkit cassette (format {FORMAT}): {problem} — {again}"
        )
    return Cassette(path.stem, lines[0], lines[1:])


def _strings(value, n) -> bool:
    return isinstance(value, list) and len(value) == n and all(isinstance(v, str) for v in value)


def _entry_problem(entry) -> str | None:
    """What is wrong with one recorded reply's line, or None: a damaged cassette stops at load."""
    if not isinstance(entry, dict):
        return "is not an object"
    if not isinstance(entry.get("fingerprint"), str):
        return "has no fingerprint"
    request = entry.get("request")
    if not isinstance(request, list) or not all(_strings(m, 2) for m in request):
        return "has no request messages ([role, text] pairs)"
    if "error" in entry and entry["error"] is not None:
        return None if _strings(entry["error"], 2) else "has an error that is not [kind, message]"
    said = entry.get("reply")
    if not isinstance(said, dict):
        return "has neither a reply nor an error"
    wrong = [name for name, ok in _reply_checks(said) if not ok]
    return f"has a reply whose {wrong[0]} has the wrong type" if wrong else None


def _reply_checks(said: dict) -> list[tuple[str, bool]]:
    """(field, whether its type is right) for each Reply field of a recorded reply, in order."""
    calls, usage = said.get("tool_calls", []), said.get("usage")
    return [
        ("text", isinstance(said.get("text", ""), str)),
        ("tool_calls", isinstance(calls, list) and all(_strings(c, 3) for c in calls)),
        ("usage", usage is None or _counts(usage, 3)),
        ("status", isinstance(said.get("status", "completed"), str)),
        ("incomplete_reason", isinstance(said.get("incomplete_reason"), str | None)),
    ]


def _counts(value, n) -> bool:
    """Whether value is a list of n token counts (whole numbers, not booleans, never negative)."""
    counts = isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)
    return counts and len(value) == n


def recorded(name: str) -> Cassette:
    """A cassette by notebook name, from the configured folder (LABKIT_CASSETTE_DIR or
    data/cassettes). Example: recorded("01_setup").entries[0]["raw"]  ->  the SDK's JSON"""
    return load(cassette_path(name, load_settings().cassette_dir))


def _reply(entry) -> Reply:
    if entry.get("error"):  # the live call failed: replay fails the same way
        kind, message = entry["error"]
        cls = getattr(errors, kind, None)
        cls = cls if isinstance(cls, type) and issubclass(cls, LabkitError) else UserError
        raise cls(message)
    said = entry["reply"]
    usage = said.get("usage")
    return Reply(
        said.get("text", ""),
        [ToolCall(*c) for c in said.get("tool_calls", [])],
        Usage(*usage) if usage else None,
        said.get("status", "completed"),
        said.get("incomplete_reason"),
    )


def _options(max_output_tokens, output_schema, tool_choice) -> dict[str, Any]:
    """The options of a request, as the keywords every model takes."""
    return dict(
        max_output_tokens=max_output_tokens, output_schema=output_schema, tool_choice=tool_choice
    )


class Recordable(StreamingModel, CappedModel, Protocol):
    """What a Recorder records: a model that streams, has a cap and sums its usage (a live one)."""

    usage: Usage


class Recorder:
    """A live model whose every reply is also written to a cassette, with the request's
    fingerprint. The first Recorder of a cassette in a process starts it afresh; later ones
    (the notebook's next Go live cell) append. Example: Recorder(live_model, path, header)"""

    def __init__(self, model: Recordable, path: str | Path, header: dict) -> None:
        self.live, self.path, self.header = model, Path(path), header
        self.scrub: Callable[[Any], Any] | None = None  # run_guarded's own, when it records
        self.model = model.model if isinstance(model, NamedModel) else ""
        if self.path not in _started:
            _started.add(self.path)
            self.path.write_text(json.dumps(scrubbed(header)) + "\n", encoding="utf-8")
        self.replies = 0

    def scrubbing(self, scrub: Callable[[Any], Any]) -> "Recorder":
        """This recorder, writing each entry through `scrub` too (run_guarded's secrets): a copy.

        Example: Recorder(live, path, header).scrubbing(Secrets(["hunter22"]).scrub)
        """
        other = copy.copy(self)
        other.scrub = scrub
        return other

    @property
    def max_output_tokens(self) -> int | None:
        return self.live.max_output_tokens

    @property
    def usage(self) -> Usage:
        return self.live.usage

    def respond(
        self,
        messages: list,
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Reply:
        """The live model's reply, written down. Example: Recorder(...).respond([user("ping")])"""
        options = _options(max_output_tokens, output_schema, tool_choice)
        canonical_request(messages, tools, **options)  # a bad tool_choice is not kept
        try:
            reply = self.live.respond(messages, tools, **options)
        except LabkitError as error:  # a failure is part of what happened: keep it too
            self._write(messages, tools, options, None, None, error)
            raise
        self._write(messages, tools, options, reply, getattr(self.live, "last_raw", None))
        return reply

    def stream(
        self,
        messages: list,
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Iterator[StreamEvent]:
        """The live model's stream, its completed reply written down."""
        options = _options(max_output_tokens, output_schema, tool_choice)
        canonical_request(messages, tools, **options)
        for event in self.live.stream(messages, tools, **options):
            if isinstance(event, Completed):
                self._write(messages, tools, options, event.reply, None)
            yield event

    def _write(self, messages, tools, options, reply, raw, error=None):
        request = canonical_request(messages, tools, **options)
        usage = reply.usage if reply else None
        self.replies += 1
        entry = {
            "reply": None
            if reply is None
            else {
                "text": reply.text,
                "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls],
                "usage": [usage.input_tokens, usage.output_tokens, usage.total_tokens]
                if usage
                else None,
                "status": reply.status,
                "incomplete_reason": reply.incomplete_reason,
            },
            "fingerprint": request_fingerprint(request),
            "request": request["messages"],
            "raw": raw,
        }
        if error is not None:
            entry["error"] = [type(error).__name__, str(error)]
        with self.path.open("a", encoding="utf-8") as out:
            entry = scrubbed(entry) if self.scrub is None else self.scrub(scrubbed(entry))
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def __repr__(self):
        return f"Recorder({self.live!r} -> cassette {self.path.stem})"


class Replayer:
    """A model that answers from a cassette: the replies a real model gave, in order.

    Its first request may match any recorded one (a cell run again starts over); each later one
    must be the next. A request that differs is a UserError naming the first differing message.
    Example: Replayer("data/cassettes/04_loop.jsonl").respond(messages, tools)
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.cassette = load(self.path)
        self.model = self.cassette.header.get("model", "")
        self.max_output_tokens = None  # what the recording asked for is in each request
        self.position: int | None = None  # the next entry, once the first request has matched
        self.usage, self.unreported_turns = Usage(), 0

    @property
    def label(self) -> str:
        return label_line(self.cassette.header)

    def respond(
        self,
        messages: list,
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Reply:
        """The recorded reply to this request; a changed request stops with where it differs."""
        options = _options(max_output_tokens, output_schema, tool_choice)
        request = canonical_request(messages, tools, **options)
        found, entries = request_fingerprint(request), self.cassette.entries
        if self.position is None:  # the first request: search from where the last model stopped
            expected = _cursor.get(self.path, 0) % max(len(entries), 1)
            order = [*range(expected, len(entries)), *range(expected)]
            at = next((i for i in order if entries[i]["fingerprint"] == found), None)
        else:
            expected = self.position
            at = expected if expected < len(entries) else None
            at = at if at is not None and entries[at]["fingerprint"] == found else None
        if at is None:
            raise UserError(self._difference(expected, request))
        self.position = _cursor[self.path] = at + 1
        reply = _reply(entries[at])
        if reply.usage is None:
            self.unreported_turns += 1
        else:
            self.usage = self.usage + reply.usage
        return reply

    def stream(
        self,
        messages: list,
        tools: Sequence[object] = (),
        *,
        max_output_tokens: int | None = None,
        output_schema: OutputSchema | None = None,
        tool_choice: str = "auto",
    ) -> Iterator[StreamEvent]:
        """The recorded reply as stream events, word by word."""
        options = _options(max_output_tokens, output_schema, tool_choice)
        yield from stream_reply(self.respond(messages, tools, **options))

    def _difference(self, index, request) -> str:
        """Where a request departs from recorded reply `index`, and how to fix it."""
        name, entries = self.cassette.name, self.cassette.entries
        fix = (
            f"the notebook's requests changed since the recording: re-record with make cassettes "
            f"NB=notebooks/{name}.ipynb, or undo the change"
        )
        if index >= len(entries):
            return (
                f"cassette {name} holds {len(entries)} replies and was asked for one more — {fix}"
            )
        recorded, now = entries[index]["request"], request["messages"]
        for i, (old, new) in enumerate(zip(recorded, now, strict=False)):
            if old != new:
                role = new[0] if old[0] == new[0] else f"{old[0]} -> {new[0]}"
                k = next(
                    (j for j, (a, b) in enumerate(zip(old[1], new[1], strict=False)) if a != b),
                    min(len(old[1]), len(new[1])),
                )
                return (
                    f"cassette {name}, request {index + 1}: message {i + 1} ({role}) differs from "
                    f"the recording at character {k + 1}: recorded {old[1][k : k + 40]!r}, now "
                    f"{new[1][k : k + 40]!r} — {fix}"
                )
        if len(recorded) != len(now):
            return (
                f"cassette {name}, request {index + 1}: {len(now)} messages, the recording has "
                f"{len(recorded)} — {fix}"
            )
        return (
            f"cassette {name}, request {index + 1}: the same messages, but the tools, the output "
            f"cap, the output schema or the tool_choice differ from the recording — {fix}"
        )

    def __repr__(self):
        return f"Replayer({self.label}, {len(self.cassette.entries)} replies)"


def new_header(
    settings: Settings, server: str, today: Callable[[], datetime.date] = datetime.date.today
) -> dict:
    """The label of a cassette recorded now with these settings.

    Example: new_header(load_settings(), "llama.cpp, local")["date"]  ->  "2026-12-01"
    """
    return {
        "cassette": FORMAT,
        "model": settings.model,
        "server": server,
        "provider": settings.provider or ("openai" if settings.official else "custom"),
        "api": settings.api,
        "date": today().isoformat(),
        "labkit": metadata.version("labkit"),
    }
