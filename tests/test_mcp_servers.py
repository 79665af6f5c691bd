"""labkit.mcp against the servers people actually attach: the official reference servers
@modelcontextprotocol/server-everything and server-filesystem, pinned in .ci/mcp-servers
(`make mcp-servers` installs them with npm ci). Their tools are listed, the ones whose schemas
strict checks can enforce are offered, each refusal names its keyword, and a low-risk tool runs.
Skipped, saying why, when Node.js or the installed packages are missing."""

import shutil
from pathlib import Path

import pytest

import labkit.mcp

BIN = Path(__file__).resolve().parent.parent / ".ci" / "mcp-servers" / "node_modules" / ".bin"
missing = (
    "node is not installed"
    if shutil.which("node") is None
    else None
    if (BIN / "mcp-server-everything").exists() and (BIN / "mcp-server-filesystem").exists()
    else "the pinned MCP reference servers are not installed: run make mcp-servers"
)
pytestmark = pytest.mark.skipif(missing is not None, reason=missing or "")


def test_server_everything_lists_its_tools_and_refuses_two_naming_the_keyword():
    command = [str(BIN / "mcp-server-everything"), "stdio"]
    with labkit.mcp.stdio(command, name="everything", risk={"echo": "low"}, timeout=60) as server:
        offered = {t.name for t in server.tools()}
        assert (len(server.listing), len(offered)) == (13, 11)
        assert "everything__echo" in offered  # its draft-07 $schema, as the others', is accepted
        assert server.call("echo", {"message": "hi"}) == "Echo: hi"
    assert "uses 'minimum'" in server.refused["get-resource-links"]
    assert "uses 'format'" in server.refused["gzip-file-as-resource"]


def test_server_filesystem_reads_a_file_in_its_one_allowed_folder(tmp_path):
    (tmp_path / "hello.txt").write_text("hi from the file", encoding="utf-8")
    command = [str(BIN / "mcp-server-filesystem"), str(tmp_path)]
    with labkit.mcp.stdio(command, name="files", timeout=60) as server:
        offered = {t.name for t in server.tools()}
        assert (len(server.listing), len(offered)) == (14, 13)
        read = server.call("read_text_file", {"path": str(tmp_path / "hello.txt")})
        assert read == {"content": "hi from the file"}
    assert list(server.refused) == ["read_multiple_files"]
    assert "uses 'minItems'" in server.refused["read_multiple_files"]
