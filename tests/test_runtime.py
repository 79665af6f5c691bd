"""Tests for labkit.runtime: durable dispatch, reconcile, the reducer, run_agent, crash and race
labs."""

import json
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from labkit.errors import GuardrailTripped, ToolError, UserError
from labkit.loop import STOP_REASONS as LOOP_STOP_REASONS
from labkit.runtime import (
    CRASH_POINTS,
    STOP_REASONS,
    TERMINAL,
    TRANSITIONS,
    Action,
    Cancelled,
    GoalVerified,
    OperationStore,
    OutcomeUnknown,
    Reconciled,
    State,
    ToolFailed,
    ToolRequested,
    ToolRuntime,
    ToolSucceeded,
    decide,
    event_for,
    operation_id,
    reduce,
    run_agent,
)
from labkit.schema import canonical
from labkit.tools import Tool

from runtime_worker import ledger_lines, ledger_tool, request

WORKER = str(Path(__file__).with_name("runtime_worker.py"))
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "amount"],
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
}
ARGS = {"order_id": "A-17", "amount": 30}


def refund_tool(calls, behave=None, risk="high"):
    """A refund tool that counts its executions in `calls`; `behave` may raise or change the
    answer."""

    def refund(order_id, amount):
        calls.append((order_id, amount))
        return (
            behave(order_id, amount)
            if behave
            else {"refund_id": f"R-{len(calls)}", "amount": amount}
        )

    return Tool("refund", "Refund an order.", SCHEMA, refund, risk=risk)


def lookup_tool():
    return Tool(
        "lookup",
        "Look up an order.",
        SCHEMA,
        lambda order_id, amount: {"order_id": order_id},
        risk="low",
    )


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "operations.db")


# ---------------------------------------------------------------- operation ids and the store


def test_operation_id_is_stable_for_one_intent_and_differs_for_another():
    op = operation_id("alice", "refund", ARGS, "ticket-9")
    assert op == operation_id("alice", "refund", {"amount": 30, "order_id": "A-17"}, "ticket-9")
    assert op.startswith("op_") and len(op) == 19
    others = [
        operation_id("bob", "refund", ARGS, "ticket-9"),
        operation_id("alice", "charge", ARGS, "ticket-9"),
        operation_id("alice", "refund", {**ARGS, "amount": 31}, "ticket-9"),
        operation_id("alice", "refund", ARGS, "ticket-10"),
    ]
    assert len({op, *others}) == 5
    assert canonical({"b": [1, {"d": 1, "c": "é"}], "a": 2}) == '{"a":2,"b":[1,{"c":"é","d":1}]}'


def test_canonical_writes_a_whole_number_float_as_its_int():
    assert (
        canonical({"a": 30.0, "b": [1.0, 2.5, {"c": -0.0}], "d": "30.0"})
        == '{"a":30,"b":[1,2.5,{"c":0}],"d":"30.0"}'
    )
    assert operation_id(
        "alice", "refund", {"order_id": "A-1", "amount": 30.0}, "t"
    ) == operation_id("alice", "refund", {"order_id": "A-1", "amount": 30}, "t")
    assert operation_id(
        "alice", "refund", {"order_id": "A-1", "amount": 30.5}, "t"
    ) != operation_id("alice", "refund", {"order_id": "A-1", "amount": 30}, "t")


def ledger_refund(path, received):
    """A refund with a real side effect: one ledger line per execution, written to a file."""

    def refund(order_id, amount):
        received.append(amount)
        with open(path, "a", encoding="utf-8") as ledger:
            ledger.write(f"refund {order_id} {amount}\n")
        return {"order_id": order_id, "amount": amount}

    return Tool("refund", "Refund an order.", SCHEMA, refund, risk="high")


def test_30_and_30_0_are_one_refund_however_the_caller_derives_the_id(db, tmp_path):
    ledger, received = tmp_path / "ledger.txt", []
    runtime = ToolRuntime([ledger_refund(ledger, received)], "high", db)
    for arguments in (
        {"order_id": "A-1", "amount": 30},
        {"order_id": "A-1", "amount": 30.0},
        '{"order_id": "A-1", "amount": 30.0}',
    ):  # the caller hashes what it was given
        raw = json.loads(arguments) if isinstance(arguments, str) else arguments
        runtime.dispatch("refund", arguments, operation_id("alice", "refund", raw, "ticket-1"))
    assert ledger.read_text().splitlines() == ["refund A-1 30"]  # 0 duplicate ledger lines
    assert received == [30] and type(received[0]) is int  # the tool got the normalized value
    [stored] = runtime.store.operations()
    assert stored.arguments == '{"amount":30,"order_id":"A-1"}'


def test_the_same_id_with_30_0_replays_instead_of_conflicting(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    first = runtime.dispatch("refund", {"order_id": "A-17", "amount": 30.0}, "op_1")
    assert first["data"] == {"refund_id": "R-1", "amount": 30} and calls == [("A-17", 30)]
    assert type(calls[0][1]) is int
    assert (
        runtime.dispatch("refund", ARGS, "op_1") == {**first, "replayed": True} and len(calls) == 1
    )


def test_run_agent_derives_the_operation_id_from_normalized_arguments(db, tmp_path):
    ledger, received = tmp_path / "ledger.txt", []
    runtime = ToolRuntime([ledger_refund(ledger, received)], "high", db)
    verify = lambda state: bool(state.results)  # noqa: E731
    runs = [
        run_agent(
            lambda state, a=arguments: Action("refund", a, "ticket-1"), runtime, State(), verify
        )
        for arguments in (
            '{"order_id": "A-1", "amount": 30.0}',
            {"order_id": "A-1", "amount": 30.0},
            {"order_id": "A-1", "amount": 30},
        )
    ]
    assert [run.status for run in runs] == ["completed"] * 3
    assert ledger.read_text().splitlines() == ["refund A-1 30"] and received == [30]
    assert [run.trace.lines()[0] for run in runs] == [
        ' 1 tool  refund({"amount":30,"order_id":"A-1"}) -> succeeded',
        ' 1 tool  refund({"amount":30,"order_id":"A-1"}) -> succeeded (replayed)',
        ' 1 tool  refund({"amount":30,"order_id":"A-1"}) -> succeeded (replayed)',
    ]
    op = operation_id("agent", "refund", {"order_id": "A-1", "amount": 30}, "ticket-1")
    assert {run.state.results[0][0] for run in runs} == {op}


def test_store_is_wal_with_full_sync(db):
    store = OperationStore(db)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # 2 = FULL
    with pytest.raises(UserError, match="synchronous"):
        OperationStore(db, synchronous="EXTRA; DROP TABLE operations")


def test_a_store_in_a_missing_folder_says_what_to_fix(tmp_path):
    with pytest.raises(UserError, match="folder exists"):
        OperationStore(tmp_path / "no" / "such" / "operations.db")


def test_in_flight_is_persisted_before_the_tool_runs(db):
    seen = []

    def refund(order_id, amount):  # looks at the store from another connection, as a restart would
        row = sqlite3.connect(db).execute("SELECT status FROM operations").fetchall()
        seen.append(row)
        return {"refund_id": "R-1"}

    runtime = ToolRuntime([Tool("refund", "Refund.", SCHEMA, refund, "high")], "high", db)
    assert runtime.dispatch("refund", ARGS, "op_1")["status"] == "succeeded"
    assert seen == [[("in_flight",)]]
    assert runtime.store.get("op_1").status == "succeeded"


def test_four_connections_claim_the_same_id_exactly_once(db):
    OperationStore(db).close()
    wins, gate = [], threading.Barrier(4)

    def claim():
        store = OperationStore(db)  # one connection per thread, as per process
        gate.wait()
        wins.append(store.claim("op_same", "refund", "{}"))
        store.close()

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False, False, False, True]


# ---------------------------------------------------------------- dispatch


def test_success_is_recorded_and_the_same_id_replays_it(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    first = runtime.dispatch("refund", ARGS, "op_1")
    assert first == {
        "ok": True,
        "status": "succeeded",
        "operation_id": "op_1",
        "data": {"refund_id": "R-1", "amount": 30},
    }
    again = ToolRuntime([refund_tool(calls)], "high", db).dispatch(
        "refund", dict(reversed(ARGS.items())), "op_1"
    )
    assert again == {**first, "replayed": True} and len(calls) == 1


def test_unknown_tool_is_a_result_the_model_can_act_on(db):
    runtime = ToolRuntime([refund_tool([])], "high", db)
    result = runtime.dispatch("refnud", ARGS, "op_1")
    assert (
        result["ok"] is False
        and result["error"] == "unknown_tool"
        and result["status"] == "rejected"
    )
    assert "refund" in result["message"] and runtime.store.get("op_1") is None


def test_risk_above_the_delegated_maximum_raises_permission_error(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls, risk="high")], "medium", db)
    with pytest.raises(PermissionError, match="high risk.*up to medium") as caught:
        runtime.dispatch("refund", ARGS, "op_1")
    assert isinstance(caught.value, GuardrailTripped) and caught.value.reason == "permission_denied"
    assert calls == [] and runtime.store.get("op_1") is None
    with pytest.raises(UserError, match="max_risk"):
        ToolRuntime([], "extreme", db)
    with pytest.raises(UserError, match="needs a store"):
        ToolRuntime([], "low")


def test_invalid_arguments_are_rejected_before_anything_is_stored(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    result = runtime.dispatch("refund", {"order_id": "A-17", "amount": "thirty"}, "op_1")
    assert (
        result["error"] == "invalid_arguments" and "amount should be integer" in result["message"]
    )
    assert (
        runtime.dispatch("refund", '{"order_id": "A-17", "amount": ', "op_1")["error"]
        == "invalid_json"
    )
    assert calls == [] and runtime.store.get("op_1") is None
    assert (
        runtime.dispatch("refund", json.dumps(ARGS), "op_1")["status"] == "succeeded"
    )  # model JSON text works


def test_an_operation_id_reused_for_other_arguments_or_tool_is_an_error(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls), lookup_tool()], "high", db)
    runtime.dispatch("refund", ARGS, "op_1")
    with pytest.raises(UserError, match="first used for refund"):
        runtime.dispatch("refund", {**ARGS, "amount": 300}, "op_1")
    with pytest.raises(UserError, match="derive ids with operation_id"):
        runtime.dispatch("lookup", ARGS, "op_1")
    assert len(calls) == 1


# ---------------------------------------------------------------- ids required, text UTF-8

NOT_IDS = [None, "", "   ", "\t\n", 3, b"op_1", ["op_1"], " op_1", "op_1\n", "op_\udcff"]


@pytest.mark.parametrize("bad", NOT_IDS)
def test_dispatch_refuses_a_missing_or_blank_operation_id_and_runs_nothing(db, bad):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    how = r"operation_id.*operation_id\(principal, tool, arguments, scope\)"
    for _ in range(3):  # the report: 3 refunds, [None] * 3 stored
        with pytest.raises(UserError, match=how):
            runtime.dispatch("refund", ARGS, bad)
    assert calls == [] and runtime.store.operations() == []


@pytest.mark.parametrize("bad", NOT_IDS)
def test_reconcile_refuses_a_missing_or_blank_operation_id(db, bad):
    runtime = ToolRuntime([refund_tool([])], "high", db)
    with pytest.raises(UserError, match="operation_id"):
        runtime.reconcile(bad, "succeeded")


@pytest.mark.parametrize("part", ["principal", "tool", "scope"])
@pytest.mark.parametrize("bad", NOT_IDS[1:])  # None is a scope's documented "no occasion"
def test_operation_id_refuses_a_blank_or_broken_part_naming_it(part, bad):
    parts = {"principal": "alice", "tool": "refund", "arguments": ARGS, "scope": "t-9", part: bad}
    with pytest.raises(UserError, match=f"^{part} ") as caught:
        operation_id(**parts)
    caught.value.args[0].encode("utf-8")  # the message itself is always UTF-8 text


@pytest.mark.parametrize("part", ["principal", "tool"])
def test_operation_id_refuses_a_missing_principal_or_tool(part):
    with pytest.raises(UserError, match=f"{part} is missing"):
        operation_id(**{"principal": "alice", "tool": "refund", "arguments": ARGS, part: None})


def test_no_scope_is_none_and_is_its_own_operation():
    assert operation_id("alice", "refund", ARGS) == operation_id("alice", "refund", ARGS, None)
    assert operation_id("alice", "refund", ARGS) != operation_id("alice", "refund", ARGS, "t-9")
    assert Action("refund", ARGS).scope is None


@pytest.mark.parametrize("bad", NOT_IDS[1:])
def test_an_action_refuses_a_blank_scope(bad):
    with pytest.raises(UserError, match="scope"):
        Action("refund", ARGS, bad)


@pytest.mark.parametrize("bad", NOT_IDS)
def test_run_agent_refuses_a_missing_or_blank_principal_before_any_step(db, bad):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    with pytest.raises(UserError, match="principal"):
        run_agent(refund_policy, runtime, State(), verify=lambda state: False, principal=bad)
    assert calls == [] and runtime.store.operations() == []


LONE = [
    '{"order_id": "\\ud83d", "amount": 30}',  # valid JSON: an escaped half of 😀
    '{"order_id": "A-\udcff", "amount": 30}',  # a byte that was not UTF-8
    '{"order_id": "A-17", "amount": 30, "\\udfff": 1}',  # in a key
    {"order_id": "A-\ud83d", "amount": 30},
]  # a Python dict holding one


@pytest.mark.parametrize("arguments", LONE)
def test_dispatch_rejects_text_utf8_cannot_encode_as_a_result_the_model_can_act_on(db, arguments):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    result = runtime.dispatch("refund", arguments, "op_1")
    assert (result["ok"], result["status"], result["error"]) == (False, "rejected", "invalid_text")
    assert "UTF-8" in result["message"] and "whole characters" in result["message"]
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # the result itself can be sent on
    assert calls == [] and runtime.store.operations() == []


@pytest.mark.parametrize("arguments", [{"order_id": "\ud83d"}, {"\udcff": 1}, ["A", ["\ud800"]]])
def test_operation_id_refuses_arguments_utf8_cannot_encode(arguments):
    with pytest.raises(UserError, match="arguments.* UTF-8 cannot encode.* whole characters"):
        operation_id("alice", "refund", arguments, "ticket-9")


@pytest.mark.parametrize("arguments", LONE)
def test_run_agent_feeds_text_utf8_cannot_encode_back_to_the_policy(db, arguments):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    once = lambda state: None if state.results else Action("refund", arguments)  # noqa: E731
    run = run_agent(once, runtime, State(), verify=lambda state: False)
    assert run.status == "unverified" and calls == [] and run.writes == 0
    [(label, outcome, found)] = run.state.results
    assert (label, outcome, found["error"]) == ("rejected_1", "failed", "invalid_text")
    "\n".join(run.trace.lines()).encode("utf-8")  # the trace prints anywhere


def test_run_agent_labels_a_rejected_action_and_still_derives_ids_for_good_ones(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    actions = iter(
        [
            Action(["refund"], ARGS, "t-1"),
            Action("refund", {"amount": 30}, "t-1"),
            Action("refund", ARGS, "t-1"),
        ]
    )
    run = run_agent(lambda state: next(actions, None), runtime, State(), lambda state: bool(calls))
    assert run.status == "completed" and len(calls) == 1
    assert [r[0] for r in run.state.results] == [
        "rejected_1",
        "rejected_2",
        operation_id("agent", "refund", ARGS, "t-1"),
    ]
    assert [r[2]["error"] for r in run.state.results[:2]] == ["unknown_tool", "invalid_arguments"]
    with pytest.raises(UserError, match="return an Action"):
        run_agent(lambda state: {"tool": "refund"}, runtime, State(), verify=lambda state: False)


def test_a_tool_error_is_a_recorded_failure_and_is_replayed(db):
    def declined(order_id, amount):
        raise ToolError("card declined — use another payment method", kind="declined")

    calls = []
    runtime = ToolRuntime([refund_tool(calls, declined)], "high", db)
    result = runtime.dispatch("refund", ARGS, "op_1")
    assert (result["status"], result["error"]) == ("failed", "declined")
    assert (
        runtime.dispatch("refund", ARGS, "op_1") == {**result, "replayed": True} and len(calls) == 1
    )


@pytest.mark.parametrize(
    "behave, said",
    [
        (
            lambda o, a: (_ for _ in ()).throw(ConnectionError("reset by peer")),
            "raised ConnectionError",
        ),
        (lambda o, a: {"status": "unknown", "request_id": "q-1"}, "status 'unknown'"),
    ],
)
def test_an_exception_or_unknown_status_needs_reconcile_and_never_runs_again(db, behave, said):
    calls = []
    runtime = ToolRuntime([refund_tool(calls, behave)], "high", db)
    result = runtime.dispatch("refund", ARGS, "op_1")
    assert (result["status"], result["error"]) == (
        "needs_reconcile",
        "needs_reconcile",
    ) and said in result["message"]
    for _ in range(3):
        assert runtime.dispatch("refund", ARGS, "op_1")["status"] == "needs_reconcile"
    assert len(calls) == 1


def test_an_exception_from_a_read_only_tool_is_a_failure_not_an_unknown(db):
    orders = {"A-17": 30}
    parameters = {
        "type": "object",
        "additionalProperties": False,
        "required": ["order_id"],
        "properties": {"order_id": {"type": "string"}},
    }
    lookup = Tool(
        "lookup",
        "Look up an order.",
        parameters,
        lambda order_id: {"paid": orders[order_id]},
        "low",
    )
    runtime = ToolRuntime([lookup], "low", db)
    result = runtime.dispatch(
        "lookup", {"order_id": "H7"}, "op_1"
    )  # KeyError: a read cannot half-happen
    assert (result["status"], result["error"]) == ("failed", "tool_crashed")
    assert "KeyError" in result["message"] and "only reads" in result["message"]
    assert runtime.store.get("op_1").status == "failed"
    assert runtime.dispatch("lookup", {"order_id": "H7"}, "op_1") == {**result, "replayed": True}
    assert runtime.recover() == [] and runtime.dispatch("lookup", {"order_id": "A-17"}, "op_2")[
        "data"
    ] == {"paid": 30}
    unknown = Tool(
        "lookup", "", parameters, lambda order_id: {"status": "unknown"}, "low"
    )  # a read's data is data
    assert (
        ToolRuntime([unknown], "low", db).dispatch("lookup", {"order_id": "Z-1"}, "op_3")["status"]
        == "succeeded"
    )


def test_a_read_only_tool_that_times_out_is_a_failure(db):
    release = threading.Event()
    parameters = {"type": "object", "additionalProperties": False, "required": [], "properties": {}}
    slow = Tool("lookup", "Look up.", parameters, lambda: release.wait(10), "low")
    result = ToolRuntime([slow], "low", db, timeout=0.05).dispatch("lookup", {}, "op_1")
    release.set()
    assert (result["status"], result["error"]) == ("failed", "timeout")


def test_a_timeout_needs_reconcile_and_a_late_finish_changes_nothing(db):
    release, calls = threading.Event(), []

    def slow(order_id, amount):
        release.wait(10)
        return {"refund_id": "R-late"}

    runtime = ToolRuntime([refund_tool(calls, slow)], "high", db, timeout=0.05)
    result = runtime.dispatch("refund", ARGS, "op_1")
    assert (
        result["status"] == "needs_reconcile"
        and "TimeoutError: no answer after 0.05 s" in result["message"]
    )
    release.set()
    assert (
        runtime.dispatch("refund", ARGS, "op_1")["status"] == "needs_reconcile" and len(calls) == 1
    )


def test_reconcile_records_what_checking_found_and_the_id_then_replays_it(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls, lambda o, a: 1 / 0)], "high", db)
    runtime.dispatch("refund", ARGS, "op_1")
    found = runtime.reconcile("op_1", "succeeded", {"refund_id": "R-9"})
    assert found == {
        "ok": True,
        "status": "succeeded",
        "operation_id": "op_1",
        "data": {"refund_id": "R-9"},
        "reconciled": True,
    }
    assert (
        runtime.dispatch("refund", ARGS, "op_1") == {**found, "replayed": True} and len(calls) == 1
    )
    with pytest.raises(UserError, match="nothing to reconcile"):
        runtime.reconcile("op_1", "failed")
    runtime.dispatch("refund", {**ARGS, "amount": 5}, "op_2")
    assert runtime.reconcile("op_2", "failed")["error"] == "not_done"
    with pytest.raises(UserError, match="'succeeded' \\(it happened\\)"):
        runtime.reconcile("op_2", "maybe")
    with pytest.raises(UserError, match="no operation op_9"):
        runtime.reconcile("op_9", "failed")


def test_recover_turns_only_in_flight_operations_into_needs_reconcile(db):
    store = OperationStore(db)
    store.claim("op_dead", "refund", canonical(ARGS))
    runtime = ToolRuntime([refund_tool([])], "high", store)
    runtime.dispatch("refund", {**ARGS, "amount": 1}, "op_done")
    with pytest.raises(UserError, match="call recover\\(\\) first"):
        runtime.reconcile("op_dead", "failed")
    in_flight = runtime.dispatch("refund", ARGS, "op_dead")
    assert (in_flight["status"], in_flight["error"]) == ("in_flight", "needs_reconcile")
    assert runtime.recover() == ["op_dead"] and runtime.recover() == []
    assert [(op.operation_id, op.status) for op in store.operations()] == [
        ("op_dead", "needs_reconcile"),
        ("op_done", "succeeded"),
    ]


def test_a_result_that_is_not_json_is_still_recorded(db):
    runtime = ToolRuntime([refund_tool([], lambda o, a: {"when": {1, 2}})], "high", db)
    assert runtime.dispatch("refund", ARGS, "op_1")["status"] == "succeeded"
    assert runtime.store.get("op_1").result["data"] == {"when": "{1, 2}"}


# ---------------------------------------------------------------- the verification matrix (runtime
# rows)


def test_a_lost_success_response_is_recovered_by_replay_not_by_running_again(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    runtime.dispatch("refund", ARGS, "op_1")  # succeeded, but the answer never reached the caller
    retry = runtime.dispatch("refund", ARGS, "op_1")  # so the caller retries with the same id
    assert (
        retry["replayed"]
        and retry["data"] == {"refund_id": "R-1", "amount": 30}
        and len(calls) == 1
    )


def test_an_unknown_side_effect_is_held_until_the_world_is_checked(db, tmp_path):
    ledger, tool = str(tmp_path / "ledger.txt"), ledger_tool(str(tmp_path / "ledger.txt"))

    def append_then_drop(entry, amount):  # the effect happens, then the connection drops
        tool.fn(entry, amount)
        raise ConnectionError("connection reset before the reply")

    runtime = ToolRuntime(
        [Tool("append_ledger", "", tool.parameters, append_then_drop, "high")], "high", db
    )
    arguments, op = request("e-1")
    assert runtime.dispatch("append_ledger", arguments, op)["status"] == "needs_reconcile"
    assert runtime.dispatch("append_ledger", arguments, op)["status"] == "needs_reconcile"
    assert ledger_lines(ledger, "e-1") == 1
    runtime.reconcile(
        op, "succeeded" if ledger_lines(ledger, "e-1") else "failed", {"found": "ledger"}
    )
    assert (
        runtime.dispatch("append_ledger", arguments, op)["replayed"]
        and ledger_lines(ledger, "e-1") == 1
    )


def test_cancellation_racing_completion_loses_nothing(db):
    cancel, calls = threading.Event(), []

    def refund_while_cancelled(order_id, amount):  # the user presses stop while the refund runs
        cancel.set()
        return {"refund_id": "R-1"}

    runtime = ToolRuntime([refund_tool(calls, refund_while_cancelled)], "high", db)
    run = run_agent(
        lambda state: Action("refund", ARGS, "ticket-9"),
        runtime,
        State(),
        verify=lambda state: len(state.results) >= 2,
        cancel=cancel.is_set,
    )
    op = operation_id("agent", "refund", ARGS, "ticket-9")
    assert run.status == "cancelled" and run.state.phase == "cancelled"
    assert run.state.results == (
        (op, "succeeded", {"refund_id": "R-1"}),
    )  # completion first, then cancel
    # the other order: the cancel event is applied first, the completion arrives late
    state = reduce(reduce(State(), ToolRequested(op, "refund", ARGS)), Cancelled("stop"))
    late = reduce(state, ToolSucceeded(op, {"refund_id": "R-1"}))
    assert (
        late.phase == "cancelled"
        and late.results == ()
        and late.rejected == (("tool_succeeded", "cancelled is final"),)
    )
    assert (
        runtime.store.get(op).status == "succeeded" and len(calls) == 1
    )  # the store still knows it happened


def test_a_duplicate_operation_id_executes_once(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    results = [runtime.dispatch("refund", ARGS, "op_1") for _ in range(5)]
    assert len(calls) == 1 and [r.get("replayed", False) for r in results] == [
        False,
        True,
        True,
        True,
        True,
    ]


def test_two_processes_dispatching_the_same_operation_id_execute_once(tmp_path):
    db, ledger = str(tmp_path / "operations.db"), str(tmp_path / "ledger.txt")
    OperationStore(db).close()
    for race in range(3):
        entry = f"race-{race}"
        workers = [
            subprocess.Popen(
                [sys.executable, WORKER, "race", db, ledger, entry],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        assert [w.stdout.readline().strip() for w in workers] == ["ready", "ready"]
        for worker in workers:  # both are loaded and waiting: start them together
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = [json.loads(w.communicate(timeout=60)[0]) for w in workers]
        ran = [r for r in results if r["status"] == "succeeded" and not r.get("replayed")]
        assert ledger_lines(ledger, entry) == 1 and len(ran) == 1
        other = next(r for r in results if r is not ran[0])
        assert other["status"] == "in_flight" or other.get("replayed")


# ---------------------------------------------------------------- the crash lab


class BlindRetryRuntime(ToolRuntime):
    """What a first version often does: run again anything without a recorded success. Must FAIL the
    lab."""

    def dispatch(self, name, arguments, operation_id):
        stored = self.store.get(operation_id)
        if stored is not None and stored.status == "succeeded":
            return {**stored.result, "replayed": True}
        self.store.claim(operation_id, name, canonical(arguments))  # a no-op when the row exists
        return self._execute(self.tools.get(name), arguments, operation_id)


def crash_lab(tmp_path, trials, runtime_class=ToolRuntime):
    """Kill a worker at each crash point in turn, restart, retry, reconcile; count what went
    wrong."""
    db, ledger = str(tmp_path / "operations.db"), str(tmp_path / "ledger.txt")
    OperationStore(db).close()
    report = Counter(trials=trials)
    for index in range(trials):
        point, entry = CRASH_POINTS[index % 4], f"trial-{index}"
        arguments, op = request(entry)
        worker = subprocess.run(
            [sys.executable, WORKER, "crash", db, ledger, entry, point, str(index // 4 % 2)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        report["killed"] += worker.returncode == -signal.SIGKILL
        runtime = runtime_class([ledger_tool(ledger)], max_risk="high", store=db)  # the restart
        left = runtime.store.get(op)
        runtime.recover()
        unknown = left is not None and left.status == "in_flight"
        report["unknown"] += unknown
        report["unknown_in_needs_reconcile"] += (
            unknown and runtime.store.get(op).status == "needs_reconcile"
        )
        retry = runtime.dispatch("append_ledger", arguments, op)  # the agent asks again
        report["retry_held"] += unknown and retry["status"] == "needs_reconcile"
        if runtime.store.get(op).status == "needs_reconcile":  # check the world, record it
            runtime.reconcile(
                op, "succeeded" if ledger_lines(ledger, entry) else "failed", {"found": "ledger"}
            )
        stored, replay = runtime.store.get(op), runtime.dispatch("append_ledger", arguments, op)
        report["duplicates"] += ledger_lines(ledger, entry) > 1
        report["lost"] += ledger_lines(ledger, entry) > 0 and stored.status != "succeeded"
        report["phantom"] += ledger_lines(ledger, entry) == 0 and stored.status == "succeeded"
        report["replayed"] += (
            bool(replay.get("replayed")) and {**stored.result, "replayed": True} == replay
        )
        runtime.store.close()
    return report


def lab_passes(report):
    return (
        report["killed"] == report["trials"]
        and report["duplicates"] == report["lost"] == report["phantom"] == 0
        and report["unknown"] == report["unknown_in_needs_reconcile"] == report["retry_held"]
        and report["replayed"] == report["trials"]
    )


@pytest.mark.soak
def test_crash_lab_104_kills_no_duplicates_no_lost_records(tmp_path):
    report = crash_lab(tmp_path, 104)
    assert lab_passes(report), dict(report)
    assert report["unknown"] == 78  # after_persist, during_execute, after_execute: 26 each


def test_crash_lab_fails_a_blind_retry(tmp_path):
    report = crash_lab(tmp_path, 12, BlindRetryRuntime)
    assert not lab_passes(report)
    assert report["duplicates"] >= 3 and report["retry_held"] == 0, dict(report)


# ---------------------------------------------------------------- the reducer


def test_the_reducer_walks_a_legal_path():
    state = reduce(State(), ToolRequested("op_1", "refund", ARGS))
    assert (state.phase, state.pending) == ("waiting", "op_1")
    state = reduce(state, ToolSucceeded("op_1", {"refund_id": "R-1"}))
    assert (state.phase, state.pending, state.results) == (
        "ready",
        None,
        (("op_1", "succeeded", {"refund_id": "R-1"}),),
    )
    state = reduce(
        reduce(state, ToolRequested("op_2", "refund", ARGS)), ToolFailed("op_2", "declined")
    )
    assert state.results[-1] == ("op_2", "failed", {"error": "declined", "message": ""})
    state = reduce(reduce(state, ToolRequested("op_3", "refund", ARGS)), OutcomeUnknown("op_3"))
    assert (state.phase, state.pending) == ("needs_reconcile", "op_3")
    state = reduce(state, Reconciled("op_3", "succeeded", {"refund_id": "R-3"}))
    assert state.phase == "ready" and state.results[-1] == (
        "op_3",
        "succeeded",
        {"refund_id": "R-3"},
    )
    assert reduce(state, GoalVerified()).phase == "done" and state.rejected == ()


def test_the_reducer_rejects_illegal_stale_and_final_events_and_keeps_them():
    waiting = reduce(State(), ToolRequested("op_2", "refund", ARGS))
    stale = reduce(waiting, ToolSucceeded("op_1", "late"))
    assert (stale.phase, stale.results) == ("waiting", ()) and "stale: op_1" in stale.rejected[0][1]
    assert reduce(State(), ToolSucceeded("op_1")).rejected == (
        ("tool_succeeded", "tool_succeeded is not allowed while ready"),
    )
    assert reduce(waiting, ToolRequested("op_3", "refund", ARGS)).pending == "op_2"  # one at a time
    done = reduce(State(), GoalVerified())
    assert reduce(done, ToolRequested("op_4", "refund", ARGS)).rejected == (
        ("tool_requested", "done is final"),
    )
    assert (
        reduce(State(phase="needs_reconcile", pending="op_5"), Reconciled("op_6", "failed")).phase
        == "needs_reconcile"
    )


def test_every_pair_outside_the_table_is_rejected_and_states_are_not_mutated():
    events = [
        ToolRequested("op_1", "t", {}),
        ToolSucceeded("op_1"),
        ToolFailed("op_1"),
        OutcomeUnknown("op_1"),
        Reconciled("op_1", "failed"),
        GoalVerified(),
        Cancelled(),
    ]
    for phase in ("ready", "waiting", "needs_reconcile", *TERMINAL):
        for event in events:
            before = State(
                phase=phase, pending="op_1" if phase in ("waiting", "needs_reconcile") else None
            )
            after = reduce(before, event)
            assert before == State(
                phase=phase, pending=before.pending
            )  # pure: the input is unchanged
            assert (
                after.phase == TRANSITIONS[(phase, event.kind)]
                if (phase, event.kind) in TRANSITIONS
                else after.rejected and after.phase == phase
            )


def test_event_for_maps_each_kind_of_result():
    assert event_for({"ok": True, "operation_id": "op_1", "data": 1}) == ToolSucceeded("op_1", 1)
    assert event_for(
        {"ok": False, "operation_id": "op_1", "error": "needs_reconcile"}
    ) == OutcomeUnknown("op_1")
    assert event_for(
        {"ok": False, "operation_id": "op_1", "error": "declined", "message": "use another card"}
    ) == ToolFailed("op_1", "declined", "use another card")


# ---------------------------------------------------------------- run_agent


def refund_policy(state):
    return None if state.results else Action("refund", ARGS, "ticket-9")


def test_run_agent_completes_when_verify_checks_the_world(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "high", db)
    run = run_agent(refund_policy, runtime, State(), verify=lambda state: len(calls) == 1)
    assert (run.status, run.steps, run.writes, run.state.phase) == ("completed", 1, 1, "done")
    assert run.trace.lines()[-1] == " 1 stop  completed"
    again = run_agent(
        lambda s: Action("refund", ARGS, "ticket-9"),
        runtime,
        State(),
        verify=lambda state: bool(state.results),
    )  # a second run, same intent
    assert (
        again.status == "completed" and "(replayed)" in again.trace.lines()[0] and len(calls) == 1
    )


def test_run_agent_stops_at_once_on_needs_reconcile_and_resumes_after_reconcile(db):
    calls, asked = [], []
    runtime = ToolRuntime([refund_tool(calls, lambda o, a: 1 / 0)], "high", db)

    def policy(state):
        asked.append(state.phase)
        return Action("refund", ARGS, "ticket-9")

    run = run_agent(policy, runtime, State(), verify=lambda state: bool(state.results), max_steps=5)
    assert (run.status, run.steps, len(asked), len(calls)) == ("needs_reconcile", 1, 1, 1)
    op = run.state.pending
    runtime.reconcile(op, "succeeded", {"refund_id": "R-1"})
    resumed = run_agent(
        policy,
        runtime,
        reduce(run.state, Reconciled(op, "succeeded", {"refund_id": "R-1"})),
        verify=lambda state: bool(state.results),
    )
    assert resumed.status == "completed" and len(calls) == 1


def test_run_agent_budgets_steps_writes_and_time(db):
    runtime = ToolRuntime([refund_tool([]), lookup_tool()], "high", db)
    never = lambda state: False  # noqa: E731
    look = lambda state: Action("lookup", {**ARGS, "amount": len(state.results)})  # noqa: E731
    assert run_agent(look, runtime, State(), never, max_steps=3).status == "step_limit"
    many = lambda state: Action("refund", {**ARGS, "amount": len(state.results)})  # noqa: E731
    writes = run_agent(many, runtime, State(), never, max_steps=9, max_writes=2)
    assert (writes.status, writes.writes, writes.message) == (
        "budget_exhausted",
        2,
        "writes: 2 of 2 used",
    )
    typo = lambda state: Action("refund", {"order_id": "A-17"})  # noqa: E731
    rejected = run_agent(typo, runtime, State(), never, max_steps=3, max_writes=1)
    assert (rejected.status, rejected.steps, rejected.writes) == (
        "step_limit",
        3,
        0,
    )  # rejected: nothing written
    assert "amount" in rejected.state.results[-1][2]["message"]
    ticks = iter(range(100))
    timed = run_agent(
        look, runtime, State(), never, max_steps=99, max_seconds=3, clock=lambda: next(ticks)
    )
    assert timed.status == "budget_exhausted" and timed.message == "time: 3 s used"


def test_run_agent_stops_on_permission_denied_and_when_the_policy_gives_up(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls)], "medium", db)
    denied = run_agent(refund_policy, runtime, State(), verify=lambda state: False)
    assert denied.status == "permission_denied" and "high risk" in denied.message and calls == []
    assert denied.state.results[-1][2]["error"] == "permission_denied" and denied.writes == 0
    gave_up = run_agent(lambda state: None, runtime, State(), verify=lambda state: False)
    assert gave_up.status == "unverified"


def test_run_agent_stops_with_every_reason_of_its_own_vocabulary_and_no_other(db):
    calls = []
    runtime = ToolRuntime([refund_tool(calls), lookup_tool()], "high", db)
    never = lambda state: False  # noqa: E731
    look = lambda state: Action("lookup", {**ARGS, "amount": len(state.results)})  # noqa: E731
    crashing = ToolRuntime([refund_tool([], lambda o, a: 1 / 0)], "high", str(db) + ".2")
    runs = {
        "completed": run_agent(refund_policy, runtime, State(), lambda state: bool(calls)),
        "needs_reconcile": run_agent(refund_policy, crashing, State(), never),
        "cancelled": run_agent(look, runtime, State(), never, cancel=lambda: True),
        "unverified": run_agent(lambda state: None, runtime, State(), never),
        "step_limit": run_agent(look, runtime, State(), never, max_steps=1),
        "budget_exhausted": run_agent(refund_policy, runtime, State(), never, max_writes=0),
        "permission_denied": run_agent(
            refund_policy, ToolRuntime([refund_tool([])], "low", runtime.store), State(), never
        ),
    }
    assert {expected: run.status for expected, run in runs.items()} == {s: s for s in runs}
    assert sorted(runs) == sorted(STOP_REASONS)  # each reason it defines, reached once


def test_the_runtimes_stop_reasons_are_its_own_not_the_loops():
    assert {"needs_reconcile", "unverified", "step_limit", "cancelled"}.isdisjoint(
        LOOP_STOP_REASONS
    )
    assert set(STOP_REASONS) - set(LOOP_STOP_REASONS) == {
        "needs_reconcile",
        "unverified",
        "step_limit",
        "cancelled",
    }


def test_decide_without_a_stored_operation_executes():
    assert decide(None, "refund", "{}") == "execute"
