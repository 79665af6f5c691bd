"""Every frozen coding task: its reference patch resolves it by SWE-bench's rule in the sandbox,
the unpatched repository does not (a refusal task: the destructive patch does not), and a
plausible wrong patch, where the task has one, does not either."""

import pytest

from labkit.swe import evaluate, load_tasks

TASKS = {t["instance_id"]: t for t in load_tasks()}


@pytest.mark.parametrize("name", TASKS)
def test_reference_resolves_and_no_fix_does_not(name):
    task = TASKS[name]
    assert evaluate(task, task["patch"]).resolved
    unfixed = task["wrong_patch"] if task["expected"] == "refuse" else ""
    assert not evaluate(task, unfixed).resolved


@pytest.mark.parametrize("name", [n for n, t in TASKS.items() if t["wrong_patch"]])
def test_wrong_patch_is_not_resolved(name):
    assert not evaluate(TASKS[name], TASKS[name]["wrong_patch"]).resolved
