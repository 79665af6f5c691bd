"""Scoring one output: tool calls matched the BFCL way, final answers scored the GAIA way.

Built in 10_evals (a suite and the gate: labkit.suite; numbers: labkit.stats; judges:
labkit.judges). `ast_match` reads BFCL's possible-answer and function-doc formats; `score_answer`
is GAIA's quasi-exact match (labkit also drops articles) plus 06's citation checks. `python -m
labkit evals run SUITE --baseline FILE` is the regression gate's command line.
Left out, and what production uses: BFCL's Java/JavaScript rules, executable and multi-turn checks
(the bfcl-eval package); unit conversion ("17 km" is no number here) and semantic matching (an LLM
judge); stored run histories and dashboards (Inspect, promptfoo).
"""

import math
import re
import string
import sys
from dataclasses import dataclass, field

from .cite import Answer, CitationReport, Claim, citation_report, validate_answer
from .errors import ModelBehaviorError, UserError
from .models import ToolCall, as_tool_spec
from .schema import ArgumentError, is_number, json_type, parse_arguments
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
TYPES = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool}
TYPES |= {"array": list, "tuple": list, "dict": dict, "object": dict}
BFCL_TYPES = {**TYPES, "any": str}  # BFCL's own table reads "any" as a string


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


def bfcl_calls(calls: list[ToolCall | dict]) -> list[dict]:
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


def _written_type(options):
    """BFCL: the type the ground truth writes this value in (its first allowed value but "")."""
    return next((type(o) for o in options if o != ""), None)


def _type_rule(where, value, options, schema, types) -> bool:
    """BFCL's type rule: the value is of the doc's type (an array's items too), or of the type an
    allowed value is written in ("dontcare" for an integer, null for a string): then it is a
    "variable", compared as written. Returns whether it is one; raises type_error."""
    kind, written = schema.get("type"), _written_type(options)
    expected, bfcl = types.get(kind), types is BFCL_TYPES  # BFCL: "" skips the items' check
    if expected is None:  # labkit: "any" or no type, no type rule
        return False
    if type(value) is expected:  # subtle: True is no integer here
        array = kind in ("array", "tuple")
        item = types.get(schema.get("items", {}).get("type")) if array else None
        if item is not None and not _items_typed(value, options, item, bfcl):
            raise _Mismatch("type_error", f"{where}: an item is not {schema['items']['type']}")
        return written not in (None, expected)
    if written is not None and type(value) is written:
        return True
    raise _Mismatch("type_error", f"{where} is {json_type(value)}, expected {kind}")


def _items_typed(value, options, item, bfcl) -> bool:
    """BFCL's item rule: each item of the doc's item type, or of an allowed list's item type."""
    lists: list = options if bfcl else [o for o in options if isinstance(o, list)] or [None]
    return any(
        not isinstance(o, list) or all(type(v) in (item, _written_type(o)) for v in value)
        for o in lists
    )


def _std(value):
    return standardize(value) if type(value) is str else value


def _dict_fits(value, options) -> bool:
    """BFCL's dict rule: each key among an allowed dict's keys, its value (a string standardized)
    == one of that key's allowed values; every key that may not be left out given."""
    if not isinstance(value, dict):
        return False
    for option in (o for o in options if isinstance(o, dict)):
        lists = {k: v if isinstance(v, list) else [v] for k, v in option.items()}  # no crash
        fits = all(k in lists and _std(v) in map(_std, lists[k]) for k, v in value.items())
        if fits and all(k in value or "" in allowed for k, allowed in lists.items()):
            return True
    return False


def _fits(value, options, schema, types) -> bool:
    """BFCL's value rules by type: strings standardized, lists element by element (a string
    element standardized, "" allowing []), dicts and lists of dicts key by key, else ==."""
    expected = types.get(schema.get("type")) or type(value)
    if expected is dict:
        return _dict_fits(value, options)
    if expected is list:
        return _list_fits(value, options, types.get(schema.get("items", {}).get("type")))
    if expected is str:
        return _std(value) in [_std(o) for o in options if type(o) is str]
    return value in options


def _list_fits(value, options, item) -> bool:
    """BFCL's list rule: element by element (strings standardized), a list of dicts dict by dict."""
    if item is dict:
        return any(
            isinstance(o, list | str)
            and len(value) == len(o)
            and all(_dict_fits(v, [d]) for v, d in zip(value, o, strict=True))
            for o in options
        )
    shown = [[_std(x) for x in o] if isinstance(o, list | str) else o for o in options]
    return [_std(v) for v in value] in shown


def check_call(call: dict, name: str, allowed: dict, docs: dict, types: dict = TYPES) -> None:
    """One call against one expected call: raise _Mismatch at the first rule it breaks.
    Example: check_call({"f": {"x": 4}}, "f", {"x": [2, 3]}, {"f": F_DOC})  # raises value_error"""
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
        _check_type_and_value(f"{name}.{p}", value, allowed[p], properties[p], types)
    for p, options in allowed.items():
        if p not in arguments and "" not in options:
            raise _Mismatch("missing_optional", f"{name}: {p!r} may not be left out here")


def _check_type_and_value(where, value, options, schema, types):
    """One argument: BFCL's type rule, then its value rule; raise type_error or value_error."""
    if types.get(schema.get("type")) is float and type(value) is int:
        value = float(value)  # int accepted for float, as in Python (not inside a list)
    variable = _type_rule(where, value, options, schema, types)
    if not (value in options if variable else _fits(value, options, schema, types)):
        shown = [o for o in options if o != ""]
        raise _Mismatch(
            "value_error", f"{where} = {clip(repr(value), 40)}, allowed: {clip(repr(shown), 50)}"
        )


def _failure(call, name, allowed, docs, types=TYPES):
    try:
        check_call(call, name, allowed, docs, types)
    except _Mismatch as m:
        return m
    return None


def _pairing(fits) -> list:
    """For each expected call a distinct matching call (index), or None: a maximum matching by
    augmenting paths, so no order of the calls is preferred. fits[i][j] is None when j fits i."""
    owner: dict[int, int] = {}  # call -> the expected call it is paired with

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


def _greedy(fits) -> list:
    """BFCL's pairing: each expected call in turn takes the first free call that fits it."""
    taken = []
    for row in fits:
        taken.append(next((j for j, p in enumerate(row) if p is None and j not in taken), None))
    return taken


def _match(calls, truth, docs, mode):
    if not truth:  # irrelevance: no function fits, so any call is wrong
        if calls:
            names = ", ".join(next(iter(c)) for c in calls)
            raise _Mismatch("unexpected_call", f"called {names}, but no call was right here")
        return
    if len(calls) != len(truth):
        raise _Mismatch("wrong_count", f"{len(calls)} call(s), expected {len(truth)}")
    types = BFCL_TYPES if mode == "bfcl" else TYPES
    if len(truth) == 1:  # simple, or multiple (one call among several functions)
        return check_call(calls[0], *truth[0], docs, types)
    fits = [[_failure(c, name, allowed, docs, types) for c in calls] for name, allowed in truth]
    pairing = _greedy(fits) if mode == "bfcl" else _pairing(fits)
    for i, j in enumerate(pairing):  # parallel: in any order
        if j is None:
            left = next(k for k in range(len(calls)) if k not in pairing)  # a call left unpaired
            reason = f"no call matches expected call {i + 1}; call {left + 1}: {fits[i][left]}"
            raise _Mismatch("no_match", reason)


def ast_match(
    calls: list[ToolCall | dict], ground_truth: list, functions: list, mode: str = "labkit"
) -> Match:
    """Whether a model's calls match BFCL ground truth: ok, or the first rule that failed.

    calls: labkit ToolCalls or BFCL's [{name: {argument: value}}]. ground_truth: BFCL's possible
    answers [{name: {parameter: [allowed values]}}], "" letting an optional parameter be left
    out, [] when no call is right. functions: BFCL function docs (or labkit Tools).
    mode="bfcl" is BFCL's ast_checker (Python) exactly. The default differs by choice in three
    places: parallel calls are paired by maximum matching (BFCL pairs greedily, so a call that
    fits two expected calls can leave the second unmatched); "any" has no type rule (BFCL: a
    string); a literal where a list of allowed values belongs is compared as written (BFCL crashes).
    Example: ast_match([{"f": {"x": 2}}], [{"f": {"x": [2, 3]}}], [F_DOC])  ->  Match(ok=True, ...)
    """
    if mode not in ("labkit", "bfcl"):
        raise UserError(f"mode={mode!r} — use mode='labkit' (the default) or mode='bfcl'")
    truth = _truth(ground_truth)
    docs = {spec.name: spec.parameters for spec in map(as_tool_spec, functions)}
    try:
        _match(bfcl_calls(calls), truth, docs, mode)
    except ModelBehaviorError as exc:
        return Match(False, "malformed", str(exc))
    except _Mismatch as m:
        return Match(False, m.kind, str(m))
    return Match(True)


# ---------------------------------------------------------------- final answers: GAIA's rules

ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
PUNCTUATION = str.maketrans("", "", string.punctuation)
FINAL = re.compile(r"FINAL ANSWER:", re.IGNORECASE)
Given = str | float | None  # an answer or a truth: text, a number, or None (GAIA's forms)
CITED = re.compile(r"\s*\[([^\[\]]+)\]\s*$")  # 06's rendering: "claim [source_id, ...]"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str, gaia: bool = False) -> float | None:
    """GAIA's number rule: drop $, % and thousands commas, then read a float. Not a number: None
    (labkit), or infinity (GAIA's own code, so any such answer equals a truth of "inf")."""
    try:
        return float(re.sub(r"[$%,]", "", text))
    except ValueError:
        return math.inf if gaia else None


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


def _text(value, name: str) -> str:
    """An answer or truth as text: None is "None" (as GAIA reads it), a number its digits."""
    if value is None:
        return "None"
    if is_number(value):
        return str(value)
    if not isinstance(value, str):
        raise UserError(f"{name} is {json_type(value)} — give the {name} as text, e.g. '57.2'")
    return value


def quasi_exact_match(
    answer: Given, truth: Given, articles: bool = True, mode: str = "labkit"
) -> bool:
    """GAIA's quasi-exact match: a number truth by value ($, %, thousands commas dropped), a
    comma or semicolon list element by element, anything else as a normalised string.

    mode="gaia" is GAIA's question_scorer exactly. The default differs by choice in two places:
    articles are dropped (articles=False keeps them), and an answer that is no number never
    equals a number (GAIA's code reads it as infinity, so it equals a truth of "inf").
    Example: quasi_exact_match("$1,234.50", "1234.5")  ->  True
    """
    if mode not in ("labkit", "gaia"):
        raise UserError(f"mode={mode!r} — use mode='labkit' (the default) or mode='gaia'")
    answer, truth = _text(answer, "answer"), _text(truth, "truth")
    gaia = mode == "gaia"
    articles = articles and not gaia
    if _is_number(truth):
        return _number(answer, gaia) == float(truth)
    if "," in truth or ";" in truth:
        got, want = re.split(r"[,;]", answer), re.split(r"[,;]", truth)
        return len(got) == len(want) and all(
            _number(g, gaia) == float(w)
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


def score_answer(
    text: Given,
    truth: Given,
    sources: dict[str, str] | None = None,
    articles: bool = True,
    mode: str = "labkit",
) -> AnswerScore:
    """Score an answer: GAIA's quasi-exact match on its final answer; with `sources` ({source_id:
    text}) it must also cite, and 06's checks apply: known ids, citations that support it.
    mode="gaia" scores the whole text with GAIA's question_scorer, as GAIA's scorer does (labkit
    first takes what follows "FINAL ANSWER:").

    Example: score_answer("FINAL ANSWER: a warm coat [handbook-travel.md]", "warm coat",
                          {"handbook-travel.md": TRAVEL}).passed  ->  True
    """
    text = _text(text, "answer")
    final = text if mode == "gaia" else final_answer(text)
    if sources is None:
        return AnswerScore(final, quasi_exact_match(final, truth, articles, mode))
    answer = cited(final)
    claim = answer.claims[0].text
    return AnswerScore(
        claim,
        quasi_exact_match(claim, truth, articles, mode),
        validate_answer(answer, sources),
        citation_report(answer, sources),
    )


# The command line is in labkit/__main__.py (it imports this module, so this one cannot import it)
if __name__ == "__main__":
    sys.exit("the evals command line is python -m labkit evals run|tool-choice|descriptions")
