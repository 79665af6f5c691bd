"""labkit.suite: the frozen task suite run per agent version, its trajectory table, baselines, and
the regression gate (in process, and as `python -m labkit[.]evals run` in a subprocess)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import ScriptedModel, UserError, call, say
from labkit.config import EVALS_DIR
from labkit.labs import load_suite
from labkit.suite import (
    EvalTask,
    Outcome,
    SuiteReport,
    Version,
    gate,
    load_baseline,
    run_suite,
    run_task,
    save_baseline,
    summary_table,
)
from labkit.toolbox import calculate, get_weather

ROOT = Path(__file__).resolve().parent.parent
SUITE = load_suite()
REPORTS = {name: SUITE.run(name) for name in SUITE.versions}
PLAIN = Version("plain", "Use a tool when it helps. End with FINAL ANSWER: and the answer.")


def task(script, answer="57.2", **kw):
    steps = {"plain": script}
    return EvalTask(
        "t", "Paris in Fahrenheit?", [get_weather, calculate], answer, scripts=steps, **kw
    )


# ---------------------------------------------------------------- one task


def test_success_is_a_completed_run_whose_final_answer_matches():
    script = [call("get_weather", city="Paris"), call("calculate", expression="14 * 9 / 5 + 32")]
    unit = task(script + [say("FINAL ANSWER: 57.2 (teaching data)")])
    outcome = run_task(unit, ScriptedModel(unit.scripts["plain"]), PLAIN)
    assert outcome.success is False and outcome.final == "57.2 (teaching data)"  # not a number
    good = run_suite([task(script + [say("It is 57.2 °F.\nFINAL ANSWER: 57.2")])], PLAIN)
    (o,) = good.outcomes
    assert (o.success, o.status, o.turns, o.tool_calls, o.tool_failures) == (
        True,
        "completed",
        3,
        2,
        0,
    )
    assert o.tokens > 0 and o.cost > 0 and o.seconds >= 0


def test_a_right_answer_after_a_limit_is_no_success():
    script = [call("get_weather", city="Paris")] * 2 + [say("FINAL ANSWER: 57.2")]
    (o,) = run_suite([task(script)], PLAIN).outcomes  # the same call twice: 05's guard stops it
    assert (o.success, o.status) == (False, "repeated_action")
    cities = [call("get_weather", city=c) for c in ("Paris", "Tokyo", "Cairo")]
    (o,) = run_suite([task(cities + script[-1:])], PLAIN, max_turns=2).outcomes
    assert (o.success, o.status) == (False, "turn_limit")


def test_a_task_that_must_cite_fails_without_a_citation():
    sources = {"handbook-units.md": "Kelvin = Celsius + 273.15."}
    answers = {"FINAL ANSWER: 273.15 [handbook-units.md]": True, "FINAL ANSWER: 273.15": False}
    for text, success in answers.items():
        cited = task([say(text)], "273.15", cite=True)
        assert run_suite([cited], PLAIN, sources=sources).outcomes[0].success is success, text


def test_a_version_without_a_script_is_named():
    with pytest.raises(UserError, match="no script for version 'v9'"):
        run_suite(SUITE.tasks, Version("v9", "..."))


def test_model_for_replaces_the_scripts_for_every_task():
    seen = []

    def model_for(t):
        seen.append(t.id)
        return ScriptedModel([say("FINAL ANSWER: no idea")])

    report = SUITE.run("v1", model_for)
    assert seen == [t.id for t in SUITE.tasks] and not any(report.successes())


def test_a_task_runs_under_a_tool_choice_and_its_outcome_lists_each_call_and_result():
    unit = task([call("get_weather", town="Paris"), call("get_weather", city="Paris"),
                 say("FINAL ANSWER: 57.2")])  # fmt: skip
    model = ScriptedModel(unit.scripts["plain"])
    outcome = run_task(unit, model, PLAIN, tool_choice="get_weather")
    assert [s.tool_choice for s in model.seen] == ["get_weather", "auto", "auto"]
    assert outcome.calls == (
        ("get_weather", '{"town": "Paris"}', "invalid_arguments"),
        ("get_weather", '{"city": "Paris"}', "ok"),
    )


def test_a_script_that_disobeys_the_tool_choice_is_a_script_bug():
    unit = task([say("FINAL ANSWER: 57.2")])
    with pytest.raises(UserError, match="disobeys tool_choice 'required'"):
        run_task(unit, ScriptedModel(unit.scripts["plain"]), PLAIN, tool_choice="required-first")


# ---------------------------------------------------------------- the frozen suite


def test_the_suite_tells_the_story_the_notebook_tells():
    """v1 is the baseline; v2 fixes formats and citations (and breaks one answer); v3 guesses."""
    success = {name: r.summary()["successes"] for name, r in REPORTS.items()}
    assert success == {"v1": 18, "v2": 21, "v3": 8} and len(SUITE.tasks) == 24
    failed = {name: [o.id for o in r.outcomes if not o.success] for name, r in REPORTS.items()}
    assert failed["v1"] == ["t02", "t08", "t12", "t16", "t20", "t24"]
    assert failed["v2"] == ["t12", "t20", "t22"]
    assert REPORTS["v3"].summary()["stops"] == {
        "completed": 21,
        "empty_output": 1,
        "repeated_action": 1,
        "turn_limit": 1,
    }
    tokens = {name: r.summary()["tokens"] for name, r in REPORTS.items()}
    assert tokens["v3"] < tokens["v1"] < tokens["v2"]  # guessing is cheap


def test_each_version_has_a_script_for_every_task():
    for t in SUITE.tasks:
        assert set(t.scripts) == set(SUITE.versions), t.id


def test_the_report_is_one_table_row_per_task_and_latency_last():
    lines = repr(REPORTS["v1"]).splitlines()
    assert len(lines) == 1 + 24 + 1
    assert all(line.endswith(" ms") for line in lines[1:])  # what tests/sanitize.cfg replaces
    table = summary_table(list(REPORTS.values())).splitlines()
    assert [line.split()[0] for line in table] == ["version", "v1", "v2", "v3"]
    assert "18/24 ( 75%)" in table[1]


@pytest.mark.parametrize(
    "path, problem",
    [
        ("no-such-suite", "no suite file 'no-such-suite' — give a suite file"),
        ("agent_suite.baseline", "agent_suite.baseline.json is not a suite: 'name' is missing"),
    ],
)
def test_load_suite_names_a_bad_file(path, problem):
    with pytest.raises(UserError, match=problem):
        load_suite(path)


def broken(change):
    """The agent suite's JSON with one change made to it."""
    data = json.loads((EVALS_DIR / "agent_suite.json").read_text(encoding="utf-8"))
    change(data)
    return data


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d.update(max_turns=True), "'max_turns' is missing or not int"),
        (lambda d: d.update(max_turns=0), "max_turns is 0; give 1 to 100"),
        (lambda d: d["versions"].update(v1={"about": "x"}), "version 'v1' has no system prompt"),
        (lambda d: d["versions"]["v1"].update(about=3), "version 'v1': about is not text"),
        (lambda d: d.update(current="v9"), "current version 'v9' is not among its versions"),
        (lambda d: d.update(tasks=[]), "'tasks' is missing or empty"),
        (lambda d: d["tasks"].append(dict(d["tasks"][0])), "appears twice"),
        (lambda d: d["tasks"][0].pop("answer"), "task 1: 'answer' is missing or not str"),
    ],
)
def test_load_suite_names_the_first_rule_a_suite_breaks(tmp_path, change, problem):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(broken(change)), encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(problem)):
        load_suite(path)


# ---------------------------------------------------------------- baselines and the gate


def test_a_baseline_round_trips(tmp_path):
    save_baseline(REPORTS["v1"], tmp_path / "base.json")
    baseline = load_baseline(tmp_path / "base.json")
    assert (
        baseline["version"] == "v1"
        and list(baseline["cases"].values()) == REPORTS["v1"].successes()
    )


def test_the_stored_baseline_is_v1():
    stored = load_baseline(EVALS_DIR / "agent_suite.baseline.json")
    assert stored["cases"] == {o.id: o.success for o in REPORTS["v1"].outcomes}


@pytest.mark.parametrize(
    "version, passed, regressed",
    [
        ("v2", True, ["t22"]),  # one case worse, four better: not significant
        ("v1", True, []),
        (
            "v3",
            False,
            ["t01", "t04", "t05", "t06", "t07", "t10", "t11", "t13", "t19", "t21", "t23"],
        ),
    ],
)
def test_the_gate_fails_only_a_significant_drop(version, passed, regressed, tmp_path):
    save_baseline(REPORTS["v1"], tmp_path / "base.json")
    result = gate(REPORTS[version], load_baseline(tmp_path / "base.json"))
    assert (result.passed, result.regressed) == (passed, regressed)
    assert result.message.splitlines()[-1].startswith("PASS" if passed else "FAIL")


def outcomes(successes):
    return SuiteReport(
        "r",
        [Outcome(f"c{i}", ok, "done", 1, 0, 0, 0, None, 0.0, "") for i, ok in enumerate(successes)],
    )


@pytest.mark.parametrize(
    "alpha, passed", [(0.03125, True), (0.031, True), (0.0313, False), (0.0312, True)]
)
def test_the_gate_message_is_true_at_the_boundary(alpha, passed):
    """6 worse, 0 better: McNemar p = 2 / 2**6 = 0.03125 exactly, the alpha of the first case."""
    baseline = {"version": "b", "cases": {f"c{i}": True for i in range(8)}}
    result = gate(outcomes([False] * 6 + [True] * 2), baseline, alpha)
    shown = result.message.splitlines()[-1]
    p, sign, limit = shown.split("p = ")[1].rstrip(")").split()
    assert result.passed == passed and result.comparison.p_value == 0.03125
    assert (float(p) >= float(limit) if sign == ">=" else float(p) < float(limit)) is True
    assert (sign == ">=") == passed


@pytest.mark.parametrize(
    "text, problem",
    [
        ("not json", "is not JSON"),
        ('{"cases": {"t01": "yes"}}', "is not a baseline"),
        ('{"version": "v1", "cases": {"t01": true}}', None),
    ],
)
def test_a_bad_baseline_is_refused_in_one_line(text, problem, tmp_path):
    path = tmp_path / "base.json"
    path.write_text(text)
    if problem:
        with pytest.raises(UserError, match=problem):
            load_baseline(path)
        return
    with pytest.raises(UserError, match="only in this run: \\['t02'"):
        gate(REPORTS["v1"], load_baseline(path))  # other cases than the suite's
    with pytest.raises(UserError, match="no baseline file"):
        load_baseline(tmp_path / "missing.json")


ENTRY_POINTS = {
    "python -m labkit evals": ["-m", "labkit", "evals"],
}


def gate_cli(*args, entry="python -m labkit evals"):
    done = subprocess.run(
        [sys.executable, *ENTRY_POINTS[entry], "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_the_gate_command_line_both_ways(entry, tmp_path):
    """What CI runs: the current version passes against the stored baseline (exit 0); the
    regressed one fails (exit 1) and says why."""
    baseline = str(EVALS_DIR / "agent_suite.baseline.json")
    code, out, err = gate_cli("agent_suite", "--baseline", baseline, entry=entry)
    assert (code, err) == (0, "") and out.splitlines()[-1].startswith("PASS"), out
    assert "version v2" in out.splitlines()[0]  # the suite's current version by default
    code, out, err = gate_cli("agent_suite", "--version", "v3", "--baseline", baseline, entry=entry)
    assert (code, err) == (1, "")
    assert "FAIL: success dropped significantly below the baseline (p = 0.006 < 0.05)" in out
    assert "got worse: t01, t04" in out


def test_the_gate_command_line_records_a_baseline_and_refuses_bad_input(tmp_path):
    code, out, _ = gate_cli("agent_suite", "--version", "v3", "--save", str(tmp_path / "b.json"))
    assert code == 0 and json.loads((tmp_path / "b.json").read_text())["version"] == "v3"
    code, out, _ = gate_cli("agent_suite", "--baseline", str(tmp_path / "b.json"))
    assert code == 0 and "success rose significantly" in out  # v2 against a v3 baseline
    for args, problem in [
        (["agent_suite", "--baseline", str(tmp_path / "none.json")], "no baseline file"),
        (["agent_suite", "--version", "v9"], "has no version 'v9'"),
        (["agent_suite", "--alpha", "5"], "not a significance level"),
        (["agent_suite", "--save", str(tmp_path / "no" / "b.json")], "check the path"),
    ]:
        code, out, err = gate_cli(*args)
        assert code == 2 and err.startswith("error: ") and problem in err, (args, err)
        assert "Traceback" not in err


def _suite(**changes):
    data = json.loads((EVALS_DIR / "agent_suite.json").read_text(encoding="utf-8"))
    data["tasks"] = data["tasks"][:1]
    return {**data, **changes}


MALFORMED = {
    "empty tasks": (_suite(tasks=[]), "'tasks' is missing or empty"),
    "a missing key": ({k: v for k, v in _suite().items() if k != "versions"}, "'versions' is"),
    "max_turns as text": (_suite(max_turns="4"), "'max_turns' is missing or not int"),
    "a task without an id": (
        _suite(tasks=[{k: v for k, v in _suite()["tasks"][0].items() if k != "id"}]),
        "task 1: 'id' is missing",
    ),
    "a step of the wrong type": (
        _suite(tasks=[{**_suite()["tasks"][0], "scripts": {"v1": [{"say": 3}]}}]),
        "its 'say' has the wrong type",
    ),
    "not an object": ([1, 2], "it is not a JSON object"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_suite_exits_2_with_one_line(case, tmp_path, capsys):
    from labkit.__main__ import evals_main

    data, problem = MALFORMED[case]
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert evals_main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert problem in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[" * 100_000 + "]" * 100_000, "it is nested too deep"),
        ('{"version": "v1", "cases": {}}', "is not a baseline"),
        ('{"version": 3, "cases": {"t01": true}}', "is not a baseline"),
        ("\udcff", "is not JSON"),
    ],
)
def test_a_malformed_baseline_exits_2_with_one_line(text, problem, tmp_path, capsys):
    from labkit.__main__ import evals_main

    path = tmp_path / "baseline.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert evals_main(["run", "agent_suite", "--baseline", str(path)]) == 2
    err = capsys.readouterr().err
    assert problem in err and len(err.splitlines()) == 1, err


def test_a_device_file_is_read_only_up_to_the_limit(monkeypatch, capsys):
    from labkit.__main__ import evals_main

    monkeypatch.setattr("labkit.suite.MAX_FILE_BYTES", 1_000)  # /dev/zero never ends
    monkeypatch.setattr("labkit.labs.evalsets.read_json.__defaults__", (1_000,))
    assert evals_main(["run", "/dev/zero"]) == 2
    assert "is over 1,000 bytes" in capsys.readouterr().err
