"""tests/fuzz_edges.py at a small scale: no generated bad input crashes or leaks. The harness is
a grader too: with a defence taken away it must report the leak (python tests/fuzz_edges.py
--scale 5 runs the large budget)."""

import random

import fuzz_edges
import pytest
from fuzz_edges import Tally

from labkit import UserError


def test_a_small_scale_of_every_generator_finds_no_crash_and_no_leak():
    tally = fuzz_edges.fuzz(scale=0.1)
    assert tally.inputs > 250
    assert (dict(tally.crashes), dict(tally.leaks)) == ({}, {}), fuzz_edges.report(tally)


def test_the_tally_counts_any_exception_but_a_labkit_error_as_a_crash():
    tally = Tally()
    tally.run("lookup", lambda: {}["missing"])
    tally.run("refused", lambda: (_ for _ in ()).throw(UserError("one clear line")))
    assert dict(tally.crashes) == {"lookup:KeyError": 1}


TAKEN_AWAY = {  # a defence replaced by nothing -> the leak the harness must then report
    "hidden_text_passed_to_the_model": {
        "labkit.mcp_trust.kinds": lambda text: [],
        "labkit.mcp_trust.strip": lambda value: value,
        "labkit.mcp.kinds": lambda text: [],
        "labkit.mcp.strip": lambda value: value,
    },
    "hidden_text_shown_raw_for_approval": {"labkit.mcp.shown": lambda text: text},
    "look_alike_names_offered_side_by_side": {
        "labkit.mcp._look_alikes": lambda listing: {},
        "labkit.tools.look_alike": lambda name: name,
    },
}


@pytest.mark.parametrize("leak", TAKEN_AWAY)
def test_with_a_defence_taken_away_the_harness_reports_its_leak(monkeypatch, leak):
    for target, replacement in TAKEN_AWAY[leak].items():
        monkeypatch.setattr(target, replacement)
    tally = Tally()
    fuzz_edges.fuzz_mcp(tally, random.Random(1), 0, 20, 0, 20)
    assert leak in tally.leaks


def test_without_the_environment_scrub_the_harness_finds_the_token_in_the_cassette(
    monkeypatch, tmp_path
):
    monkeypatch.setattr("labkit.cassettes.secrets_from_env", lambda: [])
    monkeypatch.setattr("labkit.guardrails.secrets_from_env", lambda environ=None: [])
    tally = Tally()
    fuzz_edges.fuzz_cassette_secrets(tally, random.Random(3), 6, tmp_path)
    assert "cassette_keeps_env_token" in tally.leaks
