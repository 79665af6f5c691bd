"""labkit.coding_loop and the agent of labkit.coding: read-only calls side by side and writes
alone, in order; the Explore sub-agent that can only read; the repository map, the files read and
compaction; plan mode as a flow; solve against a live server (the loopback fake)."""

import threading

import pytest

from labkit import loop
from labkit.coding import READ_ONLY, SYSTEM, CodingGuard, decide, solve
from labkit.coding_loop import CodingContext, batches, definitions, repo_map, run_agent
from labkit.context import is_summary, summarizer
from labkit.labs.coding import patch, read
from labkit.loop import Decision
from labkit.models import ScriptedModel, ToolCall, call, say, turn
from labkit.sandbox import Workspace
from labkit.swe import REPOS, load_tasks
from labkit.tools import tool

TASK = load_tasks()[0]  # pantry-1: a litre is 100 ml in to_base
WAIT = 5  # seconds a read waits for its partner before the test fails (never reached when right)


@pytest.fixture
def ws():
    with Workspace(REPOS / "pantry", "rlimits") as w:
        yield w


# ---------------------------------------------------------------- side by side, then one at a time


class Recorder:
    """Tools named like the coding agent's that log when they start and end, and what ran then."""

    def __init__(self):
        self.log, self.active, self.lock = [], set(), threading.Lock()
        self.met = threading.Barrier(2, timeout=WAIT)  # two reads must be running at once
        self.b_done = threading.Event()

    def enter(self, name):
        with self.lock:
            self.log.append(("start", name, frozenset(self.active)))
            self.active.add(name)

    def leave(self, name):
        with self.lock:
            self.active.discard(name)
            self.log.append(("end", name, frozenset(self.active)))

    def tools(self):
        @tool
        def read_file(path: str) -> str:
            """Read a file.

            Args:
                path: the file
            """
            self.enter(path)
            self.met.wait()  # breaks (an error result) unless a partner read runs meanwhile
            if path == "a" and not self.b_done.wait(WAIT):  # a ends after b: order is not timing
                raise RuntimeError("b never finished while a ran")
            self.leave(path)
            return f"text of {path}"

        @tool
        def grep(path: str) -> str:
            """Search.

            Args:
                path: where
            """
            self.enter(path)
            self.met.wait()
            self.leave(path)
            self.b_done.set()
            return f"hits in {path}"

        @tool(risk="medium")
        def apply_patch(path: str) -> str:
            """Write.

            Args:
                path: the file
            """
            self.enter(path)
            self.leave(path)
            return f"patched {path}"

        return [read_file, grep, apply_patch]


def test_reads_run_side_by_side_writes_alone_results_in_call_order():
    rec = Recorder()
    paths = ["a", "b", "c", "d", "e"]
    names = ["read_file", "grep", "apply_patch", "grep", "read_file"]
    first = turn(*(call(n, path=p) for n, p in zip(names, paths, strict=True)))
    model = ScriptedModel([first, say("done")])
    result = run_agent("go", model, rec.tools(), loop.Guard(), SYSTEM)
    assert result.status == "completed"
    outputs = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in outputs] == [
        '{"ok": true, "data": "text of a"}',  # a finished after b, and still comes first
        '{"ok": true, "data": "hits in b"}',
        '{"ok": true, "data": "patched c"}',
        '{"ok": true, "data": "hits in d"}',
        '{"ok": true, "data": "text of e"}',
    ]
    assert [m.tool_call_id for m in outputs] == [c.id for c in result.messages[2].tool_calls]
    starts = {
        name: (i, running) for i, (kind, name, running) in enumerate(rec.log) if kind == "start"
    }
    ends = {name: i for i, (kind, name, _) in enumerate(rec.log) if kind == "end"}
    assert starts["c"][1] == frozenset()  # the write overlaps nothing ...
    assert max(ends["a"], ends["b"]) < starts["c"][0] < ends["c"] < starts["d"][0]  # ... in order


def test_batches_keep_order_and_put_each_write_alone():
    calls = [ToolCall(str(i), n, "{}") for i, n in enumerate(["read_file", "grep", "run", "run"])]
    calls.append(ToolCall("4", "list_files", "{}"))
    assert [[c.id for c in b] for b in batches(calls)] == [["0", "1"], ["2"], ["3"], ["4"]]


class RefuseB(loop.Guard):
    def before_tool(self, run, call, tool):
        if '"b"' in call.arguments:
            return Decision("refuse", "not_permitted", "no b")
        return None


def test_a_refused_read_is_answered_in_its_place_and_the_rest_still_run():
    rec = Recorder()
    rec.b_done.set()  # b is refused, so a does not wait for it
    step = turn(call("read_file", path="a"), call("grep", path="b"), call("read_file", path="e"))
    rec.met = threading.Barrier(2, timeout=WAIT)  # a and e run together
    result = run_agent("go", ScriptedModel([step, say("ok")]), rec.tools(), RefuseB(), SYSTEM)
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents[0] == '{"ok": true, "data": "text of a"}'
    assert '"error": "not_permitted"' in contents[1]
    assert contents[2] == '{"ok": true, "data": "text of e"}'


def test_the_call_limit_holds_inside_a_group_and_the_rest_are_answered_not_run():
    rec = Recorder()
    rec.b_done.set()
    step = turn(*(call("read_file", path=p) for p in "wxyz"))
    result = run_agent("go", ScriptedModel([step]), rec.tools(), loop.Guard(), SYSTEM, max_calls=2)
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert result.status == "tool_limit" and result.tool_calls == 2
    assert [c.startswith('{"ok": true') for c in contents] == [True, True, False, False]


# ---------------------------------------------------------------- the Explore sub-agent


def test_explore_reads_for_the_main_agent_and_cannot_write(ws):
    before = (ws.path / "pantry/units.py").read_text()
    sub = ScriptedModel(
        [
            call("grep", pattern="def to_base", path="pantry"),
            patch(TASK["patch"]),  # a write, asked for by the sub-agent: it has no such tool
            say("to_base is in pantry/units.py; a litre is 100 there."),
        ]
    )
    main = ScriptedModel([call("explore", task="Where is to_base?"), say("It is in units.py.")])
    done = solve(TASK["problem_statement"], main, ws, CodingGuard("plan"), explore=sub)
    assert sub.seen[0].tools == ["list_files", "read_file", "grep"]
    sub_outputs = [m.content for m in sub.seen[-1].messages if m.role == "tool"]
    assert "pantry/units.py:" in sub_outputs[0] and '"ok": false' in sub_outputs[1]
    report = next(m.content for m in done.result.messages if m.role == "tool")
    assert '"agent": "explore"' in report and "a litre is 100 there" in report
    assert (ws.path / "pantry/units.py").read_text() == before and done.patch == ""
    assert done.result.status == "completed"


def test_explore_is_read_only_to_the_permission_layer():
    assert "explore" in READ_ONLY
    assert decide("explore", {"task": "find it"}, "plan")[0] == "allow"


# ---------------------------------------------------------------- 08's context


def test_the_repository_map_lists_paths_and_top_level_definitions(ws):
    shown = repo_map(ws)
    assert "pantry/units.py: " in shown and "to_base" in shown
    assert "tests/test_units.py: " in shown and " tests" in shown.split("tests/test_units.py: ")[1]
    assert ".home" not in shown and ".git" not in shown
    assert definitions("X = 1\ny = 2\ndef f(): pass\nclass K: pass\n") == ["X", "f", "K"]


def test_the_model_reads_the_map_and_the_files_read_in_its_system_message(ws):
    model = ScriptedModel([read("pantry/units.py", 14, 28), say("It is on line 20.")])
    done = solve(TASK["problem_statement"], model, ws)
    first, second = (s.messages[0].content for s in model.seen)
    assert "pantry/units.py: " in first and "files read so far: none yet" in first
    assert "pantry/units.py lines 14-28" in second
    assert done.context.read == {"pantry/units.py": ["14-28"]}


def long_script(n):
    return [read("pantry/units.py", i, i + 12) for i in range(1, n + 1)] + [say("done")]


@pytest.mark.parametrize("threshold, compacted", [(1_000, True), (100_000, False)])
def test_a_long_run_is_compacted_with_the_task_and_the_files_read_kept(ws, threshold, compacted):
    hooked = []
    summary = ScriptedModel([say("Read units.py in parts.")] * 10)
    context = CodingContext(
        ws, SYSTEM, threshold, 2, summarizer(summary), before_compact=[hooked.append]
    )
    model = ScriptedModel(long_script(8))
    done = solve(TASK["problem_statement"], model, ws, context=context)
    last = model.seen[-1].messages
    assert last[1].content == TASK["problem_statement"]  # the task stays, first
    assert bool(context.compactions) is compacted and bool(hooked) is compacted
    assert is_summary(last[2]) is compacted
    assert (len(last) < 2 + 2 * 8) is compacted  # fewer messages than the whole history
    assert "pantry/units.py lines 1-13" in last[0].content  # read in a turn that is gone
    assert done.result.status == "completed"


def test_the_guards_before_compact_hooks_are_the_default_contexts(ws):
    from labkit.coding import Hooks

    def hook(run):
        return None

    guard = CodingGuard("acceptEdits", hooks=Hooks(before_compact=[hook]))
    done = solve(TASK["problem_statement"], ScriptedModel([say("Nothing to do.")]), ws, guard)
    assert done.context.before_compact == [hook]  # called before compacting: the test above


# ---------------------------------------------------------------- plan mode, as a flow


def plan_script():
    return [
        read("pantry/units.py", 14, 28),
        patch(TASK["patch"]),  # too early: plan mode refuses every write
        say("Plan: in to_base, a litre becomes amount * 1000."),
        patch(TASK["patch"]),
        say("Done: a litre is 1000 ml."),
    ]


def test_plan_mode_refuses_writes_until_the_plan_is_approved(ws):
    asked = []
    guard = CodingGuard("plan", approve_plan=lambda plan: asked.append(plan) or "acceptEdits")
    done = solve(TASK["problem_statement"], ScriptedModel(plan_script()), ws, guard)
    verdicts = [(c.name, v) for c, v, _ in guard.log]
    assert verdicts == [("read_file", "allow"), ("apply_patch", "deny"), ("apply_patch", "allow")]
    assert asked == ["Plan: in to_base, a litre becomes amount * 1000."] == [done.plan]
    assert done.mode == "acceptEdits" and "+        return amount * 1000" in done.patch


@pytest.mark.parametrize("answer", ["no", None, "", "plan", "maybe later"])
def test_a_plan_not_approved_changes_nothing(ws, answer):
    model = ScriptedModel(plan_script())
    done = solve(
        TASK["problem_statement"], model, ws, CodingGuard("plan", approve_plan=lambda p: answer)
    )
    assert done.patch == "" and done.plan == "" and done.mode == "plan"
    assert model.position == 3  # it stopped at the plan


@pytest.mark.parametrize(
    "answer, mode",
    [("acceptEdits", "acceptEdits"), ("yes", "default"), ("Yes!", "default"), ("好", "default"),
     ("bypass", "bypass"), ("no", None), ("plan", None), (None, None), ("accept", None)],
)  # fmt: skip
def test_end_plan_switches_only_on_a_mode_or_an_explicit_yes(answer, mode):
    guard = CodingGuard("plan", approve_plan=lambda plan: answer)
    assert guard.end_plan("the plan") == mode
    assert guard.mode == (mode or "plan")


def test_without_approve_plan_plan_mode_stays_read_only(ws):
    done = solve(
        TASK["problem_statement"], ScriptedModel(plan_script()[:3]), ws, CodingGuard("plan")
    )
    assert done.patch == "" and done.mode == "plan" and done.result.status == "completed"


# ---------------------------------------------------------------- live: any server


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_solve_runs_against_a_live_server(ws, monkeypatch, api):
    """LABKIT_MODE=live against the loopback fake server: it calls the first tool it is offered
    (list_files), then answers; the agent's loop, tools and guard work with a real SDK model."""
    from labkit import connect

    from fake_server import FakeServer

    with FakeServer() as server:
        for name, value in {
            "LABKIT_ENV_FILE": "none",
            "LABKIT_MODE": "live",
            "LABKIT_BASE_URL": server.url,
            "LABKIT_API": api,
            "LABKIT_API_KEY": "sk-test-" + "0" * 24,
            "OPENAI_MODEL": "tiny-test-model",
        }.items():
            monkeypatch.setenv(name, value)
        done = solve(TASK["problem_statement"], connect(), ws, CodingGuard("default"))
        bodies = [r["body"] for r in server.requests]
    assert done.result.status == "completed" and done.turns == 2 and done.tool_calls == 1
    tools = [t.get("name") or t["function"]["name"] for t in bodies[0]["tools"]]
    assert tools == ["list_files", "read_file", "grep", "apply_patch", "run"]
    assert done.patch == "" and done.usage.source == "reported"


# ---------------------------------------------------------------- the table per agent version


def test_the_task_table_has_turns_calls_tokens_cost_and_patch_size():
    from labkit.coding import CodingRun
    from labkit.models import Usage
    from labkit.swe import TaskVerdict, table

    run = CodingRun(
        loop.RunResult(), 3, 2, Usage(1_000, 100, 1_100, "counted"), patch="+a\n-b\n+c\n"
    )
    rows = [(TASK, run, TaskVerdict(True)), (load_tasks()[1], run, TaskVerdict(False, ["t::x"]))]
    head, first, second, total = table(rows).splitlines()
    assert head.split() == [
        "task",
        "kind",
        "resolved",
        "turns",
        "calls",
        "tokens",
        "cost",
        "$",
        "patch",
    ]
    assert first.split() == [
        "pantry-1",
        "bug",
        "fix",
        "yes",
        "3",
        "2",
        "1100",
        "0.000450",
        "+2",
        "-1",
    ]
    assert second.split()[3] == "no"
    assert total.startswith("resolved 1/2; tokens counted by labkit; cost $0.000900, an ESTIMATE")
