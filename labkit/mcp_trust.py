"""What a client checks before it offers an MCP server's tool: its schema, its hidden text.

Built in 09_mcp (the Lab's hostile servers); labkit.mcp asks these for every tool it lists.
`listed_schema` checks a server's input schema at every depth before it is closed: annotations
strict mode does not need are dropped ($schema, title, $comment) or moved into the description
(default), and anything labkit's strict checks cannot enforce is refused naming its keyword.
`hidden` finds text a reader cannot see (Unicode tag characters, zero-width and bidi controls,
terminal escapes); `shown` escapes it for the person who approves the tool; `strip` removes it.
Left out: format, pattern and numeric bounds (refused, not checked; production validates with
the jsonschema library) and Unicode's full confusable tables (UTS #39; tools.look_alike is small).
"""

import re
import unicodedata
from typing import Any

from .errors import UserError
from .schema import ANNOTATIONS, KEYWORDS, MAX_DEPTH

MAX_DESCRIPTION = 8_000  # characters of one tool's description; longer is refused, not clipped
DROPPED = ("$schema", "title", "$comment", "$id", "examples")  # annotations: no effect on validity
TYPED = {"required": list, "properties": dict, "enum": list}  # what each keyword's value must be
# Invisible or misleading: tag characters (they spell ASCII unseen), zero-width and bidi
# controls, variation selectors, fillers that render as blanks, private use, terminal escapes.
_FILLERS = "\u034f\u115f\u1160\u3164\uffa0"
_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _is_hidden(c: str) -> bool:
    kind = unicodedata.category(c)
    return (kind in ("Cf", "Co") or (kind == "Cc" and c not in "\n\t") or c in _FILLERS) or bool(
        _SELECTORS.match(c)
    )


def hidden(text: str) -> list[str]:
    """The characters of `text` a person reading it would not see, in order.

    Example: hidden("add\u200b two numbers")  ->  ["\u200b"]
    """
    return [c for c in text if _is_hidden(c)]


def kinds(text: str) -> list[str]:
    """Which kinds of hidden text `text` holds, for a one-line flag.

    Example: kinds("hi\U000e0041")  ->  ["tag characters"]
    """
    found = set()
    for c in hidden(text):
        point = ord(c)
        found.add(
            "tag characters"
            if 0xE0000 <= point <= 0xE007F
            else "bidi controls"
            if c in "\u061c\u200e\u200f" or 0x202A <= point <= 0x202E or 0x2066 <= point <= 0x2069
            else "control characters"
            if unicodedata.category(c) == "Cc"
            else "zero-width or invisible characters"
        )
    return sorted(found)


def _escaped(run: str) -> str:
    if all(0xE0020 <= ord(c) <= 0xE007E for c in run):  # tags spell ASCII: show what they say
        return f"[hidden tags: {''.join(chr(ord(c) - 0xE0000) for c in run)!r}]"
    points = " ".join(f"U+{ord(c):04X}" for c in run[:8])
    return f"[hidden {points}{' ...' if len(run) > 8 else ''}]"


def shown(text: str) -> str:
    """`text` with each run of hidden characters escaped and marked, for the person who approves.

    Example: shown("add\u200b two")  ->  "add[hidden U+200B] two"
    """
    out, run = [], ""
    for c in text:
        if _is_hidden(c):
            run += c
            continue
        if run:
            out.append(_escaped(run))
            run = ""
        out.append(c)
    return "".join(out) + (_escaped(run) if run else "")


def strip(value: Any) -> Any:
    """`value` (text, or a schema) with every hidden character removed.

    Example: strip("a\u200bb")  ->  "ab"
    """
    if isinstance(value, str):
        return "".join(c for c in value if not _is_hidden(c))
    if isinstance(value, dict):
        return {strip(k): strip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def listed_schema(schema: object, path: str = "inputSchema") -> dict[str, Any]:
    """A server's input schema made ready for labkit.mcp.closed, or UserError naming the keyword.

    Refused: a schema that is not an object (at any depth), a keyword whose value has the wrong
    type, nesting deeper than MAX_DEPTH, any keyword labkit's checks do not enforce. Dropped:
    the annotations in DROPPED. A default moves into the description, as text for the model.
    Example: listed_schema({"$schema": "http://json-schema.org/draft-07/schema#",
                            "type": "object", "properties": {"n": {"type": "number"}}})
             ->  {"type": "object", "properties": {"n": {"type": "number"}}}
    """
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise UserError(f"{path} must be an object schema with type object — the server's bug")
    return _ready(schema, path, 0, False)


def offered_text(
    description: str, schema: object, policy: str = "refuse"
) -> tuple[str, dict[str, Any]]:
    """(description, schema) as a tool may be offered, or UserError saying why it may not.

    The schema is checked (listed_schema); a description over MAX_DESCRIPTION is refused; hidden
    text is refused (policy "refuse") or removed ("strip").
    Example: offered_text("Add.", {"type": "object"})  ->  ("Add.", {"type": "object"})
    """
    schema = listed_schema(schema)
    if len(description) > MAX_DESCRIPTION:
        raise UserError(
            f"its description is {len(description):,} characters; the limit is "
            f"{MAX_DESCRIPTION:,} — a description that long crowds out the conversation"
        )
    unseen = kinds(description + repr(schema))
    if unseen and policy == "refuse":
        raise UserError(
            f"its description or schema holds hidden text ({', '.join(unseen)}) — read it with "
            "print(server); to offer it without that text: hidden='strip'"
        )
    return strip(description), strip(schema)


def _ready(schema, path, depth, optional):
    """One schema checked, annotations dropped, a default moved into the description; then the
    schemas inside it, one level deeper (`optional`: a top-level property not required)."""
    if depth > MAX_DEPTH:
        raise UserError(f"{path} is nested more than {MAX_DEPTH} levels deep")
    if not isinstance(schema, dict):
        raise UserError(f"{path} is {type(schema).__name__}, not a schema object")
    out = _kept_keywords(schema, path)
    _check_type_and_description(out, path)
    if "default" in out and not optional:  # an optional argument's default moves in closed()
        said = f"default: {_json(out.pop('default'))}"
        out["description"] = f"{out['description']} ({said})" if "description" in out else said
    return _ready_inside(out, path, depth)


def _kept_keywords(schema, path):
    """The schema without the DROPPED annotations; a keyword unchecked or mistyped is refused."""
    out = {}
    for key, value in schema.items():
        if key in DROPPED:
            continue
        if key not in KEYWORDS + ANNOTATIONS + ("default",):
            raise UserError(
                f"{path} uses {key!r}, which labkit's strict checks cannot enforce — only "
                f"{', '.join(KEYWORDS)} are checked"
            )
        if key in TYPED and not isinstance(value, TYPED[key]):
            raise UserError(f"{path}.{key} is {type(value).__name__}, not a {TYPED[key].__name__}")
        out[key] = value
    return out


def _check_type_and_description(out, path):
    """type is a type name or a list of them; description is text."""
    kinds_ = out.get("type", [])
    if not (isinstance(kinds_, str) or isinstance(kinds_, list)) or not all(
        isinstance(k, str) for k in ([kinds_] if isinstance(kinds_, str) else kinds_)
    ):
        raise UserError(f"{path}.type is {kinds_!r}, not a type name or a list of them")
    if "description" in out and not isinstance(out["description"], str):
        raise UserError(f"{path}.description is {type(out['description']).__name__}, not text")


def _ready_inside(out, path, depth):
    """The schemas inside `out` made ready: its properties, items and additionalProperties."""
    if "properties" in out:
        required = out.get("required", [])
        out["properties"] = {
            name: _ready(
                sub, f"{path}.properties.{name}", depth + 1, not depth and name not in required
            )
            for name, sub in out["properties"].items()
        }
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _ready(out[key], f"{path}.{key}", depth + 1, False)
        elif key in out and not isinstance(out[key], bool):
            raise UserError(f"{path}.{key} is {type(out[key]).__name__}, not a schema object")
    return out


def _json(value) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)[:60]


# ---------------------------------------------------------------- the server's process

TAIL = 16_384  # bytes of a server's stderr kept for error messages; older output is dropped
MARKER = "LABKIT_MCP_SERVER"  # set in a stdio server's environment, so its descendants are found


class Tail:
    """A server's stderr read as it comes, only the last TAIL bytes kept (a pipe, not a file).

    Example: tail = Tail(); stdio_client(params, errlog=tail); ...; tail.text()
    """

    def __init__(self, size: int = TAIL):
        import os
        import threading

        read, write = os.pipe()
        self._writer, self.size, self.kept = os.fdopen(write, "wb", buffering=0), size, bytearray()
        self.closed = False
        self._thread = threading.Thread(target=self._drain, args=(read,), daemon=True)
        self._thread.start()

    def fileno(self) -> int:  # what the subprocess writes to
        return self._writer.fileno()

    def _drain(self, read):
        import os

        while chunk := os.read(read, 65_536):
            self.kept += chunk
            del self.kept[: -self.size]
        os.close(read)

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")

    def close(self) -> None:
        """Close this process's end; the drain ends when the server's end closes too."""
        if not self.closed:
            self.closed = True
            self._writer.close()
            self._thread.join(1)


def reap(marker: str) -> int:
    """Kill every process whose environment holds MARKER=marker: a server's detached children.

    The SDK kills the server's process group; a child that left it (setsid) keeps the marker.
    Example: reap("4242-1")  ->  1   (how many were killed)
    """
    import psutil

    killed = 0
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker:
                process.kill()
                killed += 1
        except (psutil.Error, OSError):  # gone already, or not ours to read
            continue
    return killed
