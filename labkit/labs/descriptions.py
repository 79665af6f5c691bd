"""02_tools Lab 7, measured: the same questions and tools, described three ways, asked of a model.

Outside the lessons (see labkit.labs). The frozen tool-call set of 10_evals (data/evals/
tool_calls.json) has 34 distinct questions over 12 functions. Each function is offered
"bare" (names and types only), "one line" (the frozen set's own short descriptions) and "written"
(data/evals/tool_descriptions.json, by Lab 7's rules). Names, types and the ground truth stay the
same, so only the words the model reads change. Two tool_choice policies: "auto" (the model
decides: is the right tool chosen, or none when none fits?) and "by name" (forced to the expected
tool on the 20 one-call questions: are the arguments right, BFCL's way?). Each variant against
"bare" on the same questions (McNemar). Recorded from SmolLM2 by `make descriptions-table`;
02_tools replays the cassette.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from ..config import EVALS_DIR
from ..errors import ServiceError
from ..evals import ast_match
from ..models import Model, user
from ..stats import bootstrap_ci, compare
from .evalsets import bfcl_tool, load_tool_cases

DESCRIPTIONS = EVALS_DIR / "tool_descriptions.json"
VARIANTS = ("bare", "one line", "written")
CASSETTE = "02_descriptions"  # data/cassettes/02_descriptions.jsonl
MAX_TOKENS = 160  # each reply's cap: a call or a short answer fits; a runaway reply is cut


def questions(cases=None) -> list:
    """The frozen set's distinct questions: one case per (question, functions offered).

    Example: len(questions())  ->  34
    """
    seen: dict = {}
    for case in cases if cases is not None else load_tool_cases():
        seen.setdefault((case["question"], tuple(d["name"] for d in case["functions"])), case)
    return list(seen.values())


def described(doc: dict, variant: str, written: dict) -> dict:
    """One BFCL function doc as the model sees it under a variant (the doc itself is not changed).

    Example: described(doc, "bare", {})["description"]  ->  ""
    """
    if variant == "one line":
        return doc
    words: dict = (
        written[doc["name"]] if variant == "written" else {"description": "", "parameters": {}}
    )
    properties = {}
    for name, schema in doc["parameters"]["properties"].items():
        schema = {k: v for k, v in schema.items() if k != "description"}
        if name in words["parameters"]:
            schema["description"] = words["parameters"][name]
        properties[name] = schema
    parameters = {**doc["parameters"], "properties": properties}
    return {**doc, "description": words["description"], "parameters": parameters}


def load_written(path=DESCRIPTIONS) -> dict:
    """Lab 7's descriptions of the frozen set's functions, by name."""
    return json.loads(Path(path).read_text(encoding="utf-8"))["functions"]


@dataclass
class Row:
    variant: str
    policy: str
    cases: list  # the questions asked, in order
    calls: list  # per question: the calls the model made (labkit ToolCalls), None on a failure
    scores: list  # per question: the row's measure, True or False

    def rate(self) -> str:
        i, n = bootstrap_ci(self.scores), len(self.scores)
        return f"{sum(self.scores):>2}/{n} {i.estimate:>4.0%} [{i.low:.0%}, {i.high:.0%}]"


def right_tool(case, calls) -> bool:
    """Under "auto": the first call names the expected tool, or no call when no call is right."""
    if not case["ground_truth"]:
        return not calls
    return bool(calls) and calls[0].name in case["ground_truth"][0]


def right_arguments(case, calls) -> bool:
    """Forced by name: the call matches the one expected call, BFCL's way (labkit's ast_match)."""
    return bool(calls) and ast_match(calls[:1], case["ground_truth"], case["functions"]).ok


def ask(model: Model, case, variant, written, tool_choice="auto"):
    """The model's calls for one question under one variant, or None when the service failed."""
    tools = [bfcl_tool(described(d, variant, written)) for d in case["functions"]]
    try:
        reply = model.respond(
            [user(case["question"])], tools, max_output_tokens=MAX_TOKENS, tool_choice=tool_choice
        )
    except ServiceError:
        return None
    return reply.tool_calls


def choice(case, policy: str) -> str:
    """The tool_choice of one question: "auto", or "by name" the one expected call's tool."""
    return next(iter(case["ground_truth"][0])) if policy == "by name" else "auto"


@dataclass
class DescriptionReport:
    rows: list  # [Row]: every variant under "auto", then every variant "by name"

    def __repr__(self):
        lines = [f"{'policy':<8} {'variant':<9} {'measure':<16} {'score':<24} {'no call':>7}"]
        for r in self.rows:
            measure = "right tool" if r.policy == "auto" else "right arguments"
            silent = sum(not c for c in r.calls)
            lines.append(f"{r.policy:<8} {r.variant:<9} {measure:<16} {r.rate():<24} {silent:>7}")
        for policy in ("auto", "by name"):
            rows = [r for r in self.rows if r.policy == policy]
            for r in rows[1:]:
                lines.append(f"{policy}, {r.variant} vs bare: {compare(rows[0].scores, r.scores)}")
        return "\n".join(lines)


def description_table(model: Model, cases=None, written=None) -> DescriptionReport:
    """Ask every distinct question under each variant, auto; then every one-call question forced
    to its expected tool by name. One reply per question (no tool runs: the first reply is scored).

    Example: print(description_table(connect(mode="replay", cassette=CASSETTE)))
    """
    cases, written = questions(cases), written or load_written()
    single = [c for c in cases if len(c["ground_truth"]) == 1]
    rows = []
    for policy, asked, score in (("auto", cases, right_tool), ("by name", single, right_arguments)):
        for variant in VARIANTS:
            calls = [ask(model, c, variant, written, choice(c, policy)) for c in asked]
            scores = [
                c is not None and score(case, c) for case, c in zip(asked, calls, strict=True)
            ]
            rows.append(Row(variant, policy, asked, calls, scores))
    return DescriptionReport(rows)


def first_calls(report: DescriptionReport, policy: str, variant: str) -> list:
    """One row's first calls, as "question -> tool(arguments)" (or "no call").

    Example: first_calls(description_table(model), "by name", "written")[0]
    """
    row = next(r for r in report.rows if (r.policy, r.variant) == (policy, variant))
    out = []
    for case, calls in zip(row.cases, row.calls, strict=True):
        said = f"{calls[0].name}({calls[0].arguments})" if calls else "no call"
        said = said.replace("\n", "\\n")  # a raw line break stays visible: JSON forbids it
        out.append(f"{case['question'][:44]:<44} -> {said[:70]}")
    return out
