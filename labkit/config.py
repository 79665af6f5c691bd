"""Settings, the offline/live switch, where keys are set, and the data folders.

Built in 01_setup. Settings come from the shell and from a `.env` file (labkit.envfile reads it;
the shell wins); each is checked as it is loaded, one row of SETTINGS each, and a problem names
the variable, where it was set and the fix. No key is printed, logged or stored by labkit:
labkit.keys' `redact()` scrubs every configured key (shell and .env, any length), and says what
is wrong with a key. Provider presets (`LABKIT_PROVIDER`, in labkit.providers) name an endpoint,
its API and its own key variable. Deliberately left out: config files other than .env,
per-project profiles, proxy settings, Azure/OpenAI organisations. A stray OPENAI_BASE_URL is
ignored on purpose.
"""

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .envfile import NO_ENV_FILE, REPO_ROOT, EnvFile, find_env_file, read_env_file, shown_path
from .errors import UserError
from .keys import configured_keys as configured_keys  # re-exported: config is where lessons look
from .keys import key_problem
from .keys import redact as redact
from .providers import (
    DEFAULT_MODEL,
    KEY_NAMES,
    OFFICIAL_BASE_URL,
    PROVIDERS,
    TIMEOUT_SECONDS,
    Provider,
    shown_url,
)
from .providers import LOCAL_PORT as LOCAL_PORT
from .providers import PRESETS as PRESETS

# record: live, and every reply is kept in a cassette; replay: a cassette answers, offline
MODES = ("offline", "live", "record", "replay")
APIS = ("responses", "chat")

DATA_DIR = REPO_ROOT / "data"
DOCS_DIR = DATA_DIR / "docs"  # the teaching corpus and the lab pages
EVALS_DIR = DATA_DIR / "evals"  # frozen scenario, attack and query sets
CASSETTE_DIR = DATA_DIR / "cassettes"  # recorded live runs, one per notebook
RUNTIME_DIR = REPO_ROOT / ".runtime"  # git-ignored: the default stores and caches


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
    def api_key(self) -> str | None:
        """The key itself, or None when it is not set."""
        return self.read_key()

    @property
    def official(self) -> bool:
        return self.base_url == OFFICIAL_BASE_URL

    def key_problem(self) -> str | None:
        """What is wrong with the configured key, saying where it was set; None if it is usable."""
        required = key_required(self.base_url, self.key_name)
        return key_problem(self.api_key, self.official, self.key_name, self.key_source, required)

    def __repr__(self) -> str:  # the base URL may carry a password
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        shown["base_url"] = shown_url(self.base_url)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


# ---------------------------------------------------------------- the .env file


def _bad_lines(shown: str, bad: tuple) -> UserError:
    """The error for lines python-dotenv cannot parse. It never repeats one: it may hold a key."""
    numbers, names = [str(n) for n, _ in bad], list(dict.fromkeys(name for _, name in bad if name))
    which = f"line {numbers[0]}" if len(bad) == 1 else f"lines {', '.join(numbers)}"
    about = f" ({', '.join(names)})" if names else ""
    return UserError(
        f"{shown} {which}{about} cannot be read as NAME=value, so it would be skipped "
        "— write each setting as NAME=value on its own line, with quotes only around "
        "the whole value (e.g. OPENAI_API_KEY=sk-...)"
    )


def checked_env_file(
    environ: Mapping[str, str], root: Path, names: Iterable[str] = (), keys: tuple = ()
) -> tuple[EnvFile, str]:
    """(the .env file, why none is read): one naming no file, or unreadable, is a UserError.

    Example: checked_env_file({"LABKIT_ENV_FILE": "none"}, root)[1]  ->  "not read (...)"
    """
    path, note = find_env_file(environ, root)
    if note == NO_ENV_FILE:
        chosen = environ["LABKIT_ENV_FILE"]
        chosen = chosen if len(chosen) <= 80 else chosen[:80] + "..."
        raise UserError(
            f"LABKIT_ENV_FILE points to {chosen!r}, which is not a file — fix the path, or "
            "unset LABKIT_ENV_FILE to use ./.env"
        )
    if path is None:
        return EnvFile({}, {}), note
    shown, env = shown_path(path, root), read_env_file(path, names, keys)
    if env.unreadable:
        raise UserError(f"{shown} {env.unreadable}")
    if env.bad:
        raise _bad_lines(shown, env.bad)
    return EnvFile(env.values, env.lines, shown), note


# ---------------------------------------------------------------- checking each setting


def _set_in(where: str | None) -> str:
    return f" (set in {where})" if where else ""


def _clip(value: object, width: int = 40) -> str:
    """A setting's value cut to `width`, its characters exact: a stray space may be the problem."""
    text = str(value)
    return text if len(text) <= width else text[:width] + "..."


def _unusable(name: str, shown: str, where: str | None, problem: str) -> UserError:
    """The one error for a value that cannot be used: NAME='value' (set in ...) what — the fix."""
    problem = problem.format(name=name, presets=", ".join(PROVIDERS))
    return UserError(f"{name}={shown!r}{_set_in(where)} {problem}")


def _number(value: object, kind: type) -> int | float | None:
    """value as a `kind` (int or float), from text or a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:  # nothing is raised in here (see call_service)
            return kind(value.strip())
        except ValueError:
            return None
    return value if isinstance(value, int) or (kind is float and isinstance(value, float)) else None


def _seconds(value: object) -> float | None:
    seconds = _number(value, float)
    return (
        float(seconds) if seconds is not None and math.isfinite(seconds) and seconds > 0 else None
    )


def _count(value: object) -> int | None:
    count = _number(value, int)
    return None if count is None or count < 0 else int(count)


PROBLEMS = {  # what a value that cannot be used is, and the fix; {name}: the variable
    "LABKIT_MODE": "is not a mode — use {name}=offline, live, record or replay",
    "LABKIT_PROVIDER": (
        "is not a preset — use one of {presets} (or unset it and set LABKIT_BASE_URL + LABKIT_API)"
    ),
    "LABKIT_API": (
        "is not an API — use LABKIT_API=responses or LABKIT_API=chat (the API the server speaks)"
    ),
    "LABKIT_BASE_URL": (
        "is not an http(s) URL — use e.g. http://127.0.0.1:11434/v1 (the API root, usually "
        "ending in /v1)"
    ),
    "LABKIT_TIMEOUT": "is not a timeout — use a number of seconds above 0, e.g. {name}=30",
    "LABKIT_MAX_RETRIES": (
        "is not a retry count — use a whole number >= 0, e.g. {name}=0 (a failure shows at once)"
    ),
    "OPENAI_MODEL": (
        "has a space or an invisible character in it — write the model name alone, e.g. "
        f"OPENAI_MODEL={DEFAULT_MODEL}"
    ),
    "LABKIT_CASSETTE_DIR": (
        "is not a folder — create it, or unset LABKIT_CASSETTE_DIR to use data/cassettes"
    ),
}


def checked_timeout(value: object, name: str = "timeout", where: str | None = None) -> float:
    """Seconds, a float above 0; anything else is a UserError naming the setting.

    Example: checked_timeout("30", "LABKIT_TIMEOUT")  ->  30.0
    """
    seconds = _seconds(value)
    if seconds is None:
        raise _unusable(name, _clip(value), where, PROBLEMS["LABKIT_TIMEOUT"])
    return seconds


def checked_retries(value: object, name: str = "max_retries", where: str | None = None) -> int:
    """A retry count, a whole number >= 0; anything else is a UserError naming the setting.

    Example: checked_retries("2", "LABKIT_MAX_RETRIES")  ->  2
    """
    count = _count(value)
    if count is None:
        raise _unusable(name, _clip(value), where, PROBLEMS["LABKIT_MAX_RETRIES"])
    return count


def _mode(value: object) -> object:  # connect(mode=...) may pass anything
    mode = value.strip().lower() if isinstance(value, str) else value
    return mode if mode in MODES else None


def _api(text: str) -> str | None:
    api = text.strip().lower()
    return api if api in APIS else None


def _url(text: str) -> str | None:  # "" (only slashes) counts as unset
    url = text.strip().rstrip("/")
    return url if not url or re.fullmatch(r"https?://[^/\s]+\S*", url) else None


def _model_name(text: str) -> str | None:
    model = text.strip()
    return model if model.isprintable() and not any(c.isspace() for c in model) else None


def _folder(text: str) -> Path | None:
    folder = Path(text.strip())
    return folder if folder.is_dir() else None


def _preset_or(attribute: str, otherwise: object) -> Callable[[dict], object]:
    """A default: the chosen preset's value, or `otherwise` when no preset is chosen."""
    return lambda got: getattr(got["provider"], attribute) if got["provider"] else otherwise


def _default_model(got: dict) -> str:
    provider = got["provider"]
    model = ((provider.model if provider else DEFAULT_MODEL) or "").strip()
    if not model and got["mode"] in ("live", "record"):
        raise UserError(
            f"LABKIT_PROVIDER={provider.name} has no default model — set OPENAI_MODEL to the "
            "name that server gives the model (e.g. OPENAI_MODEL=llama3.2 for Ollama)"
        )
    return model


def _needs_api(got: dict, where: str | None) -> None:
    if got["base_url"] and not got["api"]:
        raise UserError(
            f"LABKIT_BASE_URL is set{_set_in(where)} but LABKIT_API is not — set "
            "LABKIT_API=responses or LABKIT_API=chat: the API the server speaks"
        )


def _provider(text: str) -> Provider | None:
    return PROVIDERS.get(text.strip().lower())


def _shown_url(text: str) -> str:
    return _clip(shown_url(text.strip().rstrip("/")), 60)


@dataclass(frozen=True)
class Setting:
    """One variable load_settings reads: the Settings field it fills, how, and its default."""

    field: str
    name: str  # the variable, in the shell or in .env; PROBLEMS[name] says what a bad value is
    read: Callable[[str], object]  # its text -> its value; None: the value cannot be used
    default: object  # the value when it is unset, or a function of the settings above it
    shown: Callable[[str], str] = _clip  # the value as the error shows it
    then: Callable[[dict, str | None], None] | None = None  # a check with the settings above

    def value(self, raw: str | None, got: dict, name: str, where: str | None) -> Any:
        """Its default when `raw` is None, else `raw` read; a value that cannot be used raises."""
        if raw is None:
            return self.default(got) if callable(self.default) else self.default
        value = self.read(raw)
        if value is None:  # the one error: NAME='value' (set in ...) what is wrong — the fix
            raise _unusable(name, self.shown(raw), where, PROBLEMS[self.name])
        return value


SETTINGS = (  # read in this order: a default may depend on the settings above it
    Setting("mode", "LABKIT_MODE", _mode, "offline"),
    Setting("provider", "LABKIT_PROVIDER", _provider, None),
    Setting("api", "LABKIT_API", _api, _preset_or("api", "")),
    Setting("base_url", "LABKIT_BASE_URL", _url, "", _shown_url, then=_needs_api),
    Setting("timeout", "LABKIT_TIMEOUT", _seconds, _preset_or("timeout", TIMEOUT_SECONDS)),
    Setting("max_retries", "LABKIT_MAX_RETRIES", _count, 0),
    Setting("model", "OPENAI_MODEL", _model_name, _default_model),
    Setting("cassette_dir", "LABKIT_CASSETTE_DIR", _folder, CASSETTE_DIR, lambda t: _clip(t, 60)),
)
# every variable load_settings reads (a .env line that cannot be read names only these)
SETTING_NAMES = (*(s.name for s in SETTINGS), "OPENAI_BASE_URL", *KEY_NAMES)


def _endpoint(provider: Provider | None, url: str) -> tuple[str, str]:
    """(base_url, key_name): LABKIT_BASE_URL's, else the preset's, else the official one."""
    if url:  # subtle: a preset's key never goes to another server, only to its own URL
        return url, provider.key_name if provider and url == provider.base_url else "LABKIT_API_KEY"
    if provider:
        return provider.base_url, provider.key_name
    return OFFICIAL_BASE_URL, "OPENAI_API_KEY"


def load_settings(mode: str | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check the settings in the shell and .env: the shell wins; a blank value is unset.

    Each problem raises its own UserError naming the variable, where it was set and the fix.
    Example: load_settings(mode="live").model  ->  "gpt-5-mini" unless OPENAI_MODEL is set
    """
    environ = dict(os.environ if environ is None else environ)
    env, note = checked_env_file(environ, REPO_ROOT, SETTING_NAMES, KEY_NAMES)
    got: dict[str, Any] = {}  # each setting's value, by field
    where: dict[str, str | None] = {}  # where each was set
    for s in SETTINGS:
        name, (raw, where[s.field]) = s.name, env.find(s.name, environ)
        if s.field == "mode" and mode is not None:  # connect(mode=...) wins over both
            name, raw, where["mode"] = "mode", mode, None
        got[s.field] = s.value(raw, got, name, where[s.field])
        if s.then:
            s.then(got, where[s.field])
    base_url, key_name = _endpoint(got["provider"], got["base_url"])
    key, key_source = env.find(key_name, environ)
    return Settings(
        mode=got["mode"],
        model=got["model"],
        api=got["api"] or "responses",
        base_url=base_url,
        key_name=key_name,
        key_source=key_source,
        timeout=got["timeout"],
        max_retries=got["max_retries"],
        env_file=env.shown,
        env_note=note,
        read_key=lambda: key,
        ignored=tuple(n for n in ("OPENAI_BASE_URL",) if env.find(n, environ)[0]),
        provider=got["provider"].name if got["provider"] else None,
        cassette_dir=got["cassette_dir"],
    )


def key_required(base_url: str, key_name: str) -> bool:
    """A hosted API (OpenAI, a cloud preset) needs a key; a server on this machine usually does not.

    Example: key_required("http://127.0.0.1:11434/v1", "LABKIT_API_KEY")  ->  False
    """
    # a cloud preset's own variable (DEEPSEEK_API_KEY, ...) means a hosted API too
    return base_url == OFFICIAL_BASE_URL or key_name not in ("OPENAI_API_KEY", "LABKIT_API_KEY")
