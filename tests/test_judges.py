"""labkit.judges: a model grades with a written rubric; agreement with human labels; position and
verbosity bias from pairs asked in both orders. A scripted judge is a ScriptedModel whose verdicts
are written down; the same functions take a live model."""

import pytest

from labkit import ScriptedModel, ServiceError, say
from labkit.errors import UserError
from labkit.judges import (
    RUBRIC,
    Preference,
    ask_both_orders,
    grade,
    pair_prompt,
    parse_verdict,
    position_bias,
    prefer,
    verbosity_bias,
)
from labkit.labs import load_judge_labels
from labkit.stats import cohen_kappa

LABELS = load_judge_labels()
ITEM = {"question": "2 + 2?", "reference": "4", "answer": "four"}
PAIR = {"id": "x", "question": "2 + 2?", "reference": "4", "a": "4", "b": "5", "human": "a"}


@pytest.mark.parametrize(
    "text, label",
    [
        ("Same number.\nVERDICT: PASS", "pass"),
        ("verdict: fail", "fail"),
        ("VERDICT: **PASS**", "pass"),
        ("At first VERDICT: PASS, but no.\nVERDICT: FAIL", "fail"),  # the last one counts
        ("It looks right to me.", "none"),
        ("VERDICT: maybe", "none"),
        ("", "none"),
    ],
)
def test_parse_verdict(text, label):
    assert parse_verdict(text) == label


def test_the_judge_is_shown_the_rubric_the_question_the_reference_and_the_answer():
    judge = ScriptedModel([say("A number written as a word.\nVERDICT: PASS")])
    verdict = grade(judge, ITEM)
    assert verdict.label == "pass" and verdict.text.startswith("A number")
    shown = judge.seen[0].messages[0].content
    assert shown.startswith(RUBRIC) and shown.endswith("Reference answer: 4\nAnswer to grade: four")


class Down:
    def respond(self, messages, tools=(), max_output_tokens=None):
        raise ServiceError("HTTP 503 from the judge's server", 503)


def test_a_judge_whose_service_fails_gives_no_verdict_and_the_run_goes_on():
    assert grade(Down(), ITEM).label == "none"
    assert prefer(Down(), PAIR) == "none"


@pytest.mark.parametrize(
    "said, order, chosen",
    [
        ("CHOICE: 1", "ab", "a"),
        ("CHOICE: 1", "ba", "b"),  # position 1 holds b when b is shown first
        ("CHOICE: 2", "ba", "a"),
        ("choice: tie", "ab", "tie"),
        ("Answer 1 is better.", "ab", "none"),
    ],
)
def test_prefer_maps_the_position_back_to_the_answer(said, order, chosen):
    judge = ScriptedModel([say(said)])
    assert prefer(judge, PAIR, order) == chosen
    shown = judge.seen[0].messages[0].content
    first = PAIR[order[0]]
    assert f"Answer 1: {first}\n" in shown and shown == pair_prompt(PAIR, order)


@pytest.mark.parametrize(
    "ab, ba, consistent, position",
    [
        ("a", "a", True, None),
        ("tie", "tie", True, None),
        ("a", "b", False, "first"),  # whatever came first
        ("b", "a", False, "second"),
        ("none", "none", False, None),
        ("a", "tie", False, None),
    ],
)
def test_a_preference_asked_in_both_orders(ab, ba, consistent, position):
    p = Preference("x", ab, ba)
    assert (p.consistent, p.position) == (consistent, position)


def test_position_bias_counts_choices_that_followed_the_order():
    judge = ScriptedModel([say(f"CHOICE: {c}") for c in "1 2 1 1 2 2 2 1".split()])
    prefs = ask_both_orders(judge, [{**PAIR, "id": f"p{i}"} for i in range(4)])
    assert [(p.shown_ab, p.shown_ba) for p in prefs] == [
        ("a", "a"),
        ("a", "b"),
        ("b", "a"),
        ("b", "b"),
    ]
    assert position_bias(prefs) == {
        "pairs": 4,
        "consistent": 0.5,
        "first_both_times": 0.25,
        "second_both_times": 0.25,
    }


def test_verbosity_bias_is_preferring_the_longer_of_two_equal_answers_in_both_orders():
    pairs = [p for p in LABELS["pairs"] if p["kind"] == "verbosity"]
    longer = [("b", "b"), ("b", "b"), ("a", "b"), ("tie", "tie")]  # b is the padded answer
    prefs = [Preference(p["id"], *choice) for p, choice in zip(pairs, longer, strict=True)]
    assert verbosity_bias(prefs, pairs) == 0.5
    assert verbosity_bias([Preference(p["id"], "tie", "tie") for p in pairs], pairs) == 0.0


def test_position_bias_of_no_preferences_says_what_to_pass():
    with pytest.raises(UserError, match="at least one Preference"):
        position_bias([])


def test_an_equally_long_pair_has_no_longer_answer_to_prefer():
    """A judge that always picks b is no verbose judge when a and b are equally long."""
    pairs = [{"id": f"e{i}", "a": "yes.", "b": "no..", "human": "tie"} for i in range(3)]
    pairs.append({"id": "long", "a": "4", "b": "4, which is the sum", "human": "tie"})
    always_b = [Preference(p["id"], "b", "b") for p in pairs]
    assert verbosity_bias(always_b, pairs) == 1.0  # only the one pair with a longer answer counts
    assert verbosity_bias(always_b[:3], pairs[:3]) == 0.0


def test_a_judge_that_gives_no_verdict_disagrees_with_people():
    """Agreement is Cohen's kappa (labkit.stats), where "none" is a label of its own."""
    human = [item["human"] for item in LABELS["items"]]
    silent = ["none"] * 4 + human[4:]
    assert cohen_kappa(human, human) == 1.0 > cohen_kappa(silent, human) > 0


def test_the_human_labels_cover_both_verdicts_and_both_biases():
    items, pairs = LABELS["items"], LABELS["pairs"]
    assert len(items) >= 20 and {i["human"] for i in items} == {"pass", "fail"}
    assert {p["kind"] for p in pairs} == {"position", "verbosity"}
    for p in pairs:
        if p["kind"] == "verbosity":  # one answer beside itself, padded: equal for a person
            assert p["b"].startswith(p["a"].rstrip(".")) and p["human"] == "tie"
        else:
            assert p["human"] in ("a", "b")
