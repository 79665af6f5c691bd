"""The teaching tools: a safe calculator, fixed weather data, and a confined document reader.

Built in 02_tools. `calculate` evaluates arithmetic by walking a whitelisted syntax tree (never
eval); `get_weather` reads invented teaching data; `doc_tools(root)` makes list_docs and read_doc,
which read only the handbook-*.md files directly inside one folder (no paths, no symlinks).
Deliberately left out: real weather, real web access, anything that writes.
"""

import ast
import math
import os
import re
from pathlib import Path

from .config import DOCS_DIR
from .errors import ToolError
from .schema import is_number
from .tools import Tool, tool

CALC_MAX_CHARS, CALC_MAX_NODES, CALC_MAX_MAGNITUDE = 200, 60, 1e15
_OPERATORS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.UAdd: lambda a: +a,
    ast.USub: lambda a: -a,
}


def _evaluate(node):
    """Evaluate a whitelisted expression tree; anything else is refused, never run."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and is_number(node.value):
        value = node.value
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        value = _OPERATORS[type(node.op)](_evaluate(node.operand))
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ToolError(
                "division by zero: the expression divides by 0, which has no value — "
                "check the divisor",
                "division_by_zero",
            )
        value = _OPERATORS[type(node.op)](left, right)
    else:
        shown = (
            ast.unparse(node)[:30]
            if not isinstance(node, ast.expr_context)
            else type(node).__name__
        )
        raise ToolError(
            f"{shown!r} is not allowed: use numbers, + - * /, unary minus and parentheses "
            "only (no names, calls, powers or attributes)",
            "bad_expression",
        )
    if not math.isfinite(value) or abs(value) > CALC_MAX_MAGNITUDE:
        raise ToolError(
            f"a value in the expression exceeds {CALC_MAX_MAGNITUDE:g} — use smaller numbers",
            "too_large",
        )
    return value


@tool
def calculate(expression: str) -> dict:
    """Evaluate an arithmetic expression: numbers, + - * /, unary minus and parentheses.

    Args:
        expression: the arithmetic to evaluate, e.g. "14 * 9 / 5 + 32"
    """
    if len(expression) > CALC_MAX_CHARS:
        raise ToolError(
            f"the expression has {len(expression)} characters; the limit is {CALC_MAX_CHARS} "
            "— split the calculation into steps",
            "too_long",
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None  # raised below, so the parser's error is not its __context__
    if tree is None:
        raise ToolError(
            f"{expression[:40]!r} is not an arithmetic expression — write e.g. '(3 + 4) * 2'",
            "bad_expression",
        )
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > CALC_MAX_NODES:
        raise ToolError(
            f"the expression has {nodes} parts; the limit is {CALC_MAX_NODES} — split it "
            "into steps",
            "too_long",
        )
    return {"expression": expression, "result": _evaluate(tree)}


TEACHING_DATA_NOTE = "fixed teaching data, not a real forecast"
WEATHER = {  # city -> (condition, temperature in °C); invented for lessons
    "Beijing": ("sunny", 22),
    "Cairo": ("clear", 31),
    "London": ("overcast", 12),
    "Nairobi": ("light rain", 19),
    "New York": ("windy", 16),
    "Paris": ("light rain", 14),
    "São Paulo": ("humid", 26),
    "Sydney": ("clear", 20),
    "Tokyo": ("cloudy", 18),
}


@tool
def get_weather(city: str) -> dict:
    """Current weather for a city, from fixed teaching data (not a real forecast).

    Args:
        city: the city name in English, e.g. "Paris"
    """
    found = next((c for c in WEATHER if c.casefold() == city.strip().casefold()), None)
    if found is None:
        raise ToolError(
            f"no teaching data for {city[:40]!r} ({TEACHING_DATA_NOTE}) — known cities: "
            f"{', '.join(WEATHER)}",
            "unknown_city",
        )
    condition, celsius = WEATHER[found]
    return {
        "city": found,
        "condition": condition,
        "temperature_c": celsius,
        "source": TEACHING_DATA_NOTE,
    }


# the handbook: what the agent may read
DOC_PATTERN = re.compile(r"^handbook-[a-z0-9][a-z0-9-]*\.md$")
MAX_DOC_BYTES = 16_000


def _doc_names(root):
    if not root.is_dir():
        return []
    with os.scandir(root) as entries:  # symlinks are never listed, so never readable
        return sorted(
            e.name
            for e in entries
            if DOC_PATTERN.match(e.name) and e.is_file(follow_symlinks=False)
        )


def _refuse_name(name):
    """Why `name` can never be a handbook document (traversal, absolute, NUL, ...), or None."""
    if "\x00" in name:
        return "the name contains a NUL byte"
    if len(name) > 200:  # no handbook name is this long, and the OS would refuse it anyway
        return f"the name is {len(name):,} characters; document names are short"
    if name.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", name):
        return "absolute paths are refused"
    if "/" in name or "\\" in name or ".." in name:
        return "paths are refused; give a bare file name"
    if not name.strip().lower().endswith(".md"):  # judge the extension the caller meant
        return "only Markdown (.md) documents can be read"
    return None


def _not_found(name, names):
    """Why `name` is not listed; names the listed one it differs from only in case or spacing."""
    near = next((n for n in names if n == name.strip().lower()), None)
    if near is None:
        return f"no document named {name!r} — call list_docs to see the names"
    extra = [
        what
        for what, differs in (
            ("white space around it", name.strip() != name),
            ("upper-case letters", name.strip() != near),
        )
        if differs
    ]
    return (
        f"no document named {name!r}: names are exact and this one has {' and '.join(extra)}"
        f" — use {near!r}"
    )


def doc_tools(root: str | Path = DOCS_DIR) -> tuple[Tool, Tool]:
    """The list_docs and read_doc tools, confined to the handbook-*.md files directly inside `root`.

    Example: list_docs, read_doc = doc_tools(tmp_path)   # tests use a temporary folder
    """
    root = Path(root)

    @tool
    def list_docs() -> dict:
        """List the handbook documents you can read with read_doc."""
        return {"docs": _doc_names(root)}

    @tool
    def read_doc(doc: str) -> dict:
        """Read one handbook document by its name, as list_docs shows it.

        Args:
            doc: a document name from list_docs, e.g. "handbook-tools.md"
        """
        name = doc
        why = _refuse_name(name)
        if why:
            raise ToolError(
                f"refused {name[:60]!r}: {why} — call list_docs and use a name it shows", "refused"
            )
        path = root / name
        if path.is_symlink():
            raise ToolError(f"refused {name!r}: it is a symbolic link — call list_docs", "refused")
        names = _doc_names(root)
        if name not in names:
            raise ToolError(_not_found(name, names), "not_found")
        raw = path.read_bytes()
        if len(raw) > MAX_DOC_BYTES:
            raise ToolError(
                f"{name} is {len(raw):,} bytes; the limit is {MAX_DOC_BYTES:,} — it cannot be "
                "read whole",
                "too_large",
            )
        if b"\x00" in raw:
            raise ToolError(f"{name} contains NUL bytes — it is not a text document", "refused")
        return {"name": name, "text": raw.decode("utf-8", errors="replace")}

    return list_docs, read_doc


list_docs, read_doc = doc_tools()
