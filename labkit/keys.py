"""API keys: what is wrong with a pasted key, and scrubbing keys and secrets out of text.

Built in 01_setup beside labkit.config, which knows where a key is set (the shell, .env) and
hands it here: `key_problem` says what is wrong in one line and never echoes the key; `scrub`
replaces given secrets, anything key-like and credentials in URLs (redact adds every
configured key). Deliberately left out: asking a server whether a key works (that is a request).
"""

import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from .envfile import REPO_ROOT, find_env_file, read_env_file
from .providers import KEY_NAMES

SHORT_KEY = 8  # a shorter key is scrubbed where it stands alone, not inside other words
QUOTES = "\"'“”‘’"
PLACEHOLDERS = ("sk", "sk...", "skyourkeyhere", "yourkeyhere", "changeme")  # as in .env.example


def is_placeholder(key: str) -> bool:
    """True for the placeholder of .env.example, however it is cased or hyphenated.

    Example: is_placeholder("YOUR_KEY_HERE")  ->  True
    """
    return key.lower().replace("-", "").replace("_", "") in PLACEHOLDERS


def _bad_characters(key: str) -> bool:
    return not key.isascii() or not key.isprintable() or any(c.isspace() for c in key)


# what can be wrong with a key that is set, checked in this order: the first that holds is it
KEY_CHECKS: tuple[tuple[Callable[[str, bool], bool], str], ...] = (
    (
        lambda key, official: key != key.strip(),
        "{name} has spaces or a newline around it — remove them {fix}",
    ),
    (
        lambda key, official: key[0] in QUOTES or key[-1] in QUOTES,
        "{name} is wrapped in quotes — write {key_name}=sk-... without quotes, {fix}",
    ),
    (
        lambda key, official: _bad_characters(key),
        "{name} contains a space or a non-ASCII character — copy the key again, {fix}",
    ),
    (
        lambda key, official: is_placeholder(key),
        "{name} is still the placeholder from .env.example — paste your real key {fix}",
    ),
    (
        lambda key, official: official and not key.startswith("sk-"),
        "{name} does not start with 'sk-' — that is not an OpenAI API key; copy it again, {fix}",
    ),
)


def _fix_where(source: str | None) -> str:
    """Where the learner fixes a key set in `source`."""
    if source == "the shell":
        return "where your shell sets it (e.g. ~/.bashrc), or unset it there to use .env"
    return f"in {source}" if source else "where you set it"


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
    name = f"{key_name} (set in {source})" if source else key_name
    for broken, problem in KEY_CHECKS:
        if broken(key, official):
            return problem.format(name=name, key_name=key_name, fix=_fix_where(source))
    return None


_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE
)


def secrets_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of environment variables whose names say they are secret (…_KEY, …_TOKEN, …).

    Example: secrets_from_env({"GH_TOKEN": "ghp_123456789", "HOME": "/home"})  ->  ["ghp_123456789"]
    """
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
def _secret_regex(secrets: tuple[str, ...]) -> re.Pattern | None:
    whole_word = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"
    # longest first: no leftovers
    parts = [
        re.escape(s) if len(s) >= SHORT_KEY else whole_word.format(re.escape(s))
        for s in sorted(secrets, key=len, reverse=True)
    ]
    return re.compile("|".join(parts)) if parts else None


def secret_pattern(secrets: Iterable[object]) -> re.Pattern | None:
    """A regex that finds each secret as exact text: anywhere when long, as a whole word when short.

    A short key ("k3y") inside a longer word ("k3ys") is another word, not the key.
    Example: secret_pattern(["k3y"]).sub("[redacted]", "k3y and k3ys")  ->  "[redacted] and k3ys"
    """
    return _secret_regex(tuple(sorted({s for s in secrets if isinstance(s, str) and s.strip()})))


def scrub(text: str, secrets: Iterable[object] = ()) -> str:
    """Replace each given secret, anything key-like and URL credentials.

    Example: scrub("Incorrect API key provided: sk-proj-abc123")  ->  "...provided: sk-***"
    """
    pattern = secret_pattern(secrets)
    text = pattern.sub("[redacted]", text) if pattern else text
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _QUERY_CREDENTIALS.sub(r"\1[redacted]", text)
    return _KEYLIKE.sub(lambda m: "sk-***" if m.group(1) else m.group(2) + "[redacted]", text)


# ---------------------------------------------------------------- keys set in .env


@lru_cache(maxsize=16)
def _keys_in_file(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The keys a .env file holds; read again only when the file changes."""
    env = read_env_file(path, keys=KEY_NAMES)
    return tuple(env.values[n] for n in KEY_NAMES if env.values.get(n)) + env.loose_keys


def _keys_in_env_file(path: Path | None) -> tuple[str, ...]:
    try:
        stat = path.stat() if path is not None else None
    except OSError:
        return ()
    return _keys_in_file(str(path), stat.st_mtime_ns, stat.st_size) if stat else ()


def configured_keys(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every key the settings can name (KEY_NAMES), from the shell and from .env, as exact text.

    Example: configured_keys({"LABKIT_ENV_FILE": "none", "LABKIT_API_KEY": "abc"})  ->  ("abc",)
    """
    environ = os.environ if environ is None else environ
    found = [environ.get(name) or "" for name in KEY_NAMES]
    found += _keys_in_env_file(find_env_file(environ, REPO_ROOT)[0])
    # a key pasted with spaces or quotes is that key still: scrub it with and without them
    forms = {
        form for value in found for form in (value, value.strip(), value.strip().strip(QUOTES))
    }
    keys = [k for k in forms if k.strip() and not is_placeholder(k)]
    return tuple(sorted(keys, key=lambda k: (-len(k), k)))


def redact(text: object, secrets: Iterable[object] = ()) -> str:
    """Replace every configured key, each given secret, anything key-like and URL credentials.

    Example: redact("Incorrect API key provided: sk-proj-abc123")  ->  "...provided: sk-***"
    """
    return scrub(str(text), (*configured_keys(), *secrets))
