"""labkit beside the references the field trusts, on generated inputs: BFCL's own ast_checker on
BFCL's own possible-answer data and mutations of it, and GAIA's question_scorer on generated
answer pairs. Used by bench_references.py (every case) and by the tests (a sample).

BFCL: the bfcl-eval wheel (pinned in .ci/bfcl-eval.txt) is installed by `make test` / `make bench`
with --no-deps into .venv/bfcl-eval; its ast_checker.py and data are read from there unchanged.
Its one heavy import, the table of model configs (it imports every provider's SDK), is replaced
by a stub with one model that keeps dots in function names; the checker consults it for nothing
else. GAIA: `gaia_question_scorer` is GAIA's scorer.py written out from its published source.
"""

import importlib
import json
import random
import re
import string
import sys
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BFCL_DIR = ROOT / ".venv" / "bfcl-eval"
PYTHON_CATEGORIES = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
]
MODEL = "labkit"  # the stub config's one model: function names are kept as written


def load_bfcl():
    """BFCL's ast_checker module and its data folder, or None when bfcl-eval is not installed."""
    if not (BFCL_DIR / "bfcl_eval" / "eval_checker" / "ast_eval" / "ast_checker.py").exists():
        return None
    if str(BFCL_DIR) not in sys.path:
        sys.path.append(str(BFCL_DIR))
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=False)}
    sys.modules.setdefault("bfcl_eval.constants.model_config", stub)
    checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    return checker, BFCL_DIR / "bfcl_eval" / "data"


def bfcl_cases(data: Path, categories=PYTHON_CATEGORIES):
    """[(category, id, functions, ground_truth)] for BFCL's python categories, in file order."""
    found = []
    for category in categories:
        name = f"BFCL_v4_{category}.json"
        questions = [json.loads(line) for line in (data / name).read_text().splitlines() if line]
        answers = [
            json.loads(line)
            for line in (data / "possible_answer" / name).read_text().splitlines()
            if line
        ]
        docs = {q["id"]: q["function"] for q in questions}
        found += [(category, a["id"], docs[a["id"]], a["ground_truth"]) for a in answers]
    return found


# ---------------------------------------------------------------- mutations of the ground truth


def _changed(value, rng):
    """Values a model might write instead of `value`: other types, cases, spacing, numbers."""
    out = [None, "", "dontcare", str(value), [value]]
    if isinstance(value, bool):
        out += [not value, int(value), str(value).lower()]
    elif isinstance(value, int):
        out += [value + 1, float(value), -value, str(value) + ".0"]
    elif isinstance(value, float):
        out += [value + 1.5, int(value), round(value, 1), str(value)]
    elif isinstance(value, str):
        out += [value.upper(), value.title(), f" {value} ", value.replace(" ", "_"), value + "x"]
        out += [value.replace(",", ""), value[:-1], 0]
    elif isinstance(value, list):
        out += [[], value[::-1], value[:-1], value + value[-1:]]
        out += [[_nudge(v) for v in value], [str(v) for v in value]]
        out += [[float(v) if type(v) is int else v for v in value]]
        out += [[int(v) if type(v) is float and v == int(v) else v for v in value]]
        out += [value[0] if value else 0]
    elif isinstance(value, dict):
        keys = list(value)
        out += [{}, {**value, "extra": 1}]
        if keys:
            k = rng.choice(keys)
            out += [{x: v for x, v in value.items() if x != k}, {**value, k: _nudge(value[k])}]
            out += [{**value, k: [value[k]]}, {**value, k: str(value[k])}]
    return out


def _nudge(value):
    """A near miss: a string in upper case, a number one more, a list or dict one level down."""
    if isinstance(value, str):
        return value.upper()
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [_nudge(v) for v in value]
    if isinstance(value, dict):
        return {k: _nudge(v) for k, v in value.items()}
    return value


def _literal(option):
    """An allowed value as a model writes it: a nested dict's allowed lists by their first value."""
    if isinstance(option, dict):
        return {
            k: _literal(v[0]) if isinstance(v, list) and v and v[0] != "" else _literal(v)
            for k, v in option.items()
            if not (isinstance(v, list) and v and v[0] == "")
        }
    if isinstance(option, list):
        return [_literal(o) for o in option]
    return option


def _one_call(name, allowed, rng):
    """Calls for one expected call: right ones (each allowed value, each omission), wrong ones."""
    chosen = {
        p: _literal(next(o for o in opts if o != ""))
        for p, opts in allowed.items()
        if any(o != "" for o in opts)
    }
    calls = [chosen]
    for p, opts in allowed.items():
        for o in opts:
            calls.append(
                {k: v for k, v in chosen.items() if k != p}
                if o == ""
                else {**chosen, p: _literal(o)}
            )
        if p in chosen:
            calls += [{**chosen, p: v} for v in _changed(chosen[p], rng)]
            calls.append({k: v for k, v in chosen.items() if k != p})
    calls += [{**chosen, "unexpected_parameter": 1}]
    return [{name: c} for c in calls]


def bfcl_candidates(truth, rng):
    """Model outputs for one BFCL case: every mutation of each expected call (the others right),
    a wrong name, reordered, missing and doubled calls."""
    right = [_one_call(name, allowed, rng)[0] for entry in truth for name, allowed in entry.items()]
    out = [right, right[::-1], right[:-1], right + right[:1]]
    out.append([{name + "_v2": args} for c in right for name, args in c.items()])
    for i, entry in enumerate(truth):
        for name, allowed in entry.items():
            for call in _one_call(name, allowed, rng)[1:]:
                out.append(right[:i] + [call] + right[i + 1 :])
                if len(right) > 1:
                    out.append(right[i + 1 :] + [call] + right[:i])
    return out


def bfcl_verdict(checker, functions, calls, truth, category):
    """BFCL's verdict: True, False, or "crash" with BFCL's exception (its own limits)."""
    try:
        result = checker.ast_checker(
            functions, calls, truth, checker.Language.PYTHON, category, MODEL
        )
    except Exception as exc:  # noqa: BLE001 - the reference's own crash is a result to report
        return f"crash: {type(exc).__name__}"
    return bool(result["valid"])


def compare_bfcl(every: int = 1, mode: str = "labkit", seed: int = 0):
    """(agree, total, differences, bfcl_crashes): labkit's ast_match beside BFCL's checker on
    every `every`-th case of BFCL's python categories and all of its mutations."""
    from labkit.evals import ast_match

    loaded = load_bfcl()
    if loaded is None:
        raise RuntimeError("bfcl-eval is not installed: run `make bench` (or `make test`)")
    checker, data = loaded
    rng = random.Random(seed)
    agree = total = 0
    differences, crashes = [], []
    for category, case_id, functions, truth in bfcl_cases(data)[::every]:
        for calls in bfcl_candidates(truth, rng):
            reference = bfcl_verdict(checker, functions, calls, truth, category)
            if not isinstance(reference, bool):
                crashes.append((case_id, reference))
                continue
            ours = ast_match(calls, truth, functions, mode=mode)
            total += 1
            if ours.ok == reference:
                agree += 1
            else:
                differences.append((case_id, calls, reference, ours))
    return agree, total, differences, crashes


# ---------------------------------------------------------------- GAIA


def gaia_question_scorer(model_answer, ground_truth):
    """GAIA's question_scorer, written out from its published scorer.py (the GAIA leaderboard's
    Hugging Face space, gaia-benchmark/leaderboard, scorer.py), its prints left out."""

    def normalize_number_str(number_str):
        for char in ["$", "%", ","]:
            number_str = number_str.replace(char, "")
        try:
            return float(number_str)
        except ValueError:
            return float("inf")

    def split_string(s, char_list=(",", ";")):
        pattern = f"[{''.join(char_list)}]"
        return re.split(pattern, s)

    def normalize_str(input_str, remove_punct=True):
        no_spaces = re.sub(r"\s", "", input_str)
        if remove_punct:
            translator = str.maketrans("", "", string.punctuation)
            return no_spaces.lower().translate(translator)
        return no_spaces.lower()

    def is_float(element):
        try:
            float(element)
            return True
        except ValueError:
            return False

    if model_answer is None:
        model_answer = "None"
    if is_float(ground_truth):
        return normalize_number_str(model_answer) == float(ground_truth)
    if any(char in ground_truth for char in [",", ";"]):
        gt_elems = split_string(ground_truth)
        ma_elems = split_string(model_answer)
        if len(gt_elems) != len(ma_elems):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                warnings.warn(
                    "Answer lists have different lengths, returning False.",
                    UserWarning,
                    stacklevel=2,
                )
            return False
        comparisons = []
        for ma_elem, gt_elem in zip(ma_elems, gt_elems, strict=True):
            if is_float(gt_elem):
                comparisons.append(normalize_number_str(ma_elem) == float(gt_elem))
            else:
                comparisons.append(
                    normalize_str(ma_elem, remove_punct=False)
                    == normalize_str(gt_elem, remove_punct=False)
                )
        return all(comparisons)
    return normalize_str(model_answer) == normalize_str(ground_truth)


NUMBERS = [
    "0",
    "1",
    "42",
    "-3",
    "3.5",
    "1e3",
    "1,234",
    "$1,234.50",
    "17%",
    "0.1",
    "inf",
    "nan",
    "Infinity",
    "1_000",
    " 12 ",
    "1.0",
    "12 km",
    "twelve",
    "",
    "None",
    "-0",
]
WORDS = [
    "Paris",
    "the Eiffel Tower",
    "Eiffel tower",
    "a",
    "an apple",
    "An Apple",
    "sea gull",
    "seagull",
    "St. Louis",
    "st louis",
    "O'Brien",
    "obrien",
    "None",
    "THE",
    "New-York",
    "new york",
    "x",
    "",
    "  ",
    "Ünïcode",
    "naïve",
    "3 apples",
    "apples",
]


def gaia_pairs(count: int, seed: int = 0):
    """(answer, truth) pairs: numbers, lists of numbers and words (joined by , or ;), strings,
    each truth beside near misses and an answer of another kind."""
    rng = random.Random(seed)

    def item():
        return rng.choice(NUMBERS if rng.random() < 0.5 else WORDS)

    def joined(parts):
        return "".join(p + rng.choice([",", ", ", ";", "; "]) for p in parts[:-1]) + parts[-1]

    def one():
        kind = rng.random()
        if kind < 0.35:
            return item()
        return joined([item() for _ in range(rng.randint(2, 4))])

    pairs = []
    while len(pairs) < count:
        truth = one()
        answer = rng.choice(
            [
                truth,
                truth.upper(),
                truth.replace(",", ";"),
                truth.replace(" ", ""),
                " " + truth + ".",
                one(),
                None,
                truth + ", x",
                truth.replace("1", "2"),
            ]
        )
        pairs.append((answer, truth))
    return pairs


def compare_gaia(count: int, articles: bool = True, seed: int = 0, mode: str = "labkit"):
    """(agree, total, differences): labkit's quasi_exact_match beside GAIA's scorer."""
    from labkit.evals import quasi_exact_match

    differences = []
    pairs = gaia_pairs(count, seed)
    for answer, truth in pairs:
        ours = quasi_exact_match(answer, truth, articles=articles, mode=mode)
        if ours != gaia_question_scorer(answer, truth):
            differences.append((answer, truth, ours))
    return len(pairs) - len(differences), len(pairs), differences
