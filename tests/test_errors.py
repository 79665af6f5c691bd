"""labkit.errors: one-line explanations, and errors that carry nothing of the error they replace."""

import json
import sqlite3

import httpx
import openai
import pytest

import labkit.__main__ as cli
from labkit import cite
from labkit.errors import LabkitError, UserError
from labkit.failures import describe_failure, explain
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


def status_error(code, message="nope"):
    """The SDK's own exception for an HTTP status, built as the SDK builds it (no network)."""
    request = httpx.Request("POST", "https://api.openai.com/v1/responses")
    response = httpx.Response(code, request=request, json={"error": {"message": message}})
    return openai.OpenAI(api_key="x")._make_status_error_from_response(response)


@pytest.mark.parametrize(
    "code, message, cls, line",
    [
        (401, "nope", "UserError", "401 unauthorized: the OpenAI API rejected the API key"),
        (403, "nope", "UserError", "403 forbidden: this key may not use model 'gpt-x'"),
        (404, "nope", "UserError", "404 not found: model 'gpt-x' does not exist"),
        (429, "slow down", "ServiceError", "429 rate limited: too many requests"),
        (429, "check your billing", "ServiceError", "429 quota exceeded: the account"),
        (503, "nope", "ServiceError", "503 server error at the OpenAI API"),
        (422, "nope", "UserError", "422 request refused by the OpenAI API"),
    ],
)
def test_each_http_status_has_its_own_line_and_whose_fault_it_is(code, message, cls, line):
    got_cls, got = describe_failure(status_error(code, message), model="gpt-x")
    assert got_cls.__name__ == cls
    assert got.startswith(line) and f"(server said: {message})" in got


def test_a_401_fix_points_where_the_key_was_set():
    shell = describe_failure(status_error(401), key_source="the shell")[1]
    dotenv = describe_failure(status_error(401), key_source=".env line 7")[1]
    assert "set in the shell, which wins over .env" in shell
    assert "put a valid key in .env line 7 as OPENAI_API_KEY=..." in dotenv
