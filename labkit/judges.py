"""LLM as judge: a written rubric, a model that grades with it, and how to measure what goes wrong.

Built in 10_evals. `grade` asks a model to grade one answer against a reference with RUBRIC and
reads its "VERDICT: PASS|FAIL"; `prefer` asks which of two answers is better (PAIR_RUBRIC), with
the answers shown in a given order. The judge is any labkit model: offline a ScriptedModel whose
verdicts are written down, live a real one. Agreement with people is labkit.stats.cohen_kappa;
`position_bias` and `verbosity_bias` read the preferences of pairs asked in both orders.
Left out, and what production uses: judge ensembles and calibration, fine-tuned judges
(Prometheus), the graders of eval frameworks (OpenAI Evals, Inspect).
"""

import re
from dataclasses import dataclass

from .errors import ServiceError, UserError
from .failures import explain
from .models import Model, user

RUBRIC = """You grade an answer to a question against a reference answer.
PASS when the answer states the same fact as the reference: the same number (a unit or thousands
separators may be added; rounded only as the question asks), the same name, or the same items in
the same order.
FAIL when it states another fact, adds a wrong one, hedges between answers, or leaves part out.
Ignore style, length and politeness. Write one line of reasoning, then VERDICT: PASS or
VERDICT: FAIL."""
PAIR_RUBRIC = """Two answers to one question follow, with the reference answer. Which answers the
question better, judged against the reference? Correctness first; never prefer an answer for being
longer, or for coming first. Write one line of reasoning, then CHOICE: 1, CHOICE: 2 or
CHOICE: tie."""


@dataclass(frozen=True)
class Verdict:
    label: str  # "pass", "fail", or "none": no verdict that could be read
    text: str  # what the judge said


def judge_prompt(item: dict, rubric: str = RUBRIC) -> str:
    """The judge's whole prompt for one answer: the rubric, the question, reference and answer.

    Example: judge_prompt({"question": "2+2?", "reference": "4", "answer": "four"})
    """
    return (
        f"{rubric}\n\nQuestion: {item['question']}\nReference answer: {item['reference']}\n"
        f"Answer to grade: {item['answer']}"
    )


def parse_verdict(text: str) -> str:
    """The last "VERDICT: PASS" or "VERDICT: FAIL" in a judge's reply, else "none".

    Example: parse_verdict("Same number, unit added.\\nVERDICT: PASS")  ->  "pass"
    """
    found = re.findall(r"VERDICT:\s*\**\s*(PASS|FAIL)\b", text, re.IGNORECASE)
    return found[-1].lower() if found else "none"


def grade(model: Model, item: dict, rubric: str = RUBRIC) -> Verdict:
    """Ask `model` to grade one answer; a reply without a readable verdict is "none".

    Example: grade(ScriptedModel([say("VERDICT: PASS")]), item).label  ->  "pass"
    """
    try:
        text = model.respond([user(judge_prompt(item, rubric))]).text
    except ServiceError as exc:  # a judge that failed gave no verdict; the run goes on
        return Verdict("none", explain(exc))
    return Verdict(parse_verdict(text), text)


# ---------------------------------------------------------------- pairs, in both orders


def pair_prompt(pair: dict, order: str = "ab") -> str:
    """The prompt comparing a pair's answers "a" and "b", shown in `order` ("ab" or "ba").

    Example: pair_prompt(pair, "ba")   # pair["b"] is shown as Answer 1
    """
    first, second = (pair[order[0]], pair[order[1]])
    return (
        f"{PAIR_RUBRIC}\n\nQuestion: {pair['question']}\nReference answer: {pair['reference']}\n"
        f"Answer 1: {first}\nAnswer 2: {second}"
    )


def prefer(model: Model, pair: dict, order: str = "ab") -> str:
    """Which answer of the pair the judge prefers: "a", "b", "tie", or "none" (no readable choice).

    Example: prefer(ScriptedModel([say("CHOICE: 2")]), pair, "ba")  ->  "a"
    """
    try:
        text = model.respond([user(pair_prompt(pair, order))]).text
    except ServiceError:
        return "none"
    found = re.findall(r"CHOICE:\s*\**\s*(1|2|tie)\b", text, re.IGNORECASE)
    if not found:
        return "none"
    choice = found[-1].lower()
    return "tie" if choice == "tie" else order[int(choice) - 1]


@dataclass(frozen=True)
class Preference:
    pair: str  # the pair's id
    shown_ab: str  # the answer preferred when "a" was shown first
    shown_ba: str  # ... when "b" was shown first

    @property
    def consistent(self) -> bool:
        """The same answer (or a tie) in both orders."""
        return self.shown_ab == self.shown_ba != "none"

    @property
    def position(self) -> str | None:
        """ "first" or "second" when the judge followed the position instead of the answer."""
        return {("a", "b"): "first", ("b", "a"): "second"}.get((self.shown_ab, self.shown_ba))


def ask_both_orders(model: Model, pairs: list[dict]) -> list[Preference]:
    """Every pair asked twice, a first then b first: [Preference, ...] in pair order.

    Example: [p.consistent for p in ask_both_orders(judge, pairs)]
    """
    return [Preference(p["id"], prefer(model, p, "ab"), prefer(model, p, "ba")) for p in pairs]


def position_bias(preferences: list) -> dict:
    """How often the judge's choice follows the order instead of the answers.

    Example: position_bias(ask_both_orders(judge, pairs))["consistent"]  ->  0.8
    """
    n = len(preferences)
    if n == 0:
        raise UserError("position_bias needs at least one Preference — pass ask_both_orders(...)")
    positions = [p.position for p in preferences]
    return {
        "pairs": n,
        "consistent": sum(p.consistent for p in preferences) / n,
        "first_both_times": positions.count("first") / n,
        "second_both_times": positions.count("second") / n,
    }


def verbosity_bias(preferences: list, pairs: list) -> float:
    """The share of pairs whose answers people judged equal where the judge preferred the longer
    answer in both orders (0 for a judge without the bias). A pair of equally long answers has no
    longer one, so it is left out.

    Example: verbosity_bias(prefs, [p for p in pairs if p["kind"] == "verbosity"])  ->  0.75
    """
    ties = {
        p["id"]: ("a" if len(p["a"]) > len(p["b"]) else "b")
        for p in pairs
        if p["human"] == "tie" and len(p["a"]) != len(p["b"])
    }
    chosen = [p for p in preferences if p.pair in ties]
    if not chosen:
        return 0.0
    return sum(p.consistent and p.shown_ab == ties[p.pair] for p in chosen) / len(chosen)
