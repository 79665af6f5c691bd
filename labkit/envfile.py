"""The .env file: where it is, what it holds with line numbers, and the lines it cannot hold.

Built in 01_setup for labkit.config, which reads its settings through it. python-dotenv parses
the file once; a line it cannot parse, and would skip silently, is refused by its number and never
repeated (it may hold a key). Left out: more than one .env file, and writing one.
"""

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dotenv import find_dotenv
from dotenv.main import resolve_variables
from dotenv.parser import Binding, parse_stream

REPO_ROOT = Path(__file__).resolve().parent.parent  # ./.env is looked for here; paths shown from it
NO_ENV_FILE = "LABKIT_ENV_FILE names no file"
NONE_FOUND = "none found (copy .env.example to .env)"


def find_env_file(environ: Mapping[str, str], root: Path) -> tuple[Path | None, str]:
    """(path or None, why none is read). Never raises: redact() finds the keys in .env through it.

    LABKIT_ENV_FILE=none switches .env off (the tests do); load_settings refuses one naming no file.
    Example: find_env_file({"LABKIT_ENV_FILE": "none"}, root)  ->  (None, "not read (...)")
    """
    chosen = environ.get("LABKIT_ENV_FILE")
    try:
        if chosen is None:
            repo_env = root / ".env"
            found = find_dotenv(usecwd=True) or (repo_env if repo_env.is_file() else "")
            return (Path(found), "") if found else (None, NONE_FOUND)
        if chosen.strip().lower() in ("", "none"):
            return None, "not read (LABKIT_ENV_FILE=none)"
        return (Path(chosen), "") if Path(chosen).is_file() else (None, NO_ENV_FILE)
    except OSError:  # e.g. no permission, or the working folder was deleted
        return None, NO_ENV_FILE if chosen else NONE_FOUND


def shown_path(path: Path, root: Path) -> str:
    """A path as the learner would type it: relative to the repository when inside it.

    Example: shown_path(root / ".env", root)  ->  ".env"
    """
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return Path(path).name


@dataclass(frozen=True)
class EnvFile:
    """What a .env file holds, read once with python-dotenv's parser."""

    values: dict  # NAME -> value, ${VAR} interpolated as python-dotenv does
    lines: dict  # NAME -> its line number
    shown: str | None = None  # the file as the learner would name it; None: no file
    bad: tuple = ()  # (line number, the setting it starts with or "") per line dotenv would skip
    unreadable: str = ""  # why the file could not be read, or ""
    loose_keys: tuple = ()  # what follows a key's name on a bad line ("OPENAI_API_KEY sk-...")

    def find(self, name: str, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
        """(value, where it was set), or (None, None): the shell wins; a blank value is unset."""
        if (environ.get(name) or "").strip():
            return environ[name], "the shell"
        if (self.values.get(name) or "").strip():
            return self.values[name], f"{self.shown} line {self.lines[name]}"
        return None, None


_NAME_AT_START = re.compile(r"\s*(?:export\s+)?([A-Z_]+)")


@lru_cache(maxsize=4)
def _loose_key(keys: tuple[str, ...]) -> re.Pattern:
    names = "|".join(keys) or "(?!)"  # no key variables: never a match
    return re.compile(rf"\s*(?:export\s+)?(?:{names})(?![\w-])[\s:=]*(.*?)\s*$")


def _line_number(binding: Binding) -> int:
    source = binding.original.string
    blank = source[: len(source) - len(source.lstrip())]  # python-dotenv counts the blank
    return binding.original.line + len(re.findall(r"\r\n|\n|\r", blank))  # lines above it


def _bad_line(source: str, names: Iterable[str], keys: tuple) -> tuple[str, list[str]]:
    """(the setting a bad line starts with, or ""; the key on it, if any: redact() scrubs it)."""
    start = _NAME_AT_START.match(source)  # only a known setting is named: keys hide here
    known = start.group(1) if start and start.group(1) in names else ""
    return known, [m.group(1) for m in [_loose_key(keys).match(source)] if m and m.group(1)]


def read_env_file(path: str | Path, names: Iterable[str] = (), keys: tuple = ()) -> EnvFile:
    """What a .env file holds, and each line python-dotenv cannot parse and would skip silently.

    `names`: the settings a bad line may be named by; `keys`: the variables a key is set in.
    Example: read_env_file(".env").values  ->  {"LABKIT_MODE": "offline", ...}
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return EnvFile({}, {}, unreadable="is not UTF-8 text — save it as UTF-8 (plain text)")
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return EnvFile({}, {}, unreadable=f"cannot be read ({why}) — check it")
    pairs, lines, bad, loose = [], {}, [], []
    for binding in parse_stream(io.StringIO(text)):
        if binding.error or (binding.key is not None and binding.value is None):
            known, keys_here = _bad_line(binding.original.string, names, keys)
            bad.append((_line_number(binding), known))
            loose += keys_here
        elif binding.key is not None:
            pairs.append((binding.key, binding.value))
            lines[binding.key] = _line_number(binding)
    # python-dotenv's own reading, ${VAR} interpolation too, when every line can be read
    values = dict(pairs) if bad else dict(resolve_variables(pairs, override=True))
    return EnvFile(values, lines, None, tuple(bad), "", tuple(loose))
