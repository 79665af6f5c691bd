"""labkit.toolbox: the calculator refuses every escape, teaching weather, the doc reader."""

import json

import pytest

from labkit.errors import ToolError
from labkit.models import ToolCall
from labkit.toolbox import calculate, doc_tools, get_weather, list_docs, read_doc
from labkit.tools import ToolRegistry, execute

# ---------------------------------------------------------------- calculate


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("2 + 2", 4),
        ("14 * 9 / 5 + 32", 57.2),
        ("-(3 - 5) * 2", 4),
        ("((1))", 1),
        ("1_000 / 8", 125.0),
        ("+7", 7),
        ("0.1 + 0.2", 0.30000000000000004),
        ("999999999999999", 999999999999999),
    ],
)
def test_calculate(expression, expected):
    assert calculate(expression=expression) == {"expression": expression, "result": expected}


def test_division_by_zero_is_explained():
    with pytest.raises(ToolError, match="divides by 0") as info:
        calculate(expression="1 / (2 - 2)")
    assert info.value.kind == "division_by_zero"


CALC_ESCAPES = [
    "__import__('os').system('touch CANARY')",
    "open('CANARY', 'w')",
    "(1).__class__",
    "().__class__.__bases__",
    "[].__class__.__mro__",
    "globals()",
    "locals()",
    "exec('1')",
    "eval('1')",
    "x",
    "True",
    "None",
    "'a' * 3",
    "2 ** 10",
    "9 ** 9 ** 9",
    "10 ** 100",
    "1e16 * 10",
    "99999999 * 99999999",
    "1e999",
    "[1, 2]",
    "{1: 2}",
    "(lambda: 1)()",
    "1 if 1 else 2",
    "1 < 2",
    "1 and 2",
    "7 % 3",
    "7 // 2",
    "1 << 40",
    "~1",
    "1 & 1",
    "f'{1}'",
    "a := 1",
    "(" * 150 + "1" + ")" * 150,
    "1 + " * 40 + "1",
    "1" * 300,
    "-" * 190 + "1",
    "import os",
    "1; 2",
    "lambda: 1",
    "print(1)",
    "𝟏 + 1",
    "1j * 2",
    "\x00",
    "",
    "   ",
]


@pytest.mark.parametrize("expression", CALC_ESCAPES)
def test_calculate_escape_attempts_are_all_refused(expression, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = execute(
        ToolCall("c", "calculate", json.dumps({"expression": expression})),
        ToolRegistry([calculate]),
    )
    assert result["ok"] is False and result["error"] in ("bad_expression", "too_long", "too_large")
    assert not (tmp_path / "CANARY").exists()


def test_there_are_enough_escape_attempts():
    assert len(CALC_ESCAPES) >= 25 and len(PATH_ESCAPES) >= 25


# ---------------------------------------------------------------- get_weather


@pytest.mark.parametrize("city", ["Paris", "paris", " Tokyo ", "São Paulo", "Atlantis", "x" * 500])
def test_get_weather_says_it_is_teaching_data_in_every_result(city):
    result = execute(
        ToolCall("c", "get_weather", json.dumps({"city": city})), ToolRegistry([get_weather])
    )
    assert "fixed teaching data" in json.dumps(result, ensure_ascii=False)


def test_get_weather_ignores_case():
    assert get_weather(city="PARIS")["temperature_c"] == 14


# ---------------------------------------------------------------- list_docs / read_doc

SECRET = "TOP-SECRET-CONTENT"


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (tmp_path / "secret.md").write_text(SECRET)
    (tmp_path / "handbook-outside.md").write_text(SECRET)
    (root / "handbook-tools.md").write_text("# Tools\nUse them well.\n")
    (root / "handbook-big.md").write_text("x" * 20_000)
    (root / "handbook-nul.md").write_bytes(b"abc\x00def")
    (root / "handbook-notes.txt").write_text(SECRET)
    (root / "other.md").write_text(SECRET)
    (root / "handbook-link.md").symlink_to(tmp_path / "secret.md")
    (root / "handbook-dir.md").mkdir()
    (root / "handbook-dir.md" / "x.md").write_text(SECRET)
    return ToolRegistry(doc_tools(root))


PATH_ESCAPES = [
    "../secret.md",
    "../../etc/passwd",
    "/etc/passwd",
    "/tmp/secret.md",
    "..",
    ".",
    "",
    "handbook-tools.md/../../secret.md",
    "./handbook-tools.md/../../secret.md",
    "..\\secret.md",
    "C:\\Windows\\win.ini",
    "c:secret.md",
    "~/secret.md",
    "~root/.bashrc",
    "handbook-tools.md\x00.txt",
    "%2e%2e%2fsecret.md",
    "..%2fsecret.md",
    "handbook-link.md",
    "handbook-dir.md",
    "handbook-dir.md/x.md",
    "handbook-notes.txt",
    "other.md",
    "handbook-big.md",
    "handbook-nul.md",
    "secret.md",
    "HANDBOOK-TOOLS.MD",
    "handbook-outside.md",
    "docs/handbook-tools.md",
    "handbook-tools.md ",
    " handbook-tools.md",
    "handbook-tools.md/",
    "／etc／passwd",
    "handbook-tools.md\n../secret.md",
    "\\\\server\\share\\x.md",
    "file:///etc/passwd",
    "handbook-../secret.md",
]


@pytest.mark.parametrize("name", PATH_ESCAPES)
def test_read_doc_escape_attempts_are_all_refused(docs, name):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["ok"] is False and SECRET not in json.dumps(result)
    assert result["error"] in ("refused", "not_found", "too_large")


def test_read_doc_reads_listed_docs_and_says_what_to_do_when_missing(docs):
    listed = execute(ToolCall("c", "list_docs", "{}"), docs)
    assert listed == {
        "ok": True,
        "data": {"docs": ["handbook-big.md", "handbook-nul.md", "handbook-tools.md"]},
    }
    ok = execute(ToolCall("c", "read_doc", '{"doc": "handbook-tools.md"}'), docs)
    assert ok == {
        "ok": True,
        "data": {"name": "handbook-tools.md", "text": "# Tools\nUse them well.\n"},
    }
    missing = execute(ToolCall("c", "read_doc", '{"doc": "handbook-retries.md"}'), docs)
    assert missing["error"] == "not_found" and "call list_docs" in missing["message"]


@pytest.mark.parametrize(
    "name, differs",
    [
        ("handbook-tools.md ", "white space around it"),
        ("\thandbook-tools.md\n", "white space around it"),
        ("HANDBOOK-TOOLS.MD", "upper-case letters"),
        ("handbook-tools.MD", "upper-case letters"),
        (" Handbook-Tools.md", "white space around it and upper-case letters"),
    ],
)
def test_read_doc_says_a_near_miss_is_spacing_or_case_not_the_extension(docs, name, differs):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["ok"] is False and result["error"] == "not_found"
    assert result["message"] == (
        f"no document named {name!r}: names are exact and this one has "
        f"{differs} — use 'handbook-tools.md'"
    )


@pytest.mark.parametrize("name", ["handbook-notes.txt", "handbook-tools.md.txt ", "HANDBOOK-X.TXT"])
def test_read_doc_blames_the_extension_only_when_it_is_not_markdown(docs, name):
    result = execute(ToolCall("c", "read_doc", json.dumps({"doc": name})), docs)
    assert result["error"] == "refused" and "only Markdown (.md)" in result["message"]


def test_read_doc_suggests_only_listed_names(docs):
    result = execute(ToolCall("c", "read_doc", '{"doc": "HANDBOOK-OUTSIDE.MD"}'), docs)
    assert result["message"] == (
        "no document named 'HANDBOOK-OUTSIDE.MD' — call list_docs to see the names"
    )


def test_the_shipped_handbook_is_readable():
    names = list_docs()["docs"]
    assert len(names) >= 3 and all(n.startswith("handbook-") for n in names)
    for name in names:
        assert read_doc(doc=name)["text"].startswith("# ")
