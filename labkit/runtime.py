"""A durable tool runtime: at-most-once side effects, reconciliation, crash recovery.

Built in 07_runtime. `ToolRuntime.dispatch` stores each operation as in_flight (SQLite, WAL,
synchronous=FULL) before its tool runs and records the outcome after. It never runs an operation
twice on its own: the same operation_id replays the stored result, and an outcome nobody knows (a
crash, an exception, a timeout) stays needs_reconcile until someone checks the external system and
calls `reconcile`. A pure `reduce` of typed events tracks a run; `run_agent` drives one, bounded.
Deliberately left out: leases and heartbeats (`recover()` assumes one worker per store at
start-up), retry queues, compensation (sagas), distributed stores, async execution.
"""

import hashlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from typing import ClassVar

from .errors import GuardrailTripped, ToolError, UserError
from .schema import (
    ArgumentError,
    canonical,
    check_text,
    normalize_arguments,
    parse_arguments,
    printable,
    required_id,
    validate_arguments,
)
from .sqlite_store import open_shared
from .tools import RISKS, as_registry, risk_above
from .trace import Trace

STATUSES = ("in_flight", "succeeded", "failed", "needs_reconcile")
# How run_agent ends: its own vocabulary (a step is a policy decision, not loop.run's model turn).
STOP_REASONS = (
    "completed",
    "needs_reconcile",
    "cancelled",
    "unverified",
    "step_limit",
    "budget_exhausted",
    "permission_denied",
)
CRASH_POINTS = ("before_persist", "after_persist", "during_execute", "after_execute")
MAKE_ID = "derive it with operation_id(principal, tool, arguments, scope)"


def operation_id(principal: str, tool: str, arguments: dict, scope: str | None = None) -> str:
    """A stable id for one intended side effect: the same intent always derives the same id.

    principal: who acts (two users refunding one order are two operations); tool + canonical
    arguments: what is done; scope: the business occasion that makes a repeat legitimate, or None
    (the default) when there is none, so every repeat is the same operation. A missing or blank
    principal, tool or scope, or text UTF-8 cannot encode, is a UserError: never a silent id.
    Example: operation_id("alice", "refund", {"order_id": "A-17", "amount": 30}, "ticket-9")
    """
    required_id(principal, "principal", "say who acts, e.g. operation_id('alice', 'refund', ...)")
    required_id(tool, "tool", "name the tool that acts, e.g. operation_id('alice', 'refund', ...)")
    _scope(scope)
    check_text(arguments, "arguments", UserError)
    try:
        key = canonical([principal, tool, arguments, scope])
    except (TypeError, ValueError):  # e.g. a set or an object: JSON has no text for it
        key = None  # raised below, so json's error is not its __context__
    if key is None:
        raise UserError(
            "arguments must be JSON values (dict, list, str, number, bool, None) — "
            "pass them as the tool receives them"
        )
    # 64 bits: readable, and plenty here
    return "op_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _scope(scope):
    """None (no business occasion), or a proper id: a blank scope is a mistake, never a default."""
    if scope is not None:
        fix = "name the business occasion, e.g. scope='ticket-9', or pass None when there is none"
        required_id(scope, "scope", fix)


# ---------------------------------------------------------------- the operation store


@dataclass
class Operation:
    operation_id: str
    tool: str
    arguments: str  # canonical JSON text
    status: str  # one of STATUSES
    result: dict | None  # what dispatch returned or reconcile found; None while in flight


class OperationStore:
    """One SQLite row per operation; every write is committed (and fsynced) before it returns.

    Example: store = OperationStore("runtime.db"); store.get("op_...")  ->  Operation or None
    """

    def __init__(self, path: str, synchronous: str = "FULL"):
        self.db = open_shared(str(path), synchronous, "the operation store", timeout=30)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS operations (operation_id TEXT PRIMARY KEY, "
            "tool TEXT NOT NULL, arguments TEXT NOT NULL, status TEXT NOT NULL, result TEXT)"
        )

    def get(self, operation_id: str) -> Operation | None:
        found = self._select("WHERE operation_id = ?", (operation_id,))
        return found[0] if found else None

    def claim(self, operation_id: str, tool: str, arguments: str) -> bool:
        """Insert the operation as in_flight. False when the id exists: someone claimed it first."""
        cursor = self.db.execute(
            "INSERT INTO operations VALUES (?, ?, ?, 'in_flight', NULL) ON CONFLICT DO NOTHING",
            (operation_id, tool, arguments),
        )
        return cursor.rowcount == 1  # subtle: one atomic statement, so two workers cannot both win

    def settle(
        self, operation_id: str, status: str, result: dict, was=("in_flight", "needs_reconcile")
    ) -> bool:
        """Record an outcome, only while the operation is in one of the `was` statuses."""
        # default=str, so a tool returning a non-JSON value still gets its success recorded
        cursor = self.db.execute(
            f"UPDATE operations SET status = ?, result = ? WHERE operation_id = ? AND status IN "
            f"({','.join('?' * len(was))})",
            (status, json.dumps(result, default=str), operation_id, *was),
        )
        return cursor.rowcount == 1

    def operations(self, status: str | None = None) -> list[Operation]:
        """Every operation, or those in one status, in the order they were first stored."""
        return self._select("WHERE ? IS NULL OR status = ? ORDER BY rowid", (status, status))

    def _select(self, where, parameters):
        rows = self.db.execute(f"SELECT * FROM operations {where}", parameters).fetchall()
        # the last column is the result's JSON text, or NULL while in flight
        return [Operation(*row[:4], json.loads(row[4]) if row[4] else None) for row in rows]

    def close(self) -> None:
        self.db.close()


def decide(stored: Operation | None, tool: str, arguments: str) -> str:
    """What dispatch does with an operation_id, given the stored Operation (or None).

    "execute": nothing stored; "conflict": the id was used for another tool or other arguments;
    "replay": an outcome is recorded, return it; "needs_reconcile": in flight or unknown, so it
    may have happened: never run it again automatically.
    Example: decide(None, "refund", '{"amount":30}')  ->  "execute"
    """
    if stored is None:
        return "execute"
    if (stored.tool, stored.arguments) != (tool, arguments):
        return "conflict"
    return "replay" if stored.status in ("succeeded", "failed") else "needs_reconcile"


# ---------------------------------------------------------------- the runtime


class PermissionDenied(GuardrailTripped, PermissionError):
    """A tool's risk is above what the runtime was delegated (also a built-in PermissionError)."""


def _refused(op, error, message, status="failed"):
    return {"ok": False, "status": status, "operation_id": op, "error": error, "message": message}


def _unknown(op, message, status="needs_reconcile"):
    return _refused(op, "needs_reconcile", message, status)


def _succeeded(op, data):
    return {"ok": True, "status": "succeeded", "operation_id": op, "data": data}


class ToolRuntime:
    """Dispatch tools durably: at most once per operation_id, every outcome recorded.

    Example: runtime = ToolRuntime([refund], max_risk="high", store="runtime.db")
             runtime.dispatch("refund", {"order_id": "A-17", "amount": 30}, op)
    """

    def __init__(self, tools, max_risk="low", store=None, timeout=None, failpoint=None):
        if max_risk not in RISKS:
            raise UserError(f"max_risk={max_risk!r} — use one of {', '.join(RISKS)}")
        if store is None:
            raise UserError(
                "ToolRuntime needs a store — pass store='runtime.db' (a file that outlives the "
                "process), or ':memory:' for a throwaway experiment (not durable)"
            )
        self.tools = as_registry(tools)
        self.max_risk = max_risk
        self.store = store if isinstance(store, OperationStore) else OperationStore(store)
        self.timeout = timeout  # seconds per tool call; None waits
        self.failpoint = failpoint or (lambda point: None)  # the crash lab kills the process here

    def risk(self, name: str) -> str | None:
        """The risk of a tool, or None when there is no such tool.
        Example: runtime.risk("refund")"""
        return self.tools.get(name).risk if isinstance(name, str) and name in self.tools else None

    def arguments_for(self, name: str, arguments: dict | str) -> dict:
        """The arguments as the tool receives them: parsed, validated, 30.0 made 30.

        `name` must be one of the runtime's tools; raises ArgumentError where dispatch would reject.
        Example: runtime.arguments_for("refund", '{"order_id": "A-17", "amount": 30.0}')["amount"]
                 ->  30
        """
        parameters = self.tools.get(name).parameters
        arguments = parse_arguments(arguments) if isinstance(arguments, str) else arguments
        validate_arguments(arguments, parameters)
        return check_text(normalize_arguments(arguments, parameters))  # a dict may hold "\\ud83d"

    def dispatch(self, name: str, arguments: dict | str, operation_id: str) -> dict:
        """Run a tool at most once per operation_id and return its result, stored or fresh.

        A missing or blank operation_id is a UserError (derive one with operation_id(...)).
        Example: runtime.dispatch("refund", {"order_id": "A-17", "amount": 30}, op)["status"]
                 ->  "succeeded" (run now) or the stored status (replayed=True)
        """
        required_id(operation_id, "operation_id", MAKE_ID)  # before anything can run
        if self.risk(name) is None:
            return _refused(
                operation_id,
                "unknown_tool",
                f"there is no tool {name!r} — use one of {', '.join(self.tools.names())}",
                "rejected",
            )
        tool = self.tools.get(name)
        if risk_above(tool.risk, self.max_risk):
            raise PermissionDenied(
                f"{name} is {tool.risk} risk but this runtime may run up to {self.max_risk} "
                f"— ask a person to approve it, or delegate max_risk={tool.risk!r} on purpose",
                reason="permission_denied",
            )
        try:  # the tool, the stored text and the conflict check all see the normalized arguments
            arguments = self.arguments_for(name, arguments)
        except ArgumentError as exc:
            # the message says how to fix
            return _refused(operation_id, exc.kind, str(exc), "rejected")
        text = canonical(arguments)
        stored = self.store.get(operation_id)
        if decide(stored, name, text) == "execute":
            self.failpoint("before_persist")
            # in_flight is durable before the tool runs
            if self.store.claim(operation_id, name, text):
                self.failpoint("after_persist")
                return self._execute(tool, arguments, operation_id)
            # another worker claimed it after our read
            stored = self.store.get(operation_id)
        return self._stored(stored, name, text)

    def _stored(self, stored, name, text):
        op = stored.operation_id
        if decide(stored, name, text) == "conflict":
            raise UserError(
                f"operation_id {op} was first used for {stored.tool}({stored.arguments}), not "
                f"{name}({text}) — derive ids with operation_id(principal, tool, arguments, scope)"
            )
        if stored.result is None:  # in flight: a worker runs it right now, or one died mid-way
            said = f"{op} is in flight: started, outcome not recorded — do not run it again"
            fix = "call recover(), check the external system, then reconcile()"
            return _unknown(op, f"{said}; if no worker is running it, {fix}", "in_flight")
        return {**stored.result, "replayed": True}

    def _execute(self, tool, arguments, op):
        # a risk="low" tool only reads, so it has no side effect that could be unknown: its
        # exceptions (and timeouts) are failures. This trusts the label: a tool that writes must
        # never be marked low, or a crash after its write would be recorded as "did not happen".
        reads_only = tool.risk == "low"
        check = f"check the external system, then reconcile({op!r}, outcome)"
        try:
            data = self._call(tool.fn, arguments)
        except ToolError as exc:  # the tool itself says it failed before acting
            result = _refused(op, exc.kind, str(exc))
        except Exception as exc:
            said = f"{tool.name} raised {type(exc).__name__}: {exc}"
            if reads_only:
                kind = "timeout" if isinstance(exc, TimeoutError) else "tool_crashed"
                fix = "nothing changed; check the arguments, or try another way"
                replays = "the same operation_id replays this failure"
                result = _refused(op, kind, f"{said} — it only reads, so {fix} ({replays})")
            else:  # subtle: it may have raised after the side effect happened
                result = _unknown(op, f"{said} — it may or may not have acted; {check}")
        else:
            result = _succeeded(op, data)
            if not reads_only and isinstance(data, dict) and data.get("status") == "unknown":
                said = f"{tool.name} answered status 'unknown' — {check}"
                result = {**_unknown(op, said), "data": data}
        self.failpoint("after_execute")
        self.store.settle(op, result["status"], result)
        return result

    def _call(self, fn, arguments):
        """fn(**arguments); a TimeoutError after self.timeout seconds (None: wait)."""
        if self.timeout is None:
            return fn(**arguments)
        answer = Future()  # the tool's data, or its exception, once it has one

        def target():
            try:
                answer.set_result(fn(**arguments))
            except BaseException as exc:
                answer.set_exception(exc)

        threading.Thread(target=target, daemon=True).start()
        if wait([answer], self.timeout).not_done:  # it goes on in the background: outcome unknown
            raise TimeoutError(f"no answer after {self.timeout} s")
        return answer.result()

    def reconcile(self, operation_id: str, outcome: str, data: object = None) -> dict:
        """Record what checking the external system found: outcome "succeeded" or "failed".

        Example: runtime.reconcile(op, "succeeded", {"refund_id": "R-1"})
        """
        listed = "(store.operations() lists them)"
        required_id(operation_id, "operation_id", f"pass the id dispatch returned {listed}")
        if outcome not in ("succeeded", "failed"):
            raise UserError(
                f"outcome={outcome!r} — use 'succeeded' (it happened) or 'failed' (it did not)"
            )
        stored = self.store.get(operation_id)
        if stored is None:
            raise UserError(
                f"there is no operation {operation_id} in the store — check the id {listed}"
            )
        if stored.status != "needs_reconcile":
            fix = "there is nothing to reconcile"
            if stored.status == "in_flight":
                fix = "call recover() first, when no worker runs it"
            raise UserError(f"{operation_id} is {stored.status}, not needs_reconcile — {fix}")
        if outcome == "succeeded":
            result = _succeeded(operation_id, data)
        else:
            again = "a new attempt is a new operation (derive it with a new scope)"
            result = _refused(operation_id, "not_done", f"checked: it did not happen — {again}")
        result["reconciled"] = True
        if not self.store.settle(operation_id, outcome, result, was=("needs_reconcile",)):
            raise UserError(f"{operation_id} changed while reconciling — read it again and retry")
        return result

    def recover(self) -> list[str]:
        """At start-up, every in_flight operation left by a dead worker becomes needs_reconcile.

        Call it only while no other worker uses the store (production uses leases for this).
        Example: ToolRuntime(tools, "high", "runtime.db").recover()  ->  ["op_..."]
        """
        said = "the worker stopped before recording the outcome"
        message = f"{said} — check the external system, then reconcile(operation_id, outcome)"
        recovered = []
        for op in self.store.operations("in_flight"):
            unknown = _unknown(op.operation_id, message)
            if self.store.settle(op.operation_id, "needs_reconcile", unknown, was=("in_flight",)):
                recovered.append(op.operation_id)
        return recovered


# ---------------------------------------------------------------- typed events and a pure reducer


@dataclass(frozen=True)
class ToolRequested:
    kind: ClassVar[str] = "tool_requested"
    operation_id: str
    tool: str
    arguments: dict


@dataclass(frozen=True)
class ToolSucceeded:
    kind: ClassVar[str] = "tool_succeeded"
    operation_id: str
    data: object = None


@dataclass(frozen=True)
class ToolFailed:
    kind: ClassVar[str] = "tool_failed"
    operation_id: str
    error: str = ""  # the kind, e.g. "declined"
    message: str = ""  # how to fix it, for whoever reads the results (a model)


@dataclass(frozen=True)
class OutcomeUnknown:
    kind: ClassVar[str] = "outcome_unknown"
    operation_id: str


@dataclass(frozen=True)
class Reconciled:
    kind: ClassVar[str] = "reconciled"
    operation_id: str
    outcome: str  # "succeeded" | "failed"
    data: object = None


@dataclass(frozen=True)
class GoalVerified:
    kind: ClassVar[str] = "goal_verified"


@dataclass(frozen=True)
class Cancelled:
    kind: ClassVar[str] = "cancelled"
    reason: str = ""


TRANSITIONS = {  # (phase, event kind) -> next phase; anything else is rejected
    ("ready", "tool_requested"): "waiting",
    ("ready", "goal_verified"): "done",
    ("ready", "cancelled"): "cancelled",
    ("waiting", "tool_succeeded"): "ready",
    ("waiting", "tool_failed"): "ready",
    ("waiting", "outcome_unknown"): "needs_reconcile",
    ("waiting", "cancelled"): "cancelled",
    ("needs_reconcile", "reconciled"): "ready",
    ("needs_reconcile", "cancelled"): "cancelled",
}
TERMINAL = ("done", "cancelled")


@dataclass(frozen=True)
class State:
    phase: str = "ready"  # ready | waiting | needs_reconcile | done | cancelled
    pending: str | None = None  # the operation_id awaited while waiting or needs_reconcile
    # ((operation_id, "succeeded" | "failed", data or {"error", "message"}), ...)
    results: tuple = ()
    rejected: tuple = ()  # ((event kind, why), ...): events refused, kept so nothing is lost


def reduce(state: State, event) -> State:
    """The next State after one event; illegal, late and stale events are rejected (and kept).

    Pure: no store, no clock, no I/O, so a run can be replayed from its events.
    Example: reduce(State(), ToolRequested("op_1", "refund", {})).phase  ->  "waiting"
    """
    after = TRANSITIONS.get((state.phase, event.kind))
    op = getattr(event, "operation_id", None)
    if state.phase in TERMINAL:  # no transition leaves a final phase
        why = f"{state.phase} is final"
    elif after is None:
        why = f"{event.kind} is not allowed while {state.phase}"
    elif op is not None and state.pending is not None and op != state.pending:
        why = f"stale: {op} is not the pending operation {state.pending}"
    else:
        why = None
    if why:
        return replace(state, rejected=state.rejected + ((event.kind, why),))
    assert after is not None  # why is None only where a transition exists
    if event.kind == "tool_requested":
        return replace(state, phase=after, pending=op)
    if event.kind == "tool_succeeded":
        found = (op, "succeeded", event.data)
    elif event.kind == "tool_failed":
        found = (op, "failed", {"error": event.error, "message": event.message})
    elif event.kind == "reconciled":
        found = (op, event.outcome, event.data)
    else:  # goal_verified, cancelled: no operation to record
        return replace(state, phase=after)
    return replace(state, phase=after, pending=None, results=state.results + (found,))


def event_for(result: dict) -> ToolSucceeded | OutcomeUnknown | ToolFailed:
    """The event a dispatch result stands for.
    Example: event_for({"ok": True, "operation_id": "op_1"})  ->  ToolSucceeded("op_1")"""
    op = result["operation_id"]
    if result["ok"]:
        return ToolSucceeded(op, result.get("data"))
    if result["error"] == "needs_reconcile":
        return OutcomeUnknown(op)
    return ToolFailed(op, result["error"], result.get("message", ""))


# ---------------------------------------------------------------- a bounded agent on the runtime


@dataclass(frozen=True)
class Action:
    tool: str
    arguments: dict  # or the model's JSON text: dispatch parses and validates it
    scope: str | None = None  # the business occasion, part of the operation_id; None: there is none

    def __post_init__(self):
        _scope(self.scope)


@dataclass
class AgentRun:
    status: str  # one of STOP_REASONS
    state: State
    steps: int  # dispatches made
    writes: int  # dispatches of tools above "low" risk that were not rejected
    trace: Trace
    message: str = ""


def run_agent(
    policy: Callable[[State], Action | None],
    runtime: ToolRuntime,
    initial_state: State | None = None,
    verify: Callable[[State], bool] | None = None,
    max_steps: int = 6,
    *,
    max_writes: int = 2,
    max_seconds: float = 60.0,
    principal: str = "agent",
    cancel: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> AgentRun:
    """Drive `policy(state) -> Action | None` through `runtime` until `verify(state)` holds.

    Each step: 1. verified -> completed; 2. cancel() -> cancelled; 3. steps, time and writes are
    budgets; 4. the policy picks an Action (None: unverified); 5. the tool is dispatched under an
    operation_id derived from the normalized arguments, the result reduced; 6. an unknown outcome
    stops the run. An action dispatch will reject (no such tool, bad arguments) is stored nowhere
    and labelled rejected_<step>; its rejection lands in state.results for the policy to act on.
    Example: run_agent(policy, runtime, State(), verify=lambda s: bool(s.results)).status
    """
    required_id(principal, "principal", "say who acts, e.g. run_agent(..., principal='alice')")
    state, trace, started, steps, writes = initial_state or State(), Trace(clock), clock(), 0, 0

    def stop(status, message=""):
        assert status in STOP_REASONS, status  # a new reason joins the vocabulary first
        trace.stop(steps, status, message)
        return AgentRun(status, state, steps, writes, trace, message)

    while True:
        halt = _halt(
            state, verify, cancel, steps, max_steps, lambda: clock() - started, max_seconds
        )
        if halt:
            status, message, event = halt
            state = reduce(state, event) if event else state
            return stop(status, message)
        action = policy(state)
        if action is None:
            return stop("unverified", "the policy has no next action, but verify() is still false")
        if not isinstance(action, Action):
            raise UserError(
                f"the policy returned a {type(action).__name__} — return an "
                "Action(tool, arguments, scope) or None"
            )
        write = runtime.risk(action.tool) not in (None, "low")
        if write and writes >= max_writes:
            return stop("budget_exhausted", f"writes: {writes} of {max_writes} used")
        op, arguments = _operation(runtime, action, principal, steps)
        state = reduce(state, ToolRequested(op, action.tool, arguments))
        steps += 1
        try:
            result = runtime.dispatch(action.tool, arguments, op)
        except PermissionDenied as exc:
            state = reduce(state, ToolFailed(op, "permission_denied", str(exc)))
            return stop("permission_denied", str(exc))
        writes += write and result["status"] != "rejected"  # a rejected call wrote nothing
        line = _trace_line(action.tool, arguments, result)
        trace.add("tool", steps, line, operation_id=op, result=result)
        state = reduce(state, event_for(result))


def _halt(state, verify, cancel, steps, max_steps, elapsed, max_seconds):
    """Why the run stops before its next step: (status, message, event to reduce), else None."""
    if state.phase == "needs_reconcile":
        unknown = f"{state.pending}: outcome unknown — check it, then reconcile"
        return "needs_reconcile", unknown, None
    if verify is not None and verify(state):
        return "completed", "", GoalVerified()
    if cancel is not None and cancel():
        return "cancelled", "", Cancelled("cancel requested")
    if steps >= max_steps:
        return "step_limit", f"{steps} of {max_steps} steps used", None
    if elapsed() >= max_seconds:
        return "budget_exhausted", f"time: {max_seconds} s used", None
    return None


def _operation(runtime, action, principal, steps):
    """(operation_id, arguments) for the action; rejected_<step> when dispatch will reject it."""
    rejected = f"rejected_{steps + 1}", action.arguments  # no id from what may not be text
    if runtime.risk(action.tool) is None:
        return rejected
    try:
        normalized = runtime.arguments_for(action.tool, action.arguments)
    except ArgumentError:
        return rejected
    return operation_id(principal, action.tool, normalized, action.scope), normalized


def _trace_line(tool, arguments, result):
    """The trace's line for one dispatch: the call as given, its status, whether replayed."""
    try:
        given = canonical(arguments)
    except (ArgumentError, TypeError, ValueError):  # not JSON: show the text, escaped
        given = printable(arguments)
    replayed = " (replayed)" if result.get("replayed") else ""
    return f"{printable(tool)}({given}) -> {result['status']}{replayed}"
