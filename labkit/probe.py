"""Diagnostics: `doctor()` reports your setup; `probe()` asks the endpoint what it supports.

Built in 01_setup. `doctor()` prints Python, packages, mode, .env, key (never its value), model and
endpoint. `probe()` sends a few small requests through each API (Responses, Chat): does it
answer, does a forced tool call come back as a tool call, is a strict JSON schema honoured, is
usage reported, and does the model answer after a tool output or call the tool again (some local
servers loop on Responses-style tool outputs). It prints a table and the LABKIT_API to use.
Deliberately left out: streaming and parallel-call checks, latency; production suites (e.g. the
Berkeley function-calling leaderboard) test a model's tool use far more widely.
"""

import json
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

from .config import REPO_ROOT, key_required, load_settings, shown_url
from .errors import LabkitError, UserError
from .failures import explain
from .live import ChatModel, ResponsesModel
from .models import (
    Message,
    OutputSchema,
    ToolCall,
    schema_problem,
    tool_message,
    user,
)

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
VERDICT = OutputSchema(
    "verdict",
    {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"],
        "additionalProperties": False,
    },
)
CHECKS = {  # check -> how the table names it
    "speaks": "answers on this API",
    "tool_call": "a forced tool call comes back",
    "json_schema": "a strict JSON schema is honoured",
    "usage": "usage is reported",
    "after_tool": "answers after a tool output",
}


def _checks(model, api) -> dict:
    """{check: (ok, note)} for one API; after a failure to answer at all, the rest are skipped."""
    found, replies = {}, []

    def ask(check, body, judge):
        try:
            reply = model.send(body)
        except LabkitError as error:
            said = explain(error)
            # a 404 on the path itself: this server does not serve this API at all
            missing = check == "speaks" and said.startswith("404")
            found[check] = (False, "404: not served here" if missing else said[:60])
            return
        replies.append(reply)
        found[check] = judge(reply)

    ask("speaks", model.request_preview([user("Reply with the word OK.")]), lambda r: (True, ""))
    if not found["speaks"][0]:
        return found
    # forced by name: each adapter writes tool_choice the way its API names one function
    forced = model.request_preview(
        [user("Weather in Paris?")], [WEATHER], tool_choice=WEATHER["name"]
    )
    ask("tool_call", forced, _called)
    asked = model.request_preview(
        [user("Is Paris in France? Answer yes or no.")], (), None, VERDICT
    )
    ask("json_schema", asked, lambda r: _honoured(schema_problem(r.text, VERDICT)))
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    history = [
        user("What is the weather in Paris?"),
        Message("assistant", "", [call]),
        tool_message(call, json.dumps({"ok": True, "data": {"temp_c": 14}})),
    ]
    ask("after_tool", model.request_preview(history, [WEATHER]), _answered)
    reported = any(r.usage is not None for r in replies)
    found["usage"] = (reported, "" if reported else "no usage in any reply")
    return found


def _called(reply):
    names = [c.name for c in reply.tool_calls]
    return ("get_weather" in names, "" if names else f"answered in text: {reply.text[:40]!r}")


def _honoured(problem):
    return (problem is None, (problem or "")[:60])


def _answered(reply):
    if reply.tool_calls:
        return (False, "called the tool again: a loop")
    return (bool(reply.text.strip()), "" if reply.text.strip() else "said nothing")


def recommend(results: dict) -> str:
    """The LABKIT_API to use from probe results: the first API that answers, tool calls work and
    that does not loop after a tool output. Example: recommend(probe())  ->  "chat" """

    def score(api):
        got = results.get(api, {})
        return [got.get(c, (False,))[0] for c in ("speaks", "tool_call", "after_tool")]

    usable = [api for api in ("responses", "chat") if all(score(api))]
    speaking = [api for api in ("responses", "chat") if score(api)[0]]
    return (usable or speaking or [""])[0]


def probe(environ: dict | None = None, show: Callable[[str], object] = print) -> dict:
    """Ask the configured endpoint what it supports, print a table and the LABKIT_API to use.

    Returns {api: {check: (ok, note)}}. Sends real requests: run it in live mode only.
    Example: labkit.probe()   # with LABKIT_PROVIDER=local and `make local-model` running
    """
    s = load_settings(environ=environ)
    if s.key_problem():  # every request would be refused: send none
        show(f"probe cannot start: {s.key_problem()}")
        return {}
    options: dict[str, Any] = dict(
        api_key=s.api_key,
        base_url=s.base_url,
        timeout=s.timeout,
        key_name=s.key_name,
        key_source=s.key_source,
    )
    results = {
        api: _checks(cls(s.model, **options), api)
        for api, cls in (("responses", ResponsesModel), ("chat", ChatModel))
    }
    lines = [
        f"probe of {shown_url(s.base_url)}  model {s.model}",
        f"  {'check':34} {'responses':14} chat",
    ]
    for check, words in CHECKS.items():
        cells = []
        for api in ("responses", "chat"):
            ok, note = results[api].get(check, (None, ""))
            cells.append("-" if ok is None else "yes" if ok else "no")
        lines.append(f"  {words:34} {cells[0]:14} {cells[1]}")
    for api in ("responses", "chat"):
        lines += [f"  {api}: {CHECKS[c]}: {note}" for c, (_, note) in results[api].items() if note]
    best = recommend(results)
    lines.append(
        f"  use: LABKIT_API={best}"
        if best
        else "  use: neither API answered — check LABKIT_BASE_URL and that the server runs"
    )
    show("\n".join(lines))
    return results


# ---------------------------------------------------------------- the doctor


def _package_report():
    """Compare installed versions with requirements-lock.txt; return one line."""
    lock = REPO_ROOT / "requirements-lock.txt"
    if not lock.is_file():
        return "lock file not found (labkit was installed outside its repository)"
    wrong = []
    for line in lock.read_text().splitlines():
        name, sep, pinned = line.partition("==")
        if not sep or line.startswith("#"):
            continue
        try:
            installed = metadata.version(name.strip())
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} missing")
            continue
        if installed.split("+")[0] != pinned.strip():
            wrong.append(f"{name} {installed} (lock: {pinned.strip()})")
    if not wrong:
        return "match requirements-lock.txt  ok"
    return f"{len(wrong)} differ from the lock: {', '.join(wrong[:4])} — run: make clean-venv lab"


def _key_line(s, bad_key):
    """Whether the key is set and well-formed, and where it was set; never its value."""
    if s.api_key is None:  # truthful: never "present" for a key that is not set
        needed = key_required(s.base_url, s.key_name)
        why = "needed only for live mode" if needed else "a local server usually needs none"
        return f"{s.key_name} not set ({why})"
    if bad_key:
        return f"{s.key_name} present but malformed: {bad_key}"
    return f"{s.key_name} present and well-formed, set in {s.key_source} (value never shown)"


def _endpoint_line(s):
    """Where requests go: the official endpoint, a preset, or LABKIT_BASE_URL, and which API."""
    endpoint = (
        "official OpenAI endpoint"
        if s.official
        else f"LABKIT_BASE_URL (not OpenAI): {shown_url(s.base_url)}, API: {s.api}"
    )
    if s.provider:  # a preset names where its key goes: say which one is active
        endpoint = f"preset {s.provider} (LABKIT_PROVIDER): " + (
            f"{shown_url(s.base_url)}, API: {s.api}" if not s.official else endpoint
        )
    return endpoint


def _settings_lines(s, bad_key):
    """The report's lines for the settings: mode, .env, key, model, endpoint, what is ignored."""
    lines = [
        f"  mode        {s.mode}",
        f"  .env        {s.env_file or s.env_note}",
        f"  key         {_key_line(s, bad_key)}",
        f"  model       {s.model}",
        f"  endpoint    {_endpoint_line(s)}",
    ]
    if s.ignored:
        lines.append(
            f"  ignored     {', '.join(s.ignored)} (labkit never sends your key to "
            "it; use LABKIT_BASE_URL + LABKIT_API to opt in)"
        )
    return lines


def doctor(environ: dict | None = None) -> bool:
    """Print a health report: Python, packages, mode, .env, key (never its value), model, endpoint.

    Returns whether labkit can run as configured; when it cannot, a "problem" line says why.
    Example: labkit.doctor()   # run it first when something does not work
    """
    version = ".".join(map(str, sys.version_info[:3]))
    py_ok = sys.version_info >= (3, 11)
    lines = [
        "labkit doctor",
        f"  python      {version}  {'ok' if py_ok else 'too old: labkit needs 3.11 or newer'}",
        f"  packages    {_package_report()}",
    ]
    problems = (
        []
        if py_ok
        else [
            f"python {version} is too old — install Python 3.11+ and run: "
            "make clean-venv lab PY=python3.11"
        ]
    )
    try:
        s = load_settings(environ=environ)
    except UserError as exc:
        s, problems = None, [*problems, explain(exc)]
    if s is not None:
        bad_key = s.key_problem()
        lines += _settings_lines(s, bad_key)
        if s.mode == "live" and bad_key:
            problems.append(f"live mode cannot start: {bad_key}")
    lines += [f"  problem     {problem}" for problem in problems]
    print("\n".join(lines))
    return not problems
