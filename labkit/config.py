"""Settings, the offline/live switch, key hygiene, and one-line explanations of every failure.

Built in 01_setup. Settings come from the shell and from a `.env` file (the shell wins).
`explain(error)` turns any failure a learner can hit into "what happened — what to do".
The API key is never printed, logged or stored by labkit; `redact()` scrubs key-like text.

Deliberately left out: config files other than .env, per-project profiles, proxy settings,
Azure/OpenAI organisations. A stray OPENAI_BASE_URL is ignored on purpose (see `load_settings`).
"""
import json
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from dotenv import dotenv_values, find_dotenv

from .errors import LabkitError, ServiceError, UserError

DEFAULT_MODEL = "gpt-5-mini"                 # the one default; override with OPENAI_MODEL
OFFICIAL_BASE_URL = "https://api.openai.com/v1"
TIMEOUT_SECONDS = 30.0                       # per request; no silent retries unless asked
MODES = ("offline", "live")
APIS = ("responses", "chat")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    """Everything the switch needs. The key is kept out of repr() on purpose."""
    mode: str = "offline"                    # "offline" | "live"
    model: str = DEFAULT_MODEL
    api: str = "responses"                   # "responses" | "chat"
    base_url: str = OFFICIAL_BASE_URL        # official unless LABKIT_BASE_URL opts in
    api_key: str | None = field(default=None, repr=False)
    key_name: str = "OPENAI_API_KEY"         # which variable the key came from
    timeout: float = TIMEOUT_SECONDS
    max_retries: int = 0                     # LABKIT_MAX_RETRIES; 0 means a failure shows at once
    env_file: str | None = None              # where .env was read from, as the learner would say it
    env_note: str = ""                       # why no .env was read, when none was
    ignored: tuple = ()                      # variables present but ignored on purpose

    @property
    def official(self):
        return self.base_url == OFFICIAL_BASE_URL


def _find_env_file(environ):
    """Return (path or None, note). LABKIT_ENV_FILE=none switches .env off (the tests do)."""
    chosen = environ.get("LABKIT_ENV_FILE")
    if chosen is not None:
        if chosen.strip().lower() in ("", "none"):
            return None, "not read (LABKIT_ENV_FILE=none)"
        if not Path(chosen).is_file():
            raise UserError(f"LABKIT_ENV_FILE points to {chosen!r}, which is not a file — "
                            "fix the path, or unset LABKIT_ENV_FILE to use ./.env")
        return Path(chosen), ""
    found = find_dotenv(usecwd=True) or (str(REPO_ROOT / ".env") if (REPO_ROOT / ".env").is_file() else "")
    return (Path(found), "") if found else (None, "none found (copy .env.example to .env)")


def _shown_path(path):
    """A path as the learner would type it: relative to the repository when inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(path).name


def load_settings(mode=None, environ=None):
    """Read settings from the environment and .env (the shell wins over the file).

    Example: load_settings(mode="live").model  ->  "gpt-5-mini" unless OPENAI_MODEL is set
    """
    environ = dict(os.environ if environ is None else environ)
    path, note = _find_env_file(environ)
    values = {k: v for k, v in (dotenv_values(path) if path else {}).items() if v is not None}
    values.update(environ)                   # subtle: the shell wins over the file

    def get(name, default=None):
        value = values.get(name)
        return default if value is None or value.strip() == "" else value

    mode = (mode or get("LABKIT_MODE", "offline")).strip().lower()
    if mode not in MODES:
        raise UserError(f"LABKIT_MODE={mode!r} is not a mode — use 'offline' or 'live'")
    api = get("LABKIT_API", "").strip().lower()
    base_url = get("LABKIT_BASE_URL", "").strip().rstrip("/")
    if base_url:
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise UserError(f"LABKIT_BASE_URL={base_url!r} is not an http(s) URL — use e.g. "
                            "http://127.0.0.1:11434/v1 (the API root, usually ending in /v1)")
        if api not in APIS:
            raise UserError("LABKIT_BASE_URL is set but LABKIT_API is not — set LABKIT_API=responses "
                            "or LABKIT_API=chat to say which API the server speaks")
        key_name = "LABKIT_API_KEY"          # subtle: the OpenAI key never goes to another server
    else:
        base_url, key_name = OFFICIAL_BASE_URL, "OPENAI_API_KEY"
        if api and api not in APIS:
            raise UserError(f"LABKIT_API={api!r} is not an API — use 'responses' or 'chat'")
    try:
        timeout = float(get("LABKIT_TIMEOUT", TIMEOUT_SECONDS))
        retries = int(get("LABKIT_MAX_RETRIES", 0))
    except ValueError:
        raise UserError("LABKIT_TIMEOUT must be seconds (e.g. 30) and LABKIT_MAX_RETRIES a whole "
                        "number (e.g. 0) — fix them in .env") from None
    ignored = tuple(n for n in ("OPENAI_BASE_URL",) if get(n))
    return Settings(mode=mode, model=get("OPENAI_MODEL", DEFAULT_MODEL).strip(), api=api or "responses",
                    base_url=base_url, api_key=get(key_name), key_name=key_name,
                    timeout=timeout, max_retries=retries, ignored=ignored,
                    env_file=_shown_path(path) if path else None, env_note=note)


def key_problem(key, official=True, key_name="OPENAI_API_KEY"):
    """Return what is wrong with a key as one line, or None when it looks usable. Never echoes it.

    Example: key_problem('"sk-abc"')  ->  'OPENAI_API_KEY is wrapped in quotes — ...'
    """
    if key is None or key == "":
        if not official:
            return None                      # local servers usually need no key
        return (f"{key_name} is not set — put {key_name}=sk-... in .env "
                "(copy .env.example), then restart the kernel")
    if key != key.strip():
        return f"{key_name} has spaces or a newline around it — remove them in .env"
    if key[0] in "\"'“‘" or key[-1] in "\"'”’":
        return f"{key_name} is wrapped in quotes — write {key_name}=sk-... without quotes"
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        return f"{key_name} contains a space or a non-ASCII character — copy the key again"
    placeholder = key.lower().replace("-", "").replace("_", "")
    if placeholder in ("sk", "sk...", "skyourkeyhere", "yourkeyhere", "changeme"):
        return f"{key_name} is still the placeholder from .env.example — paste your real key"
    if official and not key.startswith("sk-"):
        return f"{key_name} does not start with 'sk-' — that is not an OpenAI API key; copy it again"
    return None


_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,})|(Bearer\s+)\S+", re.IGNORECASE)


def redact(text, secrets=()):
    """Replace anything key-like, and any given secret, with a marker.

    Example: redact("Incorrect API key provided: sk-proj-abc123")  ->  "...provided: sk-***"
    """
    text = str(text)
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub(lambda m: "sk-***" if m.group(1) else m.group(2) + "[redacted]", text)


def _one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _server_message(exc):
    """The error message the server put in its JSON body, if any (redacted, short)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return _one_line(redact(message), 160)
    return ""


def describe_failure(exc, model=DEFAULT_MODEL, base_url=OFFICIAL_BASE_URL, timeout=TIMEOUT_SECONDS):
    """Map an SDK/network/parse exception to (labkit error class, one-line message)."""
    import openai                            # imported here: offline lessons never need it

    where = "the OpenAI API" if base_url == OFFICIAL_BASE_URL else base_url
    said = _server_message(exc)
    said = f" (server said: {said})" if said else ""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APITimeoutError):
        return ServiceError, (f"timeout: {where} did not answer within {timeout:g} s — try again; "
                              "if it keeps happening check your network or raise LABKIT_TIMEOUT")
    if isinstance(exc, openai.APIConnectionError):
        return ServiceError, (f"connection failed: could not reach {where} (connection refused or "
                              "no network) — check your connection; for a local server, is it running "
                              "and is LABKIT_BASE_URL right?")
    if isinstance(exc, openai.AuthenticationError):
        name = "OPENAI_API_KEY" if base_url == OFFICIAL_BASE_URL else "LABKIT_API_KEY"
        return UserError, (f"401 unauthorized: {where} rejected the API key{said} — put a valid key in "
                           f".env as {name}=... (no quotes), then restart the kernel")
    if isinstance(exc, openai.PermissionDeniedError):
        return UserError, (f"403 forbidden: this key may not use model {model!r} or this project"
                           f"{said} — check the key's project and model permissions, or pick another "
                           "OPENAI_MODEL")
    if isinstance(exc, openai.NotFoundError):
        hint = ("check the spelling of OPENAI_MODEL, or pick a model your key can use"
                if base_url == OFFICIAL_BASE_URL else
                "check OPENAI_MODEL (the server's model name) and that LABKIT_BASE_URL ends in /v1")
        return UserError, (f"404 not found: model {model!r} does not exist or this key cannot use it"
                           f"{said} — {hint}")
    if isinstance(exc, openai.RateLimitError):
        if "quota" in said.lower() or "billing" in said.lower():
            return ServiceError, (
                f"429 quota exceeded: the account behind this key has no credit left{said} — add "
                "billing credit, or work offline (LABKIT_MODE=offline)")
        return ServiceError, (f"429 rate limited: too many requests{said} — wait a minute and run "
                              "the cell again")
    if isinstance(exc, openai.APIStatusError) and status and status >= 500:
        return ServiceError, (f"{status} server error at {where}{said} — not your fault; try again "
                              "in a minute")
    if isinstance(exc, openai.APIStatusError):
        return UserError, (f"{status} request refused by {where}{said} — compare the request with "
                           "model.request_preview(messages, tools)")
    if isinstance(exc, (json.JSONDecodeError, ValueError)) and not isinstance(exc, LabkitError):
        return ServiceError, (f"bad response: {where} answered with truncated or invalid JSON — try "
                              "again; if it repeats, the server or a proxy is cutting replies short")
    return LabkitError, _one_line(f"{type(exc).__name__}: {redact(exc)}")


def explain(error):
    """One line, "what happened — what to do", for any failure (or an incomplete Reply).

    Example: explain(UserError("OPENAI_API_KEY is not set — ..."))  ->  that same line
    """
    if getattr(error, "status", None) == "incomplete" and hasattr(error, "tool_calls"):  # a Reply
        reason = getattr(error, "incomplete_reason", None) or "unknown"
        return (f"incomplete reply: the model stopped early ({reason}) — raise max_output_tokens, "
                "shorten the input, or treat the partial text as unfinished")
    if isinstance(error, LabkitError):
        return _one_line(redact(error))
    try:                                     # name the model and endpoint the learner configured
        s = load_settings()
        context = {"model": s.model, "base_url": s.base_url, "timeout": s.timeout}
    except UserError:
        context = {}
    return _one_line(describe_failure(error, **context)[1])


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


def doctor(environ=None):
    """Print a health report: Python, packages, mode, key (never its value), .env, endpoint.

    Example: labkit.doctor()   # run it first when something does not work
    """
    try:
        s = load_settings(environ=environ)
    except UserError as exc:
        print(f"labkit doctor\n  settings    problem: {explain(exc)}")
        return False
    version = ".".join(map(str, sys.version_info[:3]))
    py_ok = sys.version_info >= (3, 11)
    problem = key_problem(s.api_key, s.official, s.key_name)
    if s.api_key is None and s.official:
        key_line = f"{s.key_name} not set (needed only for live mode)"
    elif problem:
        key_line = f"{s.key_name} present but malformed: {problem}"
    else:
        key_line = f"{s.key_name} present and well-formed (value never shown)"
    endpoint = ("official OpenAI endpoint" if s.official else
                f"LABKIT_BASE_URL (not OpenAI): {s.base_url}, API: {s.api}")
    lines = [
        "labkit doctor",
        f"  python      {version}  {'ok' if py_ok else 'too old: labkit needs 3.11 or newer'}",
        f"  packages    {_package_report()}",
        f"  mode        {s.mode}",
        f"  .env        {s.env_file or s.env_note}",
        f"  key         {key_line}",
        f"  model       {s.model}",
        f"  endpoint    {endpoint}",
    ]
    if s.ignored:
        lines.append(f"  ignored     {', '.join(s.ignored)} (labkit never sends your key to it; "
                     "use LABKIT_BASE_URL + LABKIT_API to opt in)")
    print("\n".join(lines))
    return py_ok and (s.mode == "offline" or problem is None)
