"""Settings, the offline/live switch, key hygiene and the data folders.

Built in 01_setup. Settings come from the shell and from a `.env` file (the shell wins); each is
checked as it is loaded, and a problem names the variable, where it was set and the fix.
No key is printed, logged or stored by labkit: `redact()` scrubs every configured key (shell and
.env, any length), anything key-like, and credentials in URLs. The explanation of failures lives
beside the errors it explains (labkit.errors).

Provider presets (`LABKIT_PROVIDER`) name an endpoint, its API and its own key variable.
Deliberately left out: config files other than .env, per-project profiles, proxy settings,
Azure/OpenAI organisations. A stray OPENAI_BASE_URL is ignored on purpose (see `load_settings`).
"""

import io
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

from dotenv import dotenv_values, find_dotenv
from dotenv.parser import parse_stream

from .errors import UserError

DEFAULT_MODEL = "gpt-5-mini"  # the one default; override with OPENAI_MODEL
OFFICIAL_BASE_URL = "https://api.openai.com/v1"
TIMEOUT_SECONDS = 30.0  # per request; no silent retries unless asked
# record: live, and every reply is kept in a cassette; replay: a cassette answers, offline
MODES = ("offline", "live", "record", "replay")
APIS = ("responses", "chat")


@dataclass(frozen=True)
class Provider:
    """An endpoint preset: where it is, which API it speaks, and the one variable its key is in."""

    name: str
    base_url: str
    api: str
    key_name: str  # its key goes to this base_url and nowhere else
    model: str | None  # the default model name; None: OPENAI_MODEL must name one
    server: str  # how a cassette's label names the server
    timeout: float = TIMEOUT_SECONDS  # per request, unless LABKIT_TIMEOUT says otherwise
    max_output_tokens: int | None = None  # each reply's cap when connect() is given none


LOCAL_PORT = 8011  # `make local-model` serves SmolLM2-135M-Instruct here
PROVIDERS = {
    p.name: p
    for p in (
        Provider(
            "openai",
            "https://api.openai.com/v1",
            "responses",
            "OPENAI_API_KEY",
            "gpt-5-mini",
            "OpenAI API",
        ),
        Provider(
            "local",
            f"http://127.0.0.1:{LOCAL_PORT}/v1",
            "chat",
            "LABKIT_API_KEY",
            "SmolLM2-135M-Instruct",
            "llama.cpp, local: a tiny real model",
            300.0,  # 2 shared cores: a long reply or a prompt with tools can take minutes
            512,  # a tiny model may ramble on until its context (8192 tokens) is full
        ),
        Provider("ollama", "http://127.0.0.1:11434/v1", "chat", "LABKIT_API_KEY", None, "Ollama"),
        Provider("vllm", "http://127.0.0.1:8000/v1", "chat", "LABKIT_API_KEY", None, "vLLM"),
        Provider(
            "lmstudio", "http://127.0.0.1:1234/v1", "chat", "LABKIT_API_KEY", None, "LM Studio"
        ),
        Provider(
            "llamacpp",
            "http://127.0.0.1:8080/v1",
            "chat",
            "LABKIT_API_KEY",
            None,
            "llama.cpp server",
        ),
        Provider(
            "deepseek",
            "https://api.deepseek.com/v1",
            "chat",
            "DEEPSEEK_API_KEY",
            "deepseek-chat",
            "DeepSeek API",
        ),
        Provider(
            "dashscope",
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
            "chat",
            "DASHSCOPE_API_KEY",
            "qwen-plus",
            "DashScope (Qwen) API",
        ),
        Provider(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "chat",
            "OPENROUTER_API_KEY",
            None,
            "OpenRouter",
        ),
    )
}
# every variable a key can be set in (redact() scrubs them all)
KEY_NAMES = tuple(dict.fromkeys(["OPENAI_API_KEY", *(p.key_name for p in PROVIDERS.values())]))
SETTING_NAMES = (
    "LABKIT_MODE",
    "LABKIT_PROVIDER",
    "LABKIT_CASSETTE_DIR",
    "OPENAI_MODEL",
    "LABKIT_API",
    "LABKIT_BASE_URL",
    "LABKIT_TIMEOUT",
    "LABKIT_MAX_RETRIES",
    "OPENAI_BASE_URL",
    *KEY_NAMES,
)
SHORT_KEY = 8  # a shorter key is scrubbed where it stands alone, not inside other words
QUOTES = "\"'“”‘’"
NO_ENV_FILE = "LABKIT_ENV_FILE names no file"
REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"
DOCS_DIR = DATA_DIR / "docs"  # the teaching corpus and the lab pages
EVALS_DIR = DATA_DIR / "evals"  # frozen scenario, attack and query sets
CASSETTE_DIR = DATA_DIR / "cassettes"  # recorded live runs, one per notebook
RUNTIME_DIR = REPO_ROOT / ".runtime"  # git-ignored: the default stores and caches


def shown_url(url: str) -> str:
    """A URL safe to print: user:password and every query value masked.

    Example: shown_url("http://ana:pw@127.0.0.1/v1?key=k")  ->  "http://***@127.0.0.1/v1?key=***"
    """
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        scheme, rest = "", scheme
    rest, fragment, _ = rest.partition("#")
    rest, question, query = rest.partition("?")
    if "@" in rest:  # a pasted password may hold "/": cut at the last "@"
        rest = "***@" + rest.rpartition("@")[2]
    if question:
        rest += "?" + "&".join(
            f"{p.partition('=')[0]}=***" if "=" in p else "***" for p in query.split("&")
        )
    return f"{scheme}{sep}{rest}" + ("#***" if fragment else "")


@dataclass(frozen=True)
class Settings:
    """Everything the switch needs. The key is read through a function: vars(), repr() lack it."""

    mode: str = "offline"  # one of MODES
    model: str = DEFAULT_MODEL
    api: str = "responses"  # "responses" | "chat"
    base_url: str = OFFICIAL_BASE_URL  # official unless LABKIT_BASE_URL opts in
    key_name: str = "OPENAI_API_KEY"  # which variable the key comes from
    key_source: str | None = None  # where it was set: "the shell" or ".env line 7"
    timeout: float = TIMEOUT_SECONDS
    max_retries: int = 0  # LABKIT_MAX_RETRIES; 0 means a failure shows at once
    env_file: str | None = None  # where .env was read from, as the learner would say it
    env_note: str = ""  # why no .env was read, when none was
    ignored: tuple = ()  # variables present but ignored on purpose
    provider: str | None = None  # the LABKIT_PROVIDER preset in use; None: none chosen
    cassette_dir: Path = CASSETTE_DIR  # where record writes and replay reads cassettes
    read_key: Callable = field(default=lambda: None, repr=False, compare=False)

    @property
    def api_key(self):
        """The key itself, or None when it is not set."""
        return self.read_key()

    @property
    def official(self):
        return self.base_url == OFFICIAL_BASE_URL

    def key_problem(self) -> str | None:
        """What is wrong with the configured key, saying where it was set; None if it is usable."""
        required = key_required(self.base_url, self.key_name)
        return key_problem(self.api_key, self.official, self.key_name, self.key_source, required)

    def __repr__(self):  # the base URL may carry a password
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        shown["base_url"] = shown_url(self.base_url)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def _find_env_file(environ):
    """(path or None, why none is read). Never raises: redact() finds the keys in .env through it.

    LABKIT_ENV_FILE=none switches .env off (the tests do); load_settings refuses one naming no file.
    """
    chosen = environ.get("LABKIT_ENV_FILE")
    try:
        if chosen is None:
            repo_env = REPO_ROOT / ".env"
            found = find_dotenv(usecwd=True) or (repo_env if repo_env.is_file() else "")
            return (Path(found), "") if found else (None, "none found (copy .env.example to .env)")
        if chosen.strip().lower() in ("", "none"):
            return None, "not read (LABKIT_ENV_FILE=none)"
        return (Path(chosen), "") if Path(chosen).is_file() else (None, NO_ENV_FILE)
    except OSError:  # e.g. no permission, or the working folder was deleted
        return None, NO_ENV_FILE if chosen else "none found (copy .env.example to .env)"


def _shown_path(path):
    """A path as the learner would type it: relative to the repository when inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(path).name


_NAME_AT_START = re.compile(r"\s*(?:export\s+)?([A-Z_]+)")
_LOOSE_KEY = re.compile(rf"\s*(?:export\s+)?(?:{'|'.join(KEY_NAMES)})(?![\w-])[\s:=]*(.*?)\s*$")


def _read_env_file(path):
    """(values, lines, bad, unreadable, loose_keys) of a .env file.

    values: NAME -> value, and lines: NAME -> its line number. bad: (line number, the setting the
    line starts with, or "") for each line python-dotenv cannot parse and would skip silently.
    unreadable: why the file could not be read, or "". loose_keys: what follows a key's name on a
    bad line ("OPENAI_API_KEY sk-..."): a key all the same, which redact() scrubs.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return {}, {}, (), "is not UTF-8 text — save it as UTF-8 (plain text)", ()
    except OSError as exc:
        return {}, {}, (), f"cannot be read ({exc.strerror or type(exc).__name__}) — check it", ()
    values, lines, bad, loose = {}, {}, [], []
    for binding in parse_stream(io.StringIO(text)):
        source = binding.original.string
        blank = source[: len(source) - len(source.lstrip())]  # python-dotenv counts the blank
        number = binding.original.line + len(re.findall(r"\r\n|\n|\r", blank))  # lines above it
        if binding.error or (binding.key is not None and binding.value is None):
            start = _NAME_AT_START.match(source)  # only a known setting is named: keys hide here
            known = start.group(1) if start and start.group(1) in SETTING_NAMES else ""
            bad.append((number, known))
            loose += [m.group(1) for m in [_LOOSE_KEY.match(source)] if m and m.group(1)]
        elif binding.key is not None:
            values[binding.key], lines[binding.key] = binding.value, number
    if not bad:  # python-dotenv's own reading, ${VAR} interpolation too
        values = {k: v for k, v in dotenv_values(stream=io.StringIO(text)).items() if v is not None}
    return values, lines, tuple(bad), "", tuple(loose)


@lru_cache(maxsize=16)
def _keys_in_file(path, mtime_ns, size):  # read again only when the file changes
    values, _, _, _, loose = _read_env_file(path)
    return tuple(values[n] for n in KEY_NAMES if values.get(n)) + loose


def _placeholder(key):
    return key.lower().replace("-", "").replace("_", "") in (
        "sk",
        "sk...",
        "skyourkeyhere",
        "yourkeyhere",
        "changeme",
    )


def configured_keys(environ: dict | None = None) -> tuple[str, ...]:
    """Every key the settings can name (KEY_NAMES), from the shell and from .env, as exact text.

    Example: configured_keys({"LABKIT_ENV_FILE": "none", "LABKIT_API_KEY": "abc"})  ->  ("abc",)
    """
    environ = os.environ if environ is None else environ
    found = [environ.get(name) or "" for name in KEY_NAMES]
    path, _ = _find_env_file(environ)
    if path is not None:
        try:
            stat = path.stat()
            found += _keys_in_file(str(path), stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass
    # a key pasted with spaces or quotes is that key still: scrub it with and without them
    forms = {
        form for value in found for form in (value, value.strip(), value.strip().strip(QUOTES))
    }
    keys = [k for k in forms if k.strip() and not _placeholder(k)]
    return tuple(sorted(keys, key=lambda k: (-len(k), k)))


def _set_in(where):
    return f" (set in {where})" if where else ""


def _clip(value, width=40):
    """A setting's value cut to `width`, its characters exact: a stray space may be the problem."""
    text = str(value)
    return text if len(text) <= width else text[:width] + "..."


def _number(value, kind):
    """value as a `kind` (int or float), from text or a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:  # nothing is raised in here (see call_service)
            return kind(value.strip())
        except ValueError:
            return None
    return value if isinstance(value, int) or (kind is float and isinstance(value, float)) else None


def checked_timeout(value, name: str = "timeout", where: str | None = None) -> float:
    """Seconds, a float above 0; anything else is a UserError naming the setting.

    Example: checked_timeout("30", "LABKIT_TIMEOUT")  ->  30.0
    """
    seconds = _number(value, float)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise UserError(
            f"{name}={_clip(value)!r}{_set_in(where)} is not a timeout — use a "
            f"number of seconds above 0, e.g. {name}=30"
        )
    return float(seconds)


def checked_retries(value, name: str = "max_retries", where: str | None = None) -> int:
    """A retry count, a whole number >= 0; anything else is a UserError naming the setting.

    Example: checked_retries("2", "LABKIT_MAX_RETRIES")  ->  2
    """
    count = _number(value, int)
    if count is None or count < 0:
        raise UserError(
            f"{name}={_clip(value)!r}{_set_in(where)} is not a retry count — use a "
            f"whole number >= 0, e.g. {name}=0 (a failure shows at once)"
        )
    return count


def _bad_lines(shown, bad):
    """The error for lines python-dotenv cannot parse. It never repeats one: it may hold a key."""
    numbers, names = [str(n) for n, _ in bad], list(dict.fromkeys(name for _, name in bad if name))
    which = f"line {numbers[0]}" if len(bad) == 1 else f"lines {', '.join(numbers)}"
    about = f" ({', '.join(names)})" if names else ""
    return UserError(
        f"{shown} {which}{about} cannot be read as NAME=value, so it would be skipped "
        "— write each setting as NAME=value on its own line, with quotes only around "
        "the whole value (e.g. OPENAI_API_KEY=sk-...)"
    )


def load_settings(mode: str | None = None, environ: dict | None = None) -> Settings:
    """Read and check the settings in the shell and .env: the shell wins; a blank value is unset.

    Each problem raises its own UserError naming the variable, where it was set and the fix.
    Example: load_settings(mode="live").model  ->  "gpt-5-mini" unless OPENAI_MODEL is set
    """
    environ = dict(os.environ if environ is None else environ)
    path, note = _find_env_file(environ)
    if note == NO_ENV_FILE:
        raise UserError(
            f"LABKIT_ENV_FILE points to {_clip(environ['LABKIT_ENV_FILE'], 80)!r}, "
            "which is not a file — fix the path, or unset LABKIT_ENV_FILE to use "
            "./.env"
        )
    shown, values, lines = _shown_path(path) if path else None, {}, {}
    if path is not None:
        values, lines, bad, unreadable, _ = _read_env_file(path)
        if unreadable:
            raise UserError(f"{shown} {unreadable}")
        if bad:
            raise _bad_lines(shown, bad)

    def find(name):
        """(value, where it was set), or (None, None)."""
        if (environ.get(name) or "").strip():
            return environ[name], "the shell"
        if (values.get(name) or "").strip():
            return values[name], f"{shown} line {lines[name]}"
        return None, None

    name, (raw, where) = (
        ("mode", (mode, None)) if mode is not None else ("LABKIT_MODE", find("LABKIT_MODE"))
    )
    mode = "offline" if raw is None else raw.strip().lower() if isinstance(raw, str) else raw
    if mode not in MODES:
        raise UserError(
            f"{name}={_clip(raw)!r}{_set_in(where)} is not a mode — use "
            f"{name}=offline, live, record or replay"
        )
    raw, where = find("LABKIT_PROVIDER")
    provider = PROVIDERS.get((raw or "").strip().lower())
    if raw is not None and provider is None:
        raise UserError(
            f"LABKIT_PROVIDER={_clip(raw)!r}{_set_in(where)} is not a preset — use one of "
            f"{', '.join(PROVIDERS)} (or unset it and set LABKIT_BASE_URL + LABKIT_API)"
        )
    raw, where = find("LABKIT_API")
    api = (raw or "").strip().lower() or (provider.api if provider else "")
    if raw is not None and api not in APIS:
        raise UserError(
            f"LABKIT_API={_clip(raw)!r}{_set_in(where)} is not an API — use "
            "LABKIT_API=responses or LABKIT_API=chat (the API the server speaks)"
        )
    raw, where = find("LABKIT_BASE_URL")
    base_url = (raw or "").strip().rstrip("/")
    if base_url:
        if not re.fullmatch(r"https?://[^/\s]+\S*", base_url):
            shown_value = _clip(shown_url(base_url), 60)
            raise UserError(
                f"LABKIT_BASE_URL={shown_value!r}{_set_in(where)} is not an http(s) "
                "URL — use e.g. http://127.0.0.1:11434/v1 (the API root, usually "
                "ending in /v1)"
            )
        if not api:
            raise UserError(
                f"LABKIT_BASE_URL is set{_set_in(where)} but LABKIT_API is not — set "
                "LABKIT_API=responses or LABKIT_API=chat: the API the server speaks"
            )
        key_name = "LABKIT_API_KEY"  # subtle: a preset's key never goes to another server
        if provider and base_url == provider.base_url:
            key_name = provider.key_name  # the preset's own endpoint, spelled out
    elif provider:
        base_url, key_name = provider.base_url, provider.key_name
    else:
        base_url, key_name = OFFICIAL_BASE_URL, "OPENAI_API_KEY"
    raw, where = find("LABKIT_TIMEOUT")
    default_timeout = provider.timeout if provider else TIMEOUT_SECONDS
    timeout = default_timeout if raw is None else checked_timeout(raw, "LABKIT_TIMEOUT", where)
    raw, where = find("LABKIT_MAX_RETRIES")
    retries = 0 if raw is None else checked_retries(raw, "LABKIT_MAX_RETRIES", where)
    raw, where = find("OPENAI_MODEL")
    model = (raw or (provider.model if provider else DEFAULT_MODEL) or "").strip()
    if not model and mode in ("live", "record"):
        raise UserError(
            f"LABKIT_PROVIDER={provider.name} has no default model — set OPENAI_MODEL to the "
            "name that server gives the model (e.g. OPENAI_MODEL=llama3.2 for Ollama)"
        )
    if not model.isprintable() or any(c.isspace() for c in model):
        raise UserError(
            f"OPENAI_MODEL={_clip(raw)!r}{_set_in(where)} has a space or an "
            "invisible character in it — write the model name alone, e.g. "
            f"OPENAI_MODEL={DEFAULT_MODEL}"
        )
    raw, where = find("LABKIT_CASSETTE_DIR")
    cassette_dir = Path(raw.strip()) if raw is not None else CASSETTE_DIR
    if raw is not None and not cassette_dir.is_dir():
        raise UserError(
            f"LABKIT_CASSETTE_DIR={_clip(raw, 60)!r}{_set_in(where)} is not a folder — create "
            "it, or unset LABKIT_CASSETTE_DIR to use data/cassettes"
        )
    key, key_source = find(key_name)
    return Settings(
        mode=mode,
        model=model,
        api=api or "responses",
        base_url=base_url,
        key_name=key_name,
        key_source=key_source,
        timeout=timeout,
        max_retries=retries,
        env_file=shown,
        env_note=note,
        read_key=lambda: key,
        ignored=tuple(n for n in ("OPENAI_BASE_URL",) if find(n)[0]),
        provider=provider.name if provider else None,
        cassette_dir=cassette_dir,
    )


def key_required(base_url: str, key_name: str) -> bool:
    """A hosted API (OpenAI, a cloud preset) needs a key; a server on this machine usually does not.

    Example: key_required("http://127.0.0.1:11434/v1", "LABKIT_API_KEY")  ->  False
    """
    # a cloud preset's own variable (DEEPSEEK_API_KEY, ...) means a hosted API too
    return base_url == OFFICIAL_BASE_URL or key_name not in ("OPENAI_API_KEY", "LABKIT_API_KEY")


def key_problem(
    key: str | None,
    official: bool = True,
    key_name: str = "OPENAI_API_KEY",
    source: str | None = None,
    required: bool | None = None,
) -> str | None:
    """Return what is wrong with a key as one line, or None when it looks usable. Never echoes it.

    `source` says where the key was set ("the shell", ".env line 7"): the fix points there.
    `required` (default: official) says a missing key is a problem; local servers need none.
    Example: key_problem('"sk-abc"')  ->  'OPENAI_API_KEY is wrapped in quotes — ...'
    """
    if key is None or key.strip() == "":
        if not (official if required is None else required):
            return None  # local servers usually need no key
        return (
            f"{key_name} is not set — put {key_name}=sk-... in .env "
            "(copy .env.example), then restart the kernel"
        )
    name = key_name + _set_in(source)
    fix = (
        "where your shell sets it (e.g. ~/.bashrc), or unset it there to use .env"
        if source == "the shell"
        else f"in {source}"
        if source
        else "where you set it"
    )
    if key != key.strip():
        return f"{name} has spaces or a newline around it — remove them {fix}"
    if key[0] in QUOTES or key[-1] in QUOTES:
        return f"{name} is wrapped in quotes — write {key_name}=sk-... without quotes, {fix}"
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        return f"{name} contains a space or a non-ASCII character — copy the key again, {fix}"
    if _placeholder(key):
        return f"{name} is still the placeholder from .env.example — paste your real key {fix}"
    if official and not key.startswith("sk-"):
        return (
            f"{name} does not start with 'sk-' — that is not an OpenAI API key; copy it "
            f"again, {fix}"
        )
    return None


_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE
)


def secrets_from_env(environ: dict | None = None) -> list[str]:
    """The values of environment variables whose names say they are secret (…_KEY, …_TOKEN, …)."""
    environ = os.environ if environ is None else environ
    return [v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v.strip()) >= 8]


# A credential in a URL's query: ?api_key=..., &token=..., &access_token=..., &sig=...
_QUERY_CREDENTIALS = re.compile(
    r"([?&;](?:api[_-]?key|apikey|key|token|access[_-]?token|secret|password|sig|signature|auth)=)"
    r"[^&#\s\"']+",
    re.IGNORECASE,
)
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,})|(Bearer\s+)\S+", re.IGNORECASE)
# A URL's credentials: user:password@, or a token as the user (https://ghp_...@host). A plain
# user name (https://docs@host) is not a secret and stays, so data is not changed for nothing.
_URL_CREDENTIALS = re.compile(
    r"\b(https?://)(?:[^\s/?#@:]*:[^\s/?#@]+|[A-Za-z0-9_\-]{16,})@", re.IGNORECASE
)


@lru_cache(maxsize=64)
def _secret_regex(secrets):
    whole_word = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"
    # longest first: no leftovers
    parts = [
        re.escape(s) if len(s) >= SHORT_KEY else whole_word.format(re.escape(s))
        for s in sorted(secrets, key=len, reverse=True)
    ]
    return re.compile("|".join(parts)) if parts else None


def secret_pattern(secrets):
    """A regex that finds each secret as exact text: anywhere when long, as a whole word when short.

    A short key ("k3y") inside a longer word ("k3ys") is another word, not the key.
    Example: secret_pattern(["k3y"]).sub("[redacted]", "k3y and k3ys")  ->  "[redacted] and k3ys"
    """
    return _secret_regex(tuple(sorted({s for s in secrets if isinstance(s, str) and s.strip()})))


def redact(text, secrets=()) -> str:
    """Replace every configured key, each given secret, anything key-like and URL credentials.

    Example: redact("Incorrect API key provided: sk-proj-abc123")  ->  "...provided: sk-***"
    """
    text = str(text)
    pattern = secret_pattern((*configured_keys(), *secrets))
    text = pattern.sub("[redacted]", text) if pattern else text
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _QUERY_CREDENTIALS.sub(r"\1[redacted]", text)
    return _KEYLIKE.sub(lambda m: "sk-***" if m.group(1) else m.group(2) + "[redacted]", text)
