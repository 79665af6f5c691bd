"""Every failure in one line: "what happened — what to do".

Built in 01_setup. `explain(error)` turns any failure into that line; `call_service` turns an SDK or
network failure into one of labkit.errors' classes (ServiceError, UserError, ...) that keeps
nothing of it, so a 401 that quotes the key is never chained. The message names the endpoint the
settings point at (labkit.config) and never a key (labkit.keys.redact).
"""

from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from . import config
from .errors import LabkitError, ServiceError, UserError
from .keys import redact
from .trace import clip

T = TypeVar("T")


def _server_message(exc):
    """The error message the server put in its JSON body, if any (redacted, short)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return clip(redact(message), 160)
    return ""


def _unreachable(base_url):
    """What to do when nothing answers at base_url: start the server its preset names."""
    preset = next((p for p in config.PROVIDERS.values() if p.base_url == base_url), None)
    if preset and preset.name == "local":
        return (
            "the local model is not running: start it with `make local-model` in a terminal "
            "(it serves until you stop it), then run the cell again"
        )
    if preset and preset.name != "openai" and urlsplit(base_url).hostname == "127.0.0.1":
        return f"is {preset.server} running on this machine? Start it, or pick another preset"
    if preset:
        return "check your network connection (or a proxy or firewall in the way)"
    return "is the server running, and is LABKIT_BASE_URL its address?"


def _forbidden(exc, where, model, said, key_sent, official):
    """A 403's one line: a key's permissions only when a key went out and the API said so."""
    if isinstance(getattr(exc, "body", None), str):  # a web page, not the API's JSON error
        return (
            f"403 forbidden: {where} answered with a web page, not the API"
            + ("" if key_sent else " (no key was sent)")
            + " — a proxy or firewall may block it, or LABKIT_BASE_URL is not the API's address "
            "(usually ending in /v1)"
        )
    if not key_sent:
        return (
            f"403 forbidden: {where} refused a request sent with no key{said} — if it needs "
            "one, set LABKIT_API_KEY (the key for this server), then restart the kernel"
        )
    return (
        f"403 forbidden: this key may not use model {model!r} or this project{said} — check "
        "the key's project and model permissions, or pick another OPENAI_MODEL"
        + ("" if official else " (the server's model name)")
    )


def _unauthorized(where, said, official, key_source):
    """A 401's one line: the fix points where the key was set (the shell wins over .env)."""
    name = "OPENAI_API_KEY" if official else "LABKIT_API_KEY"
    fix = (
        f"{name} is set in the shell, which wins over .env: fix it there or unset it"
        if key_source == "the shell"
        else f"put a valid key in {key_source or '.env'} as {name}=... (no quotes)"
    )
    return f"401 unauthorized: {where} rejected the API key{said} — {fix}, then restart the kernel"


def _not_found(model, said, official):
    """A 404's one line: the model's name is the usual suspect."""
    hint = (
        "check the spelling of OPENAI_MODEL, or pick a model your key can use"
        if official
        else "check OPENAI_MODEL (the server's model name) and that LABKIT_BASE_URL ends in /v1"
    )
    return f"404 not found: model {model!r} does not exist or this key cannot use it{said} — {hint}"


def _rate_limited(said):
    """A 429's one line: no credit left, or too many requests."""
    if "quota" in said.lower() or "billing" in said.lower():
        return (
            f"429 quota exceeded: the account behind this key has no credit left{said} — add "
            "billing credit, or work offline (LABKIT_MODE=offline)"
        )
    return f"429 rate limited: too many requests{said} — wait a minute and run the cell again"


def _refused(exc, where, said, model, official, key_source, key_sent):
    """An HTTP error status as (labkit error class, one line): 401, 403, 404, 429, 5xx, other."""
    import openai

    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.AuthenticationError):
        return UserError, _unauthorized(where, said, official, key_source)
    if isinstance(exc, openai.PermissionDeniedError):
        return UserError, _forbidden(exc, where, model, said, key_sent, official)
    if isinstance(exc, openai.NotFoundError):
        return UserError, _not_found(model, said, official)
    if isinstance(exc, openai.RateLimitError):
        return ServiceError, _rate_limited(said)
    if status and status >= 500:
        return ServiceError, (
            f"{status} server error at {where}{said} — not your fault; try again in a minute"
        )
    return UserError, (
        f"{status} request refused by {where}{said} — compare the request with "
        "model.request_preview(messages, tools)"
    )


def describe_failure(
    exc: BaseException,
    model: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    key_source: str | None = None,
    key_sent: bool = True,
) -> tuple[type, str]:
    """Map an SDK/network/parse exception to (labkit error class, one-line message).

    model, base_url and timeout default to labkit's defaults; key_source says where the key was
    set ("the shell", ".env line 7"): a 401's fix points there; key_sent=False: no key went out.
    Example: describe_failure(openai.APITimeoutError(request))  ->  (ServiceError, "timeout: ...")
    """
    import openai  # imported here: offline lessons never need it

    model = model or config.DEFAULT_MODEL
    base_url = base_url or config.OFFICIAL_BASE_URL
    timeout = timeout or config.TIMEOUT_SECONDS
    official = base_url == config.OFFICIAL_BASE_URL
    where = "the OpenAI API" if official else config.shown_url(base_url)
    said = _server_message(exc)
    said = f" (server said: {said})" if said else ""
    if isinstance(exc, openai.APITimeoutError):
        return ServiceError, (
            f"timeout: {where} did not answer within {timeout:g} s — try again; "
            "if it keeps happening check your network or raise LABKIT_TIMEOUT"
        )
    if isinstance(exc, openai.APIConnectionError):
        return (
            ServiceError,
            f"connection failed: could not reach {where} — {_unreachable(base_url)}",
        )
    if isinstance(exc, openai.APIStatusError):
        return _refused(exc, where, said, model, official, key_source, key_sent)
    if isinstance(exc, ValueError) and not isinstance(exc, LabkitError):  # JSONDecodeError too
        return ServiceError, (
            f"bad response: {where} answered with truncated or invalid JSON — try "
            "again; if it repeats, the server or a proxy is cutting replies short"
        )
    return LabkitError, clip(f"{type(exc).__name__}: {redact(exc)}", 300)


def call_service(
    send: Callable[..., T],
    model: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    key_source: str | None = None,
    secrets: Iterable[object] = (),
    key_sent: bool = True,
) -> T:
    """Return send(); an SDK or network failure becomes one labkit error that keeps nothing of it.

    Example: call_service(lambda: client.responses.create(**body), "gpt-5-mini", secrets=(key,))
    """
    try:
        return send()
    except Exception as exc:
        cls, message = describe_failure(exc, model, base_url, timeout, key_source, key_sent)
        error = cls(redact(message, secrets))
        if isinstance(error, ServiceError):
            error.status = getattr(exc, "status_code", None)
    # subtle: raised after the except block, so the SDK's exception (a 401 quotes the key) is not
    # its __context__; `from None` inside the block would only hide the chain from tracebacks
    raise error from None


def explain(error: BaseException) -> str:
    """One line, "what happened — what to do", for any failure (or an incomplete Reply).

    Example: explain(UserError("OPENAI_API_KEY is not set — ..."))  ->  that same line
    """
    if getattr(error, "status", None) == "incomplete" and hasattr(error, "tool_calls"):  # a Reply
        reason = getattr(error, "incomplete_reason", None) or "unknown"
        return (
            f"incomplete reply: the model stopped early ({reason}) — raise max_output_tokens, "
            "shorten the input, or treat the partial text as unfinished"
        )
    if isinstance(error, LabkitError):
        return clip(redact(error), 300)
    try:  # name the model and endpoint the learner configured
        s = config.load_settings()
        context: dict[str, Any] = {"model": s.model, "base_url": s.base_url, "timeout": s.timeout}
    except UserError:
        context = {}
    return clip(describe_failure(error, **context)[1], 300)
