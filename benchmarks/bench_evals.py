"""Tool-call matching: labkit's ast_match on the frozen set, beside the shortcuts people take.

The 52 cases of data/evals/tool_calls.json, one run: ast_match on BFCL's output form, on labkit
ToolCalls (each call's JSON arguments parsed first), a jsonschema validator built once per
function (checks the types, never the values), and comparing canonical JSON text with the first
allowed value (what a quick script does). Throughput is calls matched per second; "right" counts
the verdicts that agree with the one written beside each case. BFCL's own checker (the bfcl-eval
package) is not in the lock, so it is not timed here. Compare the ratios, not the numbers.
"""

import json
import timeit

import jsonschema

from labkit.evals import ast_match
from labkit.labs import bfcl_tool, load_tool_cases
from labkit.models import ToolCall


def as_tool_calls(output):
    """BFCL's [{name: {argument: value}}] as labkit ToolCalls, as a model's reply holds them."""
    return [
        ToolCall(f"call_{n}", name, json.dumps(arguments))
        for n, call in enumerate(output, 1)
        for name, arguments in call.items()
    ]


def first_allowed(truth):
    """The ground truth with each parameter's first allowed value: one exact answer."""
    return [
        {name: {p: v[0] for p, v in allowed.items() if v[0] != ""}}
        for entry in truth
        for name, allowed in entry.items()
    ]


def methods(cases):
    """name -> a function of one case returning whether its calls match, plus its prepared input."""
    calls = {c["id"]: as_tool_calls(c["output"]) for c in cases}
    validators = {
        d["name"]: jsonschema.Draft202012Validator(bfcl_tool(d).parameters)
        for c in cases
        for d in c["functions"]
    }
    exact = {c["id"]: json.dumps(first_allowed(c["ground_truth"]), sort_keys=True) for c in cases}

    def schema_only(c):  # right names and types, no value checked
        names = [n for t in c["ground_truth"] for n in t]
        got = [(n, a) for call in c["output"] for n, a in call.items()]
        return len(got) == len(names) and all(
            n in names and validators[n].is_valid(a) for n, a in got
        )

    return {
        "ast_match (BFCL form)": lambda c: (
            ast_match(c["output"], c["ground_truth"], c["functions"]).ok
        ),
        "ast_match (ToolCalls)": lambda c: (
            ast_match(calls[c["id"]], c["ground_truth"], c["functions"]).ok
        ),
        "jsonschema types only": schema_only,
        "exact JSON text": lambda c: json.dumps(c["output"], sort_keys=True) == exact[c["id"]],
    }


def calls_per_second(fn, cases, repeat=5, number=20):
    """Calls matched per second over the whole set (the best of `repeat` runs)."""
    total = sum(max(len(c["output"]), 1) for c in cases) * number
    best = min(timeit.repeat(lambda: [fn(c) for c in cases], number=number, repeat=repeat))
    return total / best


def main():
    cases = load_tool_cases()
    expected = [c["expect"] == "ok" for c in cases]
    print(f"{len(cases)} frozen cases, {sum(max(len(c['output']), 1) for c in cases)} calls")
    print(f"{'method':24} {'calls/s':>10} {'× ast_match':>12} {'right':>7}")
    base = None
    for name, fn in methods(cases).items():
        rate = calls_per_second(fn, cases)
        base = base or rate
        right = sum(fn(c) == e for c, e in zip(cases, expected, strict=True))
        print(f"{name:24} {rate:10,.0f} {rate / base:12.2f} {right:>4}/{len(cases)}")
    print(
        "Only ast_match gets every verdict right: a schema check passes wrong values, exact text "
        "fails other orders, allowed alternatives and optional parameters left out."
    )


if __name__ == "__main__":
    main()
