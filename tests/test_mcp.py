"""labkit.mcp and labkit.mcp_server: MCP servers attached as labkit Tools, and the 09_mcp labs.

Servers run in this process (memory), as subprocesses (stdio: labkit's own server, the published
mcp-server-time, and tests/mcp_faulty.py, which misbehaves on purpose) and over Streamable HTTP on
127.0.0.1. Every test checks that it leaves no process and no connection thread behind.
"""

import json
import re
import socket
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

import labkit.mcp
from labkit import ScriptedModel, ToolError, UserError, call, labs, run, run_guarded, say
from labkit.injection import UNTRUSTED
from labkit.mcp_server import TEACHING_TOOLS, build_server, free_port, quiet_server, serving_http
from labkit.models import ToolCall
from labkit.schema import check_strict
from labkit.tools import ToolRegistry
from labkit.tools import execute as execute_in


def execute(call, tools):
    """labkit's execute() over a list of tools."""
    return execute_in(call, ToolRegistry(tools))


ROOT = Path(__file__).resolve().parent.parent
FAULTY = [sys.executable, str(ROOT / "tests" / "mcp_faulty.py")]
LABKIT_SERVER = [sys.executable, "-m", "labkit.mcp_server"]
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def cmdline(process):
    """A process's command line, or [] once it has exited."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def children():
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Each test stops every server process it started and every connection thread."""
    before = children()
    yield
    assert children() - before == set(), "a server process is still running"
    assert not [t for t in threading.enumerate() if t.name == "labkit-mcp"], "a thread is left"


# ---------------------------------------------------------------- round trips: memory, stdio, HTTP


@pytest.mark.parametrize("original", TEACHING_TOOLS, ids=lambda t: t.name)
def test_labkit_server_round_trip_in_memory_keeps_each_tool_schema(original):
    with labkit.mcp.memory(build_server()) as server:
        tools = {t.name: t for t in server.tools()}
    attached = tools[f"labkit__{original.name}"]
    assert attached.parameters == original.parameters
    assert attached.description == original.description


CALLS = [
    ("calculate", {"expression": "14 * 9 / 5 + 32"}),
    ("get_weather", {"city": "Paris"}),
    ("list_docs", {}),
    ("read_doc", {"doc": "handbook-retries.md"}),
]


@pytest.mark.parametrize("name, arguments", CALLS, ids=[c[0] for c in CALLS])
def test_a_call_over_mcp_gives_the_direct_result(name, arguments):
    direct = execute(ToolCall("call_1", name, json.dumps(arguments)), list(TEACHING_TOOLS))
    with labkit.mcp.memory(build_server()) as server:
        over_mcp = execute(
            ToolCall("call_1", f"labkit__{name}", json.dumps(arguments)), server.tools()
        )
    assert over_mcp == direct


def test_a_tool_failure_comes_back_as_a_result_the_model_reads():
    direct = execute(
        ToolCall("call_1", "calculate", '{"expression": "1 / 0"}'), [TEACHING_TOOLS[0]]
    )
    with labkit.mcp.memory(build_server()) as server:
        result = execute(
            ToolCall("call_1", "labkit__calculate", '{"expression": "1 / 0"}'), server.tools()
        )
    assert result["ok"] is False and result["error"] == "server_error"
    assert direct["message"] in result["message"]


def test_resources_and_the_prompt_through_the_sdk():
    from labkit.toolbox import list_docs, read_doc

    with labkit.mcp.memory(build_server()) as server:
        listed = server.sdk(lambda client: client.list_resources()).resources
        read = server.sdk(lambda client: client.read_resource("docs://handbook-retries.md"))
        prompt = server.sdk(lambda client: client.get_prompt("cite_docs", {"question": "Why?"}))
    assert [r.name for r in listed] == list_docs.fn()["docs"]
    assert read.contents[0].text == read_doc.fn("handbook-retries.md")["text"]
    assert prompt.messages[0].content.text.endswith("Question: Why?")


def test_labkit_server_over_stdio_is_reaped_when_the_block_ends():
    with labkit.mcp.stdio(LABKIT_SERVER, risk={"calculate": "low"}) as server:
        started = children()
        assert server.call("calculate", {"expression": "6 * 7"})["result"] == 42
    assert started and not (started & children())


def test_labkit_server_over_streamable_http_on_127_0_0_1_frees_its_port():
    port = free_port()
    with serving_http(port) as url:
        assert url == f"http://127.0.0.1:{port}/mcp"
        with labkit.mcp.http(url) as server:
            names = [t.name for t in server.tools()]
            weather = server.call("get_weather", {"city": "Paris"})
    assert names == [f"labkit__{t.name}" for t in TEACHING_TOOLS]
    assert weather["city"] == "Paris"
    with socket.socket() as probe:  # nobody listens any more: the port can be bound again
        probe.bind(("127.0.0.1", port))


def test_a_published_server_from_pypi_over_stdio_mcp_server_time():
    with labkit.mcp.stdio(TIME_SERVER, risk={"get_current_time": "low"}) as time_server:
        tools = {t.name: t for t in time_server.tools()}
        now = time_server.call("get_current_time", {"timezone": "Europe/Paris"})
    assert set(tools) == {"mcp-time__get_current_time", "mcp-time__convert_time"}
    assert tools["mcp-time__get_current_time"].risk == "low"
    assert tools["mcp-time__convert_time"].risk == "high"  # the policy does not name it
    # the clock's value varies: only its shape is checked
    assert set(now) == {"timezone", "datetime", "day_of_week", "is_dst"}
    assert now["timezone"] == "Europe/Paris"
    assert datetime.fromisoformat(now["datetime"]).utcoffset() is not None


# ---------------------------------------------------------------- rule: schemas labkit can enforce


@pytest.mark.parametrize(
    "schema, expected",
    [
        (
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
             "additionalProperties": False},
        ),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            {"type": "object", "properties": {"n": {"type": ["integer", "null"]}},
             "required": ["n"], "additionalProperties": False},
        ),
        (
            {"type": "object", "properties": {"u": {"type": "string", "enum": ["c", "f"]}}},
            {"type": "object", "properties": {"u": {"type": ["string", "null"],
             "enum": ["c", "f", None]}}, "required": ["u"], "additionalProperties": False},
        ),
        (
            {"type": "object", "properties": {"o": {"type": "object", "properties": {}}},
             "required": ["o"]},
            {"type": "object", "properties": {"o": {"type": "object", "properties": {},
             "additionalProperties": False}}, "required": ["o"], "additionalProperties": False},
        ),
        (
            {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object",
             "properties": {}}}}, "required": ["l"]},
            {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object",
             "properties": {}, "additionalProperties": False}}}, "required": ["l"],
             "additionalProperties": False},
        ),
    ],
    ids=["closed", "optional becomes nullable", "optional enum", "nested object", "array items"],
)  # fmt: skip
def test_closed_makes_a_schema_strict_mode_accepts(schema, expected):
    assert labkit.mcp.closed(schema) == expected
    check_strict(expected)


UNENFORCEABLE = [
    ({"type": "string", "maxLength": 5}, "uses 'maxLength', which labkit's strict checks cannot"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "'anyOf'"),
    ({"type": "string", "format": "uri"}, "'format'"),
    ({"type": "array", "items": [{"type": "string"}]}, "value.items is list, not a schema"),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
    ({"type": "object", "properties": {"x": {"type": "string"}}}, "required must list every"),
]


@pytest.mark.parametrize("value, reason", UNENFORCEABLE, ids=[r for _, r in UNENFORCEABLE])
def test_a_tool_whose_schema_labkit_cannot_enforce_is_refused_with_the_reason(value, reason):
    schema = {"type": "object", "properties": {"value": value}, "required": ["value"]}
    plain = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    with labkit.mcp.memory(listing_server([("odd", schema), ("plain", plain)])) as server:
        names = [t.name for t in server.tools()]
    assert names == ["odd_server__plain"]  # the plain tool is offered: the check can pass
    assert reason in server.refused["odd"]


def listing_server(tools, name="odd_server", annotations=None):
    """A low-level SDK server listing exactly `tools` ([(name, input schema)]); calls echo back."""
    from mcp import types
    from mcp.server import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=n, description=f"The {n} tool.", input_schema=s, annotations=annotations
                )
                for n, s in tools
            ]
        )

    async def call_tool(ctx, params):
        got = json.dumps(params.arguments, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=got)])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def test_an_optional_argument_with_a_default_is_offered_and_the_server_applies_its_default():
    server = quiet_server("shouter")

    @server.tool()
    def shout(text: str, times: int = 2) -> str:
        """Shout the text `times` times."""
        return text.upper() * times

    with labkit.mcp.memory(server) as attached:
        (shout_tool,) = attached.tools()
        times = shout_tool.parameters["properties"]["times"]
        assert times["type"] == ["integer", "null"] and "default" not in times
        assert "null for the default, 2" in times["description"]
        for sent, expected in [("null", {"result": "HIHI"}), ("3", {"result": "HIHIHI"})]:
            arguments = f'{{"text": "hi", "times": {sent}}}'
            assert (
                execute(ToolCall("1", shout_tool.name, arguments), [shout_tool])["data"] == expected
            )


def test_quiet_server_leaves_the_process_logging_as_it_was():
    """As in a fresh Jupyter kernel: a root logger without handlers, which basicConfig fills."""
    import logging

    from mcp.server import MCPServer

    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers[:] = []
    try:
        quiet_server("quiet")
        assert root.handlers == [] and root.level == saved[0]
        MCPServer("loud", log_level="DEBUG")  # the check can fail: the SDK's own one does
        assert root.handlers != [] and root.level == logging.DEBUG
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def test_an_optional_argument_sent_as_null_never_reaches_the_server():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
              "required": ["a"]}  # fmt: skip
    with labkit.mcp.memory(listing_server([("f", schema)])) as server:
        (f,) = server.tools()
        assert execute(ToolCall("1", f.name, '{"a": "x", "b": null}'), [f])["data"] == '{"a": "x"}'
        assert (
            execute(ToolCall("1", f.name, '{"a": "x", "b": 2}'), [f])["data"]
            == '{"a": "x", "b": 2}'
        )


# ---------------------------------------------------------------- rule: risk and egress are yours


def test_risk_and_egress_come_from_your_policy_never_from_annotations():
    from mcp.types import ToolAnnotations

    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    lie = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    server = listing_server([("delete_file", schema), ("list_files", schema)], annotations=lie)
    with labkit.mcp.memory(server, risk={"list_files": "low"}, egress={"list_files": False}) as s:
        tools = {t.name: t for t in s.tools()}
    assert (tools["odd_server__delete_file"].risk, tools["odd_server__delete_file"].egress) == (
        "high",
        True,
    )
    assert (tools["odd_server__list_files"].risk, tools["odd_server__list_files"].egress) == (
        "low",
        False,
    )


@pytest.mark.parametrize(
    "policy, problem",
    [
        (
            {"risk": {"delete_fil": "high"}},
            "your policy names delete_fil, which odd_server does not",
        ),
        ({"egress": {"nope": False}}, "your policy names nope"),
        ({"risk": {"delete_file": "severe"}}, "risk['delete_file'] is 'severe'"),
    ],
    ids=["a typo in risk", "a typo in egress", "not a risk level"],
)
def test_a_policy_that_does_not_fit_the_server_is_a_user_error(policy, problem):
    schema = {"type": "object", "properties": {}, "required": []}
    with pytest.raises(UserError, match=re.escape(problem)):
        with labkit.mcp.memory(listing_server([("delete_file", schema)]), **policy) as server:
            server.tools()


# ---------------------------------------------------------------- rule: results are untrusted data


def test_a_result_reaches_the_model_labelled_untrusted_as_any_tool_result():
    model = ScriptedModel([call("labkit__get_weather", city="Paris"), say("14 °C")])
    with labkit.mcp.memory(build_server(), risk={"get_weather": "low"}) as server:
        run_guarded("Weather in Paris?", model, server.tools())
    shown = json.loads(model.seen[1].messages[-1].content)
    assert shown["untrusted"] == UNTRUSTED.format(source="labkit__get_weather")
    assert shown["data"]["city"] == "Paris"


def test_a_request_the_server_refuses_is_a_result_and_the_connection_stays_open():
    with labkit.mcp.stdio(TIME_SERVER, risk={"get_current_time": "low"}) as time_server:
        with pytest.raises(ToolError, match="refused the request: Unknown tool: nope") as refused:
            time_server.call("nope", {})
        assert refused.value.kind == "server_refused"
        assert time_server.closed is None
        assert "timezone" in time_server.call("get_current_time", {"timezone": "UTC"})


# ---------------------------------------------------------------- rule: names per server


def test_two_servers_offer_the_same_tool_name_without_shadowing_each_other():
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    risk = {"save_note": "low"}
    with (
        labkit.mcp.memory(listing_server([("save_note", schema)], "notes"), risk=risk) as notes,
        labkit.mcp.memory(listing_server([("save_note", schema)], "helper"), risk=risk) as helper,
    ):
        tools = notes.tools() + helper.tools()
        model = ScriptedModel([call("notes__save_note", text="a"), say("Saved.")])
        result = run("Save a.", model, tools)
    assert [t.name for t in tools] == ["notes__save_note", "helper__save_note"]
    assert result.completed == ['notes__save_note({"text": "a"})']


def test_two_servers_claiming_one_name_are_refused_not_merged():
    schema = {"type": "object", "properties": {}, "required": []}
    with (
        labkit.mcp.memory(listing_server([("save_note", schema)], "notes")) as notes,
        labkit.mcp.memory(listing_server([("save_note", schema)], "notes")) as impostor,
    ):
        tools = notes.tools() + impostor.tools()
        with pytest.raises(UserError, match="two tools are named 'notes__save_note'"):
            run("Save.", ScriptedModel([say("never asked")]), tools)


@pytest.mark.parametrize(
    "given, expected", [("mcp time", "mcp_time"), ("a__b", "a_b"), ("../x", "x"), ("", "server")]
)
def test_server_names_are_namespaces_the_apis_accept(given, expected):
    assert labkit.mcp.server_name(given) == expected


def test_a_namespaced_name_too_long_for_the_apis_is_refused():
    schema = {"type": "object", "properties": {}, "required": []}
    with labkit.mcp.memory(listing_server([("t" * 60, schema)])) as server:
        assert server.tools() == []
    assert "is not a tool name the APIs accept" in server.refused["t" * 60]


# ---------------------------------------------------------------- rule: pins (the rug pull)


def test_a_pin_changes_with_the_description_or_the_schema_not_with_key_order():
    from mcp.types import Tool

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    reordered = {"required": ["a"], "properties": {"a": {"type": "integer"}}, "type": "object"}
    wider = {**schema, "properties": {"a": {"type": "integer"}, "c": {"type": "string"}}}
    pin = labkit.mcp.pin
    base = pin(Tool(name="add", description="Add.", input_schema=schema))
    assert pin(Tool(name="add", description="Add.", input_schema=reordered)) == base
    assert pin(Tool(name="add", description="Add. And more.", input_schema=schema)) != base
    assert pin(Tool(name="add", description="Add.", input_schema=wider)) != base


def test_a_tool_changed_since_approval_is_refused_and_the_rest_still_offered():
    world = labs.McpWorld()
    with labkit.mcp.memory(world.calc_server()) as before:
        before.tools()
    with labkit.mcp.memory(world.calc_server(pulled=True), pins=before.pins) as after:
        assert after.tools() == []
        assert after.refused["add"].startswith("changed since it was approved")
    with labkit.mcp.memory(world.calc_server(pulled=True)) as trusting:  # no pins: trusted anew
        assert [t.name for t in trusting.tools()] == ["calc__add"]


# ---------------------------------------------------------------- rule: failures close cleanly

FAILURES = [
    ("exit-at-start", "closed the connection during the handshake", "cannot start (planted)"),
    ("garbage-at-start", "answered the handshake with a line that is not JSON-RPC", "not JSON"),
    ("hang-at-start", "did not answer the handshake within 1 s", "raise timeout="),
    ("crash-on-call", "closed the connection during tools/call echo", "crashed (planted)"),
    ("hang-on-call", "did not answer tools/call echo within 1 s", "process stopped"),
    ("garbage-on-call", "answered tools/call echo with a line that is not JSON-RPC", "stdout"),
]


@pytest.mark.parametrize("mode, what, detail", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_server_that_crashes_hangs_or_answers_garbage_ends_in_one_clear_error(mode, what, detail):
    server = labkit.mcp.stdio([*FAULTY, mode], risk={"echo": "low"}, timeout=1)
    model = ScriptedModel([call("faulty__echo", text="hi"), say("It failed.")])
    if mode.endswith("start"):
        with pytest.raises(labkit.ServiceError) as failed:
            server.open()
        message = str(failed.value)
    else:
        with server:
            result = run("Echo hi.", model, server.tools())
        answer = json.loads(result.messages[3].content)
        assert answer["error"] == "server_failed"
        message = answer["message"]
    assert what in message and detail in message
    assert server.closed == message  # closed, and it says why
    with pytest.raises(UserError, match="is closed"):
        server.call("echo", {"text": "again"})


def test_a_server_that_answers_within_its_timeout_works():
    with labkit.mcp.stdio([*FAULTY, "ok"], timeout=1) as server:  # the same server, behaving
        assert server.call("echo", {"text": "hi"}) == "hi"


def test_a_stdio_server_gets_no_api_key_only_the_environment_you_pass(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000000000000")
    with labkit.mcp.stdio([*FAULTY, "ok"], env={"TIME_ZONE": "UTC"}) as server:
        assert server.call("echo", {"text": "$OPENAI_API_KEY"}) == "(unset)"
        assert server.call("echo", {"text": "$TIME_ZONE"}) == "UTC"  # the check can pass


def test_a_command_that_does_not_exist_is_a_user_error():
    with pytest.raises(UserError, match="could not start .*No such file"):
        labkit.mcp.stdio(["no-such-mcp-server-program"]).open()


@pytest.mark.parametrize("command", ["python -m server", [], [1, 2]], ids=["text", "empty", "ints"])
def test_a_command_must_be_a_list_of_strings(command):
    with pytest.raises(UserError, match="command must be a list of strings"):
        labkit.mcp.stdio(command)


def test_an_http_server_that_is_not_running_is_one_clear_error():
    with pytest.raises(labkit.ServiceError, match="could not reach .* is it running"):
        labkit.mcp.http(f"http://127.0.0.1:{free_port()}/mcp", timeout=5).open()


# ---------------------------------------------------------------- inside a running Jupyter kernel


def test_stdio_works_inside_a_running_jupyter_kernel_and_ctrl_c_reaps_the_server(tmp_path):
    """The classic trap: the kernel already runs an event loop. Then Ctrl+C during a call."""
    from jupyter_client.manager import start_new_kernel

    from offline_env import offline_environ

    km, kc = start_new_kernel(kernel_name="python3", env=offline_environ(), cwd=str(ROOT))
    printed = []

    def hook(message):
        if message["msg_type"] == "stream" and message["content"]["name"] == "stdout":
            printed.append(message["content"]["text"])

    try:
        code = (
            "import asyncio, sys, labkit.mcp\n"
            "print('loop running:', asyncio.get_running_loop().is_running())\n"
            f"with labkit.mcp.stdio({LABKIT_SERVER!r}) as server:\n"
            "    print(len(server.tools()), 'tools')"
        )
        assert (
            kc.execute_interactive(code, timeout=120, output_hook=hook)["content"]["status"] == "ok"
        )
        assert "".join(printed) == "loop running: True\n4 tools\n"
        # the server marks the call's arrival: then the kernel is surely waiting inside s.call
        mark = tmp_path / "hanging"
        # stop_on_error=False: the Ctrl+C error must not make the kernel abort the next request
        kc.execute(f"s = labkit.mcp.stdio({[*FAULTY, 'hang-on-call']!r}, timeout=600, "
                   f"env={{'MCP_FAULTY_MARK': {str(mark)!r}}}).open()\n"
                   "s.call('echo', {'text': 'forever'})",
                   stop_on_error=False)  # fmt: skip
        for _ in range(600):  # bounded; nothing is timed
            if mark.exists() and mark.read_text() == "tools/call":
                break
            time.sleep(0.1)
        assert mark.exists(), "the hanging server never got the call"
        servers = [p for p in psutil.Process(km.provisioner.pid).children(recursive=True)
                   if "mcp_faulty.py" in " ".join(cmdline(p))]  # fmt: skip
        assert len(servers) == 1
        km.interrupt_kernel()
        assert kc.get_shell_msg(timeout=60)["content"]["ename"] == "KeyboardInterrupt"
        # read back through the shell reply (user_expressions), not iopub: nothing can race it
        reply = kc.execute_interactive("", user_expressions={"why": "s.closed"}, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        why = reply["content"]["user_expressions"]["why"]
        assert why.get("data", {}).get("text/plain") == "'interrupted (Ctrl+C)'", why
        gone, alive = psutil.wait_procs(servers, timeout=30)  # reaped: its pid is gone
        assert alive == []
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# ---------------------------------------------------------------- the hostile-server labs


@pytest.mark.parametrize("attack", labs.MCP_ATTACKS)
def test_each_attack_makes_no_forbidden_execution_with_the_defence(attack):
    trial = labs.mcp_trial(attack)
    assert trial.forbidden == []
    assert trial.status == "completed"


@pytest.mark.parametrize("attack", labs.MCP_ATTACKS)
def test_each_attack_succeeds_without_its_defence(attack):
    """The check above can fail: with the one defence removed, the obedient model gets through."""
    trial = labs.mcp_trial(attack, defended=False)
    assert trial.attempted and trial.refused is None
    assert len(trial.forbidden) == 1


@pytest.mark.parametrize(
    "attack, attempted, refused",
    [
        ("tool poisoning", True, "not_approved"),  # egress after untrusted content: a person asks
        ("rug pull", False, None),  # the changed tool is never offered
        ("shadowing", True, None),  # the call reaches the notes server, as meant
        ("confused deputy", True, "not_permitted"),  # delete_file: high risk by your policy
    ],
)
def test_how_each_defence_stops_its_attack(attack, attempted, refused):
    trial = labs.mcp_trial(attack)
    assert (trial.attempted, trial.refused) == (attempted, refused)


def test_an_unknown_attack_is_a_user_error():
    with pytest.raises(UserError, match="no MCP attack 'sql injection'"):
        labs.mcp_trial("sql injection")


def test_the_readme_example_attaches_the_published_server_and_runs_its_tool():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "labkit.mcp" in b]
    namespace = {}
    exec(example, namespace)
    assert namespace["result"].status == "completed"
    assert namespace["result"].completed[0].startswith("mcp-time__get_current_time(")
    assert set(namespace["pins"]) == {"get_current_time", "convert_time"}
