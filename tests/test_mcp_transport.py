"""labkit.mcp_transport on its own: stdio parameters, last words on stderr, one error per failure.
The connections that use them end to end are in tests/test_mcp.py."""

import os

import pytest

from labkit import ServiceError, UserError
from labkit.mcp_transport import explain, last_words, leaf, stdio_params
from labkit.mcp_trust import MARKER


def test_stdio_params_mark_each_process_and_name_the_command_without_its_directories():
    first, marker, what = stdio_params(["/usr/bin/python3", "-m", "mcp_server_time"], {"A": "1"})
    second = stdio_params(["python3"], None)[1]
    assert (first.command, first.args) == ("/usr/bin/python3", ["-m", "mcp_server_time"])
    assert first.env == {"A": "1", MARKER: marker}
    assert marker.startswith(f"{os.getpid()}-") and second != marker
    assert what == "python3 -m mcp_server_time"


@pytest.mark.parametrize("command", [[], "python3 -m server", ["python3", 3]])
def test_stdio_params_refuse_a_command_that_is_not_a_list_of_strings(command):
    with pytest.raises(UserError, match="command must be a list of strings"):
        stdio_params(command, None)


class Said:
    def __init__(self, text):
        self._text = text

    def text(self):
        return self._text


@pytest.mark.parametrize(
    ("errlog", "expected"),
    [
        (None, ""),
        (Said(""), ""),
        (Said("starting\nValueError: no zone\n\n"), "ValueError: no zone"),
    ],
)
def test_last_words_are_the_last_line_that_is_not_blank(errlog, expected):
    assert last_words(errlog) == expected


def test_leaf_is_the_first_exception_inside_nested_groups():
    inner = TimeoutError()
    assert leaf(ExceptionGroup("", [ExceptionGroup("", [inner]), ValueError()])) is inner


def test_a_hang_is_explained_with_the_timeout_and_the_servers_last_words():
    error = explain(TimeoutError(), "the handshake", "the MCP server calc", None, 2.5, "slow")
    assert isinstance(error, ServiceError)
    assert str(error).startswith(
        "the MCP server calc did not answer the handshake within 2.5 s; its last words on "
        "stderr: 'slow'; the connection is closed"
    )


def test_a_program_that_did_not_start_is_the_callers_to_fix():
    error = explain(FileNotFoundError(2, "No such file"), "the handshake", "x", None, 1.0, "")
    assert isinstance(error, UserError)
    assert str(error).startswith("could not start x: No such file — check the command")
