"""labkit.coding, labkit.patches and labkit.swe without running a test suite: every permission
mode and rule order, apply_patch on good, stale and malicious patches, undo, SWE-bench's rule."""

import json

import pytest

from labkit import patches
from labkit.coding import MODES, coding_tools, decide
from labkit.errors import ToolError, UserError
from labkit.models import ToolCall
from labkit.sandbox import Workspace
from labkit.swe import REPOS, load_tasks, resolved
from labkit.tools import ToolRegistry, execute

EDIT = {"patch": None, "path": "pantry/units.py", "search": "a", "replace": "b"}
PUSH = {"command": "git push origin main"}
TESTS = {"command": "python -m pytest -q"}
OTHER = {"command": "make deploy"}


@pytest.mark.parametrize(
    "name, arguments, mode, verdict",
    [
        ("read_file", {"path": "x"}, "plan", "allow"),
        ("apply_patch", EDIT, "default", "ask"),
        ("apply_patch", EDIT, "plan", "deny"),
        ("apply_patch", EDIT, "acceptEdits", "allow"),
        ("apply_patch", EDIT, "dontAsk", "deny"),
        ("apply_patch", EDIT, "bypass", "allow"),
        ("run", TESTS, "default", "allow"),
        ("run", TESTS, "plan", "deny"),
        ("run", OTHER, "acceptEdits", "ask"),
        ("run", OTHER, "dontAsk", "deny"),
        ("run", PUSH, "bypass", "deny"),  # a deny rule wins over every mode
        ("run", {"command": "git commit -m x"}, "bypass", "allow"),
        ("run", {"command": "git commit -m x"}, "acceptEdits", "ask"),  # an ask rule
        ("apply_patch", {**EDIT, "path": "tests/test_units.py"}, "bypass", "deny"),
    ],
)
def test_decide(name, arguments, mode, verdict):
    assert decide(name, arguments, mode)[0] == verdict


def test_every_mode_is_covered_and_a_bad_one_refused():
    assert set(MODES) == {"default", "plan", "acceptEdits", "dontAsk", "bypass"}
    with pytest.raises(UserError, match="not one of"):
        decide("run", TESTS, "yolo")


@pytest.fixture(scope="module")
def ws():
    with Workspace(REPOS / "pantry", "rlimits") as w:
        yield w


def test_good_patch_applies_and_undoes(ws):
    task = load_tasks()[0]
    edits = patches.Edits()
    before = (ws.path / "pantry/units.py").read_text()
    assert patches.apply_diff(ws, task["patch"], edits) == ["pantry/units.py"]
    assert "amount * 1000" in (ws.path / "pantry/units.py").read_text()
    edits.undo(ws)
    assert (ws.path / "pantry/units.py").read_text() == before


def test_stale_patch_changes_nothing_and_says_what_to_do(ws):
    stale = load_tasks()[0]["patch"].replace("amount * 100\n", "amount * 99\n", 1)
    before = (ws.path / "pantry/units.py").read_text()
    with pytest.raises(ToolError, match="does not apply.*read_file"):
        patches.apply_diff(ws, stale)
    assert (ws.path / "pantry/units.py").read_text() == before


def test_patch_outside_the_workspace_refused(ws):
    evil = "--- /dev/null\n+++ b/../../evil.py\n@@ -0,0 +1 @@\n+x = 1\n"
    with pytest.raises(ToolError, match="outside the workspace") as refused:
        patches.apply_diff(ws, evil)
    assert refused.value.kind == "outside_workspace"
    assert not (ws.path.parent.parent / "evil.py").exists()


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("read_file", {"path": "../../etc/passwd", "start": None, "end": None}),
        ("list_files", {"path": ".."}),
        ("grep", {"pattern": "x", "path": "/etc"}),
        ("apply_patch", {**EDIT, "patch": "--- /dev/null\n+++ b/../x.py\n@@ -0,0 +1 @@\n+x = 1\n"}),
    ],
)
def test_a_path_out_is_a_result_the_model_can_act_on_not_a_crash(ws, name, arguments):
    registry = ToolRegistry(coding_tools(ws, patches.Edits()))
    result = execute(ToolCall("c1", name, json.dumps(arguments)), registry)
    assert result["ok"] is False and result["error"] == "outside_workspace", result
    assert "relative to the repository root" in result["message"]


def test_search_replace_must_match_once(ws):
    with pytest.raises(ToolError, match="does not occur"):
        patches.replace(ws, "pantry/units.py", "no such text", "x")
    with pytest.raises(ToolError, match="occurs"):
        patches.replace(ws, "pantry/units.py", "amount", "x")


@pytest.mark.parametrize(
    "results, expected",
    [
        ({"a": "passed", "b": "passed"}, True),
        ({"a": "failed", "b": "passed"}, False),
        ({"a": "passed", "b": "failed"}, False),
        ({"b": "passed"}, False),  # a missing test counts as failing
        ({"a": "error", "b": "passed"}, False),
        ({"a": "passed", "b": "passed", "c": "failed"}, True),  # unlisted tests do not count
    ],
)
def test_resolved_is_swe_benchs_rule(results, expected):
    assert resolved(results, ["a"], ["b"]) is expected


def test_the_task_set_has_every_kind():
    tasks = load_tasks()
    assert len(tasks) >= 8
    assert {"bug fix", "feature", "refactor", "trap", "refuse"} <= {t["kind"] for t in tasks}
