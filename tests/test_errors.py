"""labkit.errors: one-line explanations, and errors that carry nothing of the error they replace."""

import json
import sqlite3

import pytest

import labkit.__main__ as cli
from labkit import cite
from labkit.errors import LabkitError, UserError, explain
from labkit.memory import MemoryStore, memory_tools
from labkit.notes import NoteBook
from labkit.runtime import OperationStore, operation_id
from labkit.schema import parse_arguments
from labkit.toolbox import calculate

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_explain_is_one_line_for_any_error():
    assert (
        explain(UserError("OPENAI_API_KEY is not set — put it in .env"))
        == "OPENAI_API_KEY is not set — put it in .env"
    )
    line = explain(RuntimeError(f"boom with {KEY}\nsecond line"))
    assert "\n" not in line and KEY not in line and line.startswith("RuntimeError")
    assert "truncated" in explain(ValueError("Expecting value: line 1 column 1"))


def locked_store(tmp_path):
    path = tmp_path / "m.sqlite3"
    MemoryStore(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    return MemoryStore(path, busy_timeout=0.01, retries=0, backoff=0)


def non_utf8_note(tmp_path):
    book = NoteBook(tmp_path / "notes")
    (book.folder / "n1-plan.md").write_bytes(b"---\nid: n1\n---\n\xff\xfe")
    return book.read("n1")


def default_folder_under_a_file(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(cli, "CLI_PATH", tmp_path / "file" / ".runtime" / "memory.sqlite3")
    return cli._default_folder()


def not_a_database(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    return MemoryStore(tmp_path / "notes.txt")


def recall_with_no_keywords(tmp_path):
    _, recall = memory_tools(MemoryStore(":memory:"), "ana")
    return recall.fn("the")


# Each raises a labkit error while it handles another exception (a decoder's, sqlite's, the OS's).
REPLACING = {
    "parse_arguments: not JSON": lambda tmp_path, mp: parse_arguments('{"city": '),
    "parse_arguments: a number too long": lambda tmp_path, mp: parse_arguments(
        '{"n": ' + "9" * 5000 + "}"
    ),
    "calculate: not arithmetic": lambda tmp_path, mp: calculate.fn("2 +"),
    "cite.parse_answer: not JSON": lambda tmp_path, mp: cite.parse_answer("{status: answered"),
    "operation_id: not JSON values": lambda tmp_path, mp: operation_id(
        "ana", "refund", {"x": {1, 2}}
    ),
    "OperationStore: no folder": lambda tmp_path, mp: OperationStore(tmp_path / "missing" / "r.db"),
    "MemoryStore: not a database": lambda tmp_path, mp: not_a_database(tmp_path),
    "MemoryStore: the file is busy": lambda tmp_path, mp: locked_store(tmp_path),
    "memory_tools recall: no keywords": lambda tmp_path, mp: recall_with_no_keywords(tmp_path),
    "NoteBook: a note that is not UTF-8": lambda tmp_path, mp: non_utf8_note(tmp_path),
    "the command line: no default folder": lambda tmp_path, mp: default_folder_under_a_file(
        tmp_path, mp
    ),
}


@pytest.mark.parametrize("case", REPLACING)
def test_an_error_that_replaces_another_keeps_nothing_of_it(case, tmp_path, monkeypatch):
    with pytest.raises(LabkitError) as caught:
        REPLACING[case](tmp_path, monkeypatch)
    # `from None` inside the except block would only hide the chain: __context__ would still hold
    # the original, and with it whatever it quoted
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert json.dumps(str(caught.value))  # and the message is plain text
