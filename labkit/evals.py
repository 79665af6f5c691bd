"""Scoring one output: tool calls matched the BFCL way, final answers scored the GAIA way.

Built in 10_evals (a suite and the gate: labkit.suite; numbers: labkit.stats; judges:
labkit.judges). `ast_match` reads BFCL's possible-answer and function-doc formats; `score_answer`
is GAIA's quasi-exact match (labkit also drops articles) plus 06's citation checks. `python -m
labkit.evals run SUITE --baseline FILE` is the regression gate's command line.
Left out, and what production uses: BFCL's Java/JavaScript rules, executable and multi-turn checks
(the bfcl-eval package); unit conversion ("17 km" is no number here) and semantic matching (an LLM
judge); stored run histories and dashboards (Inspect, promptfoo).
"""

import re
import string
import sys
from dataclasses import dataclass, field

from .cite import Answer, CitationReport, Claim, citation_report, validate_answer
from .errors import ModelBehaviorError, UserError
from .models import ToolCall, as_tool_spec
from .schema import ArgumentError, json_equal, json_type, parse_arguments
from .trace import clip

# ---------------------------------------------------------------- tool calls: the AST match

MATCH_KINDS = (
    "ok",
    "malformed",  # a call whose arguments are not a JSON object
    "unexpected_call",  # a call where no call was right (irrelevance)
    "wrong_count",
    "wrong_name",
    "missing_required",
    "unexpected_param",  # not in the function doc, or not in the ground truth
    "type_error",
    "value_error",  # not among the allowed values
    "missing_optional",  # optional in the doc, but the ground truth does not allow leaving it out
    "no_match",  # parallel: an expected call that no call matches
)
# BFCL's Python type names, and JSON Schema's, so a labkit Tool's parameters match too
TYPES = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
}


@dataclass(frozen=True)
class Match:
    """Whether calls match the ground truth: ok, else the first rule that failed, and why."""

    ok: bool
    kind: str = "ok"  # one of MATCH_KINDS
    reason: str = ""

    def __bool__(self):
        return self.ok


class _Mismatch(Exception):
    """Raised at the first rule a call breaks; ast_match returns it as a Match."""

    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind = kind


def standardize(text: str) -> str:
    """BFCL's string rule: drop spaces and , . / - _ * ^, lower the case, ' becomes ".

    Example: standardize("April 1, 2024")  ->  "april12024"
    """
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def bfcl_calls(calls) -> list[dict]:
    """Calls in BFCL's model-output form, [{name: {argument: value}}]; labkit ToolCalls are parsed.

    Example: bfcl_calls([ToolCall("call_1", "get_weather", '{"city": "Paris"}')])
             ->  [{"get_weather": {"city": "Paris"}}]
    """
    found = []
    for n, c in enumerate(calls, 1):
        if isinstance(c, ToolCall):
            try:
                if c.problem:
                    raise ArgumentError(c.problem)
                found.append({c.name: parse_arguments(c.arguments)})
            except ArgumentError as exc:  # the model's fault: a verdict, not a crash
                problem = f"call {n} ({clip(c.name, 30)}) cannot be read: {exc}"
                raise ModelBehaviorError(problem) from None
        elif isinstance(c, dict) and len(c) == 1 and isinstance(next(iter(c.values())), dict):
            found.append(c)
        else:
            raise UserError(
                f"call {n} is {clip(repr(c), 60)} — give labkit ToolCalls or BFCL's form "
                "{name: {argument: value}}"
            )
    return found


def _truth(ground_truth):
    """BFCL's possible answers as [(name, {parameter: [allowed values]})], or a UserError."""
    shape = "[{function: {parameter: [allowed values]}}], [] when no call is right"
    if not isinstance(ground_truth, list):
        raise UserError(f"ground_truth is {json_type(ground_truth)} — use BFCL's form {shape}")
    found = []
    for entry in ground_truth:
        items = list(entry.items()) if isinstance(entry, dict) else []
        allowed = items[0][1] if len(items) == 1 else None
        if not isinstance(allowed, dict) or not all(isinstance(v, list) for v in allowed.values()):
            raise UserError(f"ground_truth entry {clip(repr(entry), 60)} — use {shape}")
        found.append(items[0])
    return found


def _typed(path, value, schema):
    """The value with ints accepted for floats, or type_error (checked inside lists and dicts)."""
    kind = schema.get("type")
    expected = TYPES.get(kind)  # "any" or no type: no type rule
    if expected is float and type(value) is int:
        value = float(value)  # int accepted for float, as in Python
    if expected is not None and type(value) is not expected:  # subtle: True is no integer here
        raise _Mismatch("type_error", f"{path} is {json_type(value)}, expected {kind}")
    if expected is list:
        return [_typed(f"{path}[{i}]", v, schema.get("items", {})) for i, v in enumerate(value)]
    if expected is dict:
        props = schema.get("properties", {})
        return {k: _typed(f"{path}.{k}", v, props.get(k, {})) for k, v in value.items()}
    return value


def _same(value, option) -> bool:
    """One value against one allowed value: strings standardized, lists element by element, a dict
    key by key against {key: [allowed values]} (at any depth); numbers by value."""
    if isinstance(option, str):
        return isinstance(value, str) and standardize(value) == standardize(option)
    if isinstance(option, list):
        return (
            isinstance(value, list) and len(value) == len(option) and all(map(_same, value, option))
        )
    if isinstance(option, dict):
        return (
            isinstance(value, dict)
            and all(k in option and _allowed(v, option[k]) for k, v in value.items())
            and all(k in value or "" in allowed for k, allowed in option.items())
        )
    return json_equal(value, option)  # 2 == 2.0, but True != 1


def _allowed(value, options) -> bool:
    return any(_same(value, o) for o in options if o != "")  # "": may be left out


def _check_call(call, name, allowed, docs):
    """One call against one expected call: raise _Mismatch at the first rule it breaks."""
    (called, arguments), *_ = call.items()
    if called != name:
        raise _Mismatch("wrong_name", f"called {called!r}, expected {name!r}")
    if name not in docs:
        raise UserError(f"the ground truth names {name!r} but functions has no doc for it")
    properties, required = docs[name].get("properties", {}), docs[name].get("required", [])
    for p in required:
        if p not in arguments:
            raise _Mismatch("missing_required", f"{name}: the required parameter {p!r} is missing")
    for p, value in arguments.items():
        if p not in properties or p not in allowed:
            where = "the function doc" if p not in properties else "the ground truth"
            raise _Mismatch("unexpected_param", f"{name}: parameter {p!r} is not in {where}")
        value = _typed(f"{name}.{p}", value, properties[p])
        if not _allowed(value, allowed[p]):
            shown = [o for o in allowed[p] if o != ""]
            raise _Mismatch(
                "value_error",
                f"{name}.{p} = {clip(repr(value), 40)}, allowed: {clip(repr(shown), 50)}",
            )
    for p, options in allowed.items():
        if p not in arguments and "" not in options:
            raise _Mismatch("missing_optional", f"{name}: {p!r} may not be left out here")


def _failure(call, name, allowed, docs):
    """The _Mismatch for this pairing, or None when the call matches."""
    try:
        _check_call(call, name, allowed, docs)
    except _Mismatch as m:
        return m
    return None


def _pairing(fits) -> list:
    """For each expected call a distinct matching call (index), or None: a maximum matching by
    augmenting paths, so no order of the calls is preferred. fits[i][j] is None when j fits i."""
    owner = {}  # call -> the expected call it is paired with

    def place(i, seen):
        for j, problem in enumerate(fits[i]):
            if problem is None and j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(fits)):
        place(i, set())
    paired = {i: j for j, i in owner.items()}
    return [paired.get(i) for i in range(len(fits))]


def _match(calls, truth, docs):
    if not truth:  # irrelevance: no function fits, so any call is wrong
        if calls:
            names = ", ".join(next(iter(c)) for c in calls)
            raise _Mismatch("unexpected_call", f"called {names}, but no call was right here")
        return
    if len(calls) != len(truth):
        raise _Mismatch("wrong_count", f"{len(calls)} call(s), expected {len(truth)}")
    if len(truth) == 1:  # simple, or multiple (one call among several functions)
        return _check_call(calls[0], *truth[0], docs)
    fits = [[_failure(call, name, allowed, docs) for call in calls] for name, allowed in truth]
    pairing = _pairing(fits)
    for i, j in enumerate(pairing):  # parallel: in any order
        if j is None:
            left = next(k for k in range(len(calls)) if k not in pairing)  # a call left unpaired
            raise _Mismatch(
                "no_match",
                f"no call matches expected call {i + 1}; call {left + 1}: {fits[i][left]}",
            )


def ast_match(calls, ground_truth, functions) -> Match:
    """Whether a model's calls match BFCL ground truth: ok, or the first rule that failed.

    calls: labkit ToolCalls or BFCL's [{name: {argument: value}}]. ground_truth: BFCL's possible
    answers [{name: {parameter: [allowed values]}}], "" letting an optional parameter be left
    out, [] when no call is right. functions: BFCL function docs (or labkit Tools).
    Example: ast_match([{"f": {"x": 2}}], [{"f": {"x": [2, 3]}}], [F_DOC])  ->  Match(ok=True, ...)
    """
    truth = _truth(ground_truth)
    docs = {spec.name: spec.parameters for spec in map(as_tool_spec, functions)}
    try:
        _match(bfcl_calls(calls), truth, docs)
    except ModelBehaviorError as exc:
        return Match(False, "malformed", str(exc))
    except _Mismatch as m:
        return Match(False, m.kind, str(m))
    return Match(True)


# ---------------------------------------------------------------- final answers: GAIA's rules

ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
PUNCTUATION = str.maketrans("", "", string.punctuation)
FINAL = re.compile(r"FINAL ANSWER:", re.IGNORECASE)
CITED = re.compile(r"\s*\[([^\[\]]+)\]\s*$")  # 06's rendering: "claim [source_id, ...]"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str) -> float | None:
    """GAIA's number rule: drop $, % and thousands commas, then read a float; None if it is not."""
    try:
        return float(re.sub(r"[$%,]", "", text))
    except ValueError:
        return None


def normalize_answer(text: str, punctuation: bool = True, articles: bool = True) -> str:
    """GAIA's string rule: no white space, lower case, no punctuation. labkit also drops the
    articles a, an, the (GAIA keeps them: articles=False is GAIA's rule exactly).

    Example: normalize_answer("The Eiffel Tower!")  ->  "eiffeltower"
    """
    if articles:
        dropped = ARTICLES.sub(" ", text)
        text = dropped if dropped.strip() else text  # an answer that is only "a" stays "a"
    text = re.sub(r"\s", "", text).lower()
    return text.translate(PUNCTUATION) if punctuation else text


def quasi_exact_match(answer: str, truth: str, articles: bool = True) -> bool:
    """GAIA's quasi-exact match: a number truth by value ($, %, thousands commas dropped), a
    comma or semicolon list element by element, anything else as a normalised string.

    Example: quasi_exact_match("$1,234.50", "1234.5")  ->  True
    """
    if _is_number(truth):
        return _number(answer) == float(truth)
    if "," in truth or ";" in truth:
        got, want = re.split(r"[,;]", answer), re.split(r"[,;]", truth)
        return len(got) == len(want) and all(
            _number(g) == float(w)
            if _is_number(w)
            else normalize_answer(g, False, articles) == normalize_answer(w, False, articles)
            for g, w in zip(got, want, strict=True)
        )
    return normalize_answer(answer, True, articles) == normalize_answer(truth, True, articles)


def final_answer(text: str) -> str:
    """What follows the last "FINAL ANSWER:" (GAIA's convention), else the whole text, stripped.

    Example: final_answer("14 * 9 / 5 + 32 = 57.2\\nFINAL ANSWER: 57.2")  ->  "57.2"
    """
    return FINAL.split(text)[-1].strip()


def cited(text: str) -> Answer:
    """An answer written as 06 renders one, `claim [source_id, ...]`, as a one-claim cite.Answer.

    Example: cited("a warm coat [handbook-travel.md]").claims[0].source_ids
             ->  ["handbook-travel.md"]
    """
    found = CITED.search(text)
    ids = [i.strip() for i in found.group(1).split(",")] if found else []
    return Answer("answered", [Claim(text[: found.start()] if found else text, ids)])


@dataclass
class AnswerScore:
    final: str  # what was scored: after FINAL ANSWER:, without its citations
    correct: bool  # quasi-exact match with the truth
    problems: list = field(default_factory=list)  # citation problems (06's validate_answer)
    citations: CitationReport | None = None  # 06's citation_report, when sources were given

    @property
    def passed(self) -> bool:
        """Correct, and (when it must cite) citing only known sources that support it."""
        unsupported = self.citations.unsupported if self.citations else 0
        return self.correct and not self.problems and not unsupported


def score_answer(text: str, truth: str, sources=None, articles: bool = True) -> AnswerScore:
    """Score an answer: GAIA's quasi-exact match on its final answer; with `sources` ({source_id:
    text}) it must also cite, and 06's checks apply: known ids, citations that support it.

    Example: score_answer("FINAL ANSWER: a warm coat [handbook-travel.md]", "warm coat",
                          {"handbook-travel.md": TRAVEL}).passed  ->  True
    """
    final = final_answer(text)
    if sources is None:
        return AnswerScore(final, quasi_exact_match(final, truth, articles))
    answer = cited(final)
    claim = answer.claims[0].text
    return AnswerScore(
        claim,
        quasi_exact_match(claim, truth, articles),
        validate_answer(answer, sources),
        citation_report(answer, sources),
    )


# python -m labkit.evals: the same command line as python -m labkit evals
if __name__ == "__main__":
    from labkit.__main__ import evals_main

    sys.exit(evals_main(prog="python -m labkit.evals"))
