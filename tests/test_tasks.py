"""labkit.tasks tested as a grader: every reference passes; for every task, plausible wrong
solutions fail with the hint of the mistake they make, and correct solutions written another way
pass (mutation testing of the checker: a checker that lets one through fails here)."""

import json
import re
import string
import sys
from types import SimpleNamespace

import pytest

from labkit import ToolCall, ToolError, check, redact
from labkit.check import broken_rules
from labkit.context import split_turns, truncate
from labkit.evals import normalize_answer
from labkit.guardrails import same_call
from labkit.live import read_output
from labkit.loop import run
from labkit.mcp import changed_tools, pin
from labkit.memory import record_problems
from labkit.models import Message, ScriptedModel, call, system, tool_message, user
from labkit.models import turn as one_turn
from labkit.rag import rrf
from labkit.runtime import ToolRuntime
from labkit.schema import json_equal
from labkit.swe import resolved
from labkit.tasks import TASKS, fit_turns, status_after, unanswered
from labkit.toolbox import calculate
from labkit.tools import tool

REFERENCES = {
    "01_setup": read_output,
    "02_tools": json_equal,
    "03_memory": record_problems,
    "04_loop": unanswered,
    "05_guardrails": same_call,
    "06_rag": rrf,
    "07_runtime": status_after,
    "08_context": fit_turns,
    "09_mcp": changed_tools,
    "10_evals": normalize_answer,
    "11_coding_agent": resolved,
}


@pytest.mark.parametrize("notebook", sorted(REFERENCES))
def test_each_reference_passes_its_own_cases_rules_and_generated_inputs(notebook):
    assert TASKS[notebook].reference is REFERENCES[notebook]
    result = check(REFERENCES[notebook], notebook, quiet=True)
    assert result and result.lines[-2].endswith("generated inputs")


def test_every_notebook_has_a_task():
    assert sorted(TASKS) == sorted(REFERENCES)


@pytest.mark.parametrize("notebook", sorted(REFERENCES))
def test_rules_come_in_the_order_the_cases_teach_them(notebook):
    """A case's rule is never before an earlier case's: the first hint shown is the first rule."""
    task = TASKS[notebook]
    order = [rule.name for rule in task.rules]
    named = [order.index(case.rule) for case in task.cases]
    assert named == sorted(named) and len(set(order)) == len(order)


# ---------------------------------------------------------------- 07 and 08: references written in
# tasks.py for a case the lesson explains but does not code, checked against the lesson's code


ERRORS = [None, ConnectionError("reset"), TimeoutError("slow"), ToolError("declined"), KeyError()]
DATA = [None, {"refund_id": "R-1"}, {"status": "unknown"}, {"status": "ok"}, "unknown", [1]]


def acting(risk, error, data):
    @tool(name="act", risk=risk)
    def act() -> object:
        """Act: raise `error`, else return `data`."""
        if error is not None:
            raise error
        return data

    return act


@pytest.mark.parametrize("risk", ["low", "medium", "high"])
def test_status_after_is_what_the_runtime_records(risk, tmp_path):
    for n, (error, data) in enumerate((e, d) for e in ERRORS for d in DATA):
        runtime = ToolRuntime(
            [acting(risk, error, data)], max_risk="high", store=tmp_path / f"{risk}.db"
        )
        result = runtime.dispatch("act", {}, f"op_{n}")
        runtime.store.close()
        assert result["status"] == status_after(risk, error, data), (error, data)


@pytest.mark.parametrize("last", [0, 1, 2, 3, 5])
def test_fit_turns_is_truncate_when_every_message_costs_one(last):
    call = ToolCall("call_1", "f", "{}")
    history = [system("Be brief."), user("a"), Message("assistant", "", [call])]
    history += [tool_message(call, "{}"), Message("assistant", "b"), user("c"), user("d")]
    turns = split_turns(history)[::-1][:last]
    budget = sum(len(turn) for turn in turns)
    assert fit_turns(history, budget, lambda m: 1) == truncate(history, last)


# ---------------------------------------------------------------- wrong and correct solutions

PUNCTUATION = str.maketrans("", "", string.punctuation)


def fc(call_id, name="f", arguments="{}"):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def msg(*texts):
    return {"type": "message", "content": [{"type": "output_text", "text": t} for t in texts]}


def calls_of(items):
    return [
        ToolCall(i["call_id"], i["name"], i["arguments"])
        for i in items
        if i["type"] == "function_call"
    ]


def text_of(item):
    return "".join(p["text"] for p in item["content"] if p["type"] == "output_text")


# 01_setup ---------------------------------------------------------------------------------------


def every_item_text(items):  # a reasoning item's summary leaks into the answer
    text = ""
    for item in items:
        for part in item.get("content", []) + item.get("summary", []):
            text += part.get("text", "")
    return text, calls_of(items)


def call_id_from_id(items):  # the item's id, not its call_id
    calls = [ToolCall(i.get("id"), i["name"], i["arguments"]) for i in items if "name" in i]
    return "".join(text_of(i) for i in items if i["type"] == "message"), calls


def first_part_only(items):
    texts = [i["content"][0]["text"] for i in items if i["type"] == "message" and i["content"]]
    return "".join(texts), calls_of(items)


def text_or_calls(items):  # a reply with text and calls loses its calls
    text = "".join(text_of(i) for i in items if i["type"] == "message")
    return (text, []) if text else ("", calls_of(items))


def calls_reversed(items):
    calls = []
    for item in items:
        if item["type"] == "function_call":
            calls.insert(0, ToolCall(item["call_id"], item["name"], item["arguments"]))
    return "".join(text_of(i) for i in items if i["type"] == "message"), calls


def fields_swapped(items):
    calls = [
        ToolCall(i["name"], i["call_id"], i["arguments"])
        for i in items
        if i["type"] == "function_call"
    ]
    return "".join(text_of(i) for i in items if i["type"] == "message"), calls


def read_output_by_type(items):
    text, calls = [], []
    handlers = {
        "message": lambda i: text.append(text_of(i)),
        "function_call": lambda i: calls.append(ToolCall(i["call_id"], i["name"], i["arguments"])),
    }
    for item in items:
        handlers.get(item["type"], lambda i: None)(item)
    return "".join(text), calls


def read_output_match(items):
    text, calls = "", []
    for item in items:
        match item:
            case {"type": "message", "content": parts}:
                text += "".join(p["text"] for p in parts if p["type"] == "output_text")
            case {"type": "function_call", "call_id": i, "name": n, "arguments": a}:
                calls.append(ToolCall(i, n, a))
    return text, calls


# 02_tools ---------------------------------------------------------------------------------------


def strict_types(a, b):  # 1 and 1.0 are one JSON number
    return type(a) is type(b) and a == b


def zip_no_length(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return all(zip_no_length(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(zip_no_length(a[k], b[k]) for k in a)
    return a == b


def bool_top_level_only(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def arrays_only(a, b):  # recurses into arrays, objects compared by Python
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(arrays_only(x, y) for x, y in zip(a, b, strict=False))
    return a == b


def keys_of_a_only(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(keys_of_a_only(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return all(k in b and keys_of_a_only(a[k], b[k]) for k in a)
    return a == b


def arrays_as_bags(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(any(arrays_as_bags(x, y) for y in b) for x in a)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(arrays_as_bags(a[k], b[k]) for k in a)
    return a == b


def tagged(value):
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, list):
        return ("array", tuple(map(tagged, value)))
    if isinstance(value, dict):
        return ("object", frozenset((k, tagged(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def json_equal_tagged(a, b):
    return tagged(a) == tagged(b)


def json_equal_match(a, b):
    match a, b:
        case bool(), bool():
            return a == b
        case (bool(), _) | (_, bool()):
            return False
        case int() | float(), int() | float():
            return a == b
        case list(), list():
            return len(a) == len(b) and all(map(json_equal_match, a, b))
        case dict(), dict():
            return set(a) == set(b) and all(json_equal_match(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# 03_memory --------------------------------------------------------------------------------------


def validator(
    truthy_confirmed=False,
    tenant_any_text=False,
    bool_is_number=False,
    content_unstripped=False,
    first_problem_only=False,
    ttl_indexed=False,
    ttl_from_zero=False,
    ends_excluded=False,
):
    """A memory validator, right unless told to make one of a learner's mistakes."""

    def number(value, low, high):
        kinds = (int, float) if bool_is_number else (int, float)
        ok = isinstance(value, kinds) and (bool_is_number or not isinstance(value, bool))
        return ok and (low < value < high if ends_excluded else low <= value <= high)

    def validate(record):
        wrong = []
        confirmed = record.get("confirmed")
        if not (confirmed if truthy_confirmed else confirmed is True):
            wrong.append("confirmed")
        tenant = record.get("tenant")
        if not (isinstance(tenant, str) and (tenant if tenant_any_text else tenant.strip())):
            wrong.append("tenant")
        if record.get("kind") not in ("preference", "fact", "episode", "note"):
            wrong.append("kind")
        content = record.get("content")
        text = content if content_unstripped or not isinstance(content, str) else content.strip()
        too_long = isinstance(content, str) and len(content) >= (500 if ends_excluded else 501)
        if not isinstance(content, str) or not text or too_long:
            wrong.append("content")
        elif redact(content) != content:
            wrong.append("content")
        if record.get("source") not in ("user", "assistant", "tool"):
            wrong.append("source")
        for name in ("confidence", "importance"):
            if not number(record.get(name), 0, 1):
                wrong.append(name)
        ttl = record["ttl_days"] if ttl_indexed else record.get("ttl_days")
        if not number(ttl, 0 if ttl_from_zero else 1, 365):
            wrong.append("ttl_days")
        return wrong[:1] if first_problem_only else wrong

    return validate


def notebook_stub(record):
    wrong = []
    if not record.get("confirmed"):
        wrong.append("confirmed")
    if record.get("kind") not in ("preference", "fact", "episode", "note"):
        wrong.append("kind")
    return wrong


def validate_by_table(record):
    def unit(v):
        return type(v) in (int, float) and 0 <= v <= 1

    def text(v):
        return isinstance(v, str) and 0 < len(v.strip()) and len(v) <= 500 and redact(v) == v

    checks = {
        "tenant": lambda v: isinstance(v, str) and v.strip() != "",
        "kind": lambda v: v in {"preference", "fact", "episode", "note"},
        "content": text,
        "source": lambda v: v in {"user", "assistant", "tool"},
        "confidence": unit,
        "importance": unit,
        "ttl_days": lambda v: type(v) in (int, float) and 1 <= v <= 365,
        "confirmed": lambda v: v is True,
    }
    return {name for name, ok in checks.items() if not ok(record.get(name))}


# 04_loop ----------------------------------------------------------------------------------------


def asst(*ids):
    return Message("assistant", "", [ToolCall(i, "get_weather", "{}") for i in ids])


def out(i):
    return tool_message(ToolCall(i, "get_weather", "{}"), '{"ok": true}')


def asked_ids(messages):
    return [c.id for m in messages if m.role == "assistant" for c in m.tool_calls]


def tool_ids(messages):
    return [m.tool_call_id for m in messages if m.role == "tool"]


def last_turn_only(messages):  # the notebook's stub
    last = [m for m in messages if m.role == "assistant"][-1:]
    return [c.id for m in last for c in m.tool_calls if c.id not in tool_ids(messages)]


def the_next_message(messages):
    """Call k of a reply is answered only by the k-th message after it."""
    missing = []
    for i, m in enumerate(messages):
        for k, c in enumerate(m.tool_calls if m.role == "assistant" else []):
            after = messages[i + 1 + k] if i + 1 + k < len(messages) else None
            if not (after and after.role == "tool" and after.tool_call_id == c.id):
                missing.append(c.id)
    return missing


def ids_as_a_set(messages):
    return sorted(set(asked_ids(messages)) - set(tool_ids(messages)))


def the_calls(messages):
    return [c for m in messages if m.role == "assistant" for c in m.tool_calls
            if c.id not in tool_ids(messages)]  # fmt: skip


def either_side(messages):
    asked, answered = asked_ids(messages), tool_ids(messages)
    return [i for i in asked if i not in answered] + [i for i in answered if i not in asked]


def the_answered(messages):
    return [i for i in asked_ids(messages) if i in tool_ids(messages)]


def first_result_only(messages):
    first = next((m.tool_call_id for m in messages if m.role == "tool"), None)
    return [i for i in asked_ids(messages) if i != first]


def last_two_turns(messages):  # right on every named case: only generated inputs catch it
    last = [m for m in messages if m.role == "assistant"][-2:]
    return [c.id for m in last for c in m.tool_calls if c.id not in tool_ids(messages)]


def pending_dict(messages):
    pending = {}
    for m in messages:
        if m.role == "assistant":
            pending.update(dict.fromkeys(c.id for c in m.tool_calls))
        elif m.role == "tool":
            pending.pop(m.tool_call_id, None)
    return list(pending)


def with_any(messages):
    unanswered = []
    for m in messages:
        for c in m.tool_calls:
            if not any(n.role == "tool" and n.tool_call_id == c.id for n in messages):
                unanswered.append(c.id)
    return unanswered


# 05_guardrails ----------------------------------------------------------------------------------


def parsed_python_equal(a, b):  # Python says {"n": 1} == {"n": True}
    try:
        return a.name == b.name and json.loads(a.arguments) == json.loads(b.arguments)
    except json.JSONDecodeError:
        return a.name == b.name and a.arguments == b.arguments


def dumped_sorted(a, b):  # "1" and "1.0" are two texts
    def text(call):
        try:
            return json.dumps(json.loads(call.arguments), sort_keys=True)
        except json.JSONDecodeError:
            return "unparsed " + call.arguments

    return a.name == b.name and text(a) == text(b)


def name_ignored(a, b):
    try:
        return json_equal(json.loads(a.arguments), json.loads(b.arguments))
    except json.JSONDecodeError:
        return a.arguments == b.arguments


def lower_cased(a, b):
    try:
        x, y = json.loads(a.arguments.lower()), json.loads(b.arguments.lower())
        return a.name == b.name and json_equal(x, y)
    except json.JSONDecodeError:
        return a.name == b.name and a.arguments == b.arguments


def broken_never_same(a, b):
    try:
        return a.name == b.name and json_equal(json.loads(a.arguments), json.loads(b.arguments))
    except json.JSONDecodeError:
        return False


def broken_always_same(a, b):
    try:
        return a.name == b.name and json_equal(json.loads(a.arguments), json.loads(b.arguments))
    except json.JSONDecodeError:
        return a.name == b.name


def same_call_parsed(a, b):
    def parsed(call):
        try:
            return ("json", json.loads(call.arguments))
        except ValueError:
            return ("text", call.arguments)

    (kind_a, x), (kind_b, y) = parsed(a), parsed(b)
    return (
        a.name == b.name and kind_a == kind_b and (json_equal(x, y) if kind_a == "json" else x == y)
    )


def same_call_tagged(a, b):
    try:
        x, y = tagged(json.loads(a.arguments)), tagged(json.loads(b.arguments))
    except json.JSONDecodeError:
        x, y = a.arguments, b.arguments
    return (a.name, x) == (b.name, y)


# 06_rag -----------------------------------------------------------------------------------------


def rrf_with(start=1, dedupe=True, use_k=True, combine=None, order=None, ids=None):
    """A fusion, right unless told to make one of a learner's mistakes."""

    def fuse(rankings, k=60):
        scores = {}
        for ranking in rankings:
            ranking = list(dict.fromkeys(ranking)) if dedupe else ranking
            for rank, item in enumerate(ranking, start):
                item = ids(item) if ids else item
                score = 1 / ((k if use_k else 60) + rank)
                scores[item] = (
                    combine(scores.get(item), score) if combine else (scores.get(item, 0.0) + score)
                )
        return sorted(scores.items(), key=order or (lambda pair: -pair[1]))

    return fuse


def rrf_seen_once_overall(rankings, k=60):
    scores, seen = {}, set()
    for ranking in rankings:
        for rank, item in enumerate(dict.fromkeys(ranking), 1):
            if item not in seen:
                scores[item] = 1 / (k + rank)
                seen.add(item)
    return sorted(scores.items(), key=lambda pair: -pair[1])


def rrf_counter(rankings, k=60):
    from collections import Counter

    scores = Counter()
    first = {}
    for ranking in rankings:
        for rank, item in enumerate(list(dict.fromkeys(ranking)), start=1):
            first.setdefault(item, len(first))
            scores[item] += 1.0 / (rank + k)
    return [(i, scores[i]) for i in sorted(scores, key=lambda i: (-scores[i], first[i]))]


def rrf_defaultdict(rankings, k=60):
    from collections import defaultdict

    scores = defaultdict(float)
    for ranking in rankings:
        seen = set()
        rank = 0
        for item in ranking:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] += 1 / (k + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)


# 07_runtime -------------------------------------------------------------------------------------


def every_error_unknown(risk, error, data):  # the Build-it's first version
    return "succeeded" if error is None else "needs_reconcile"


def every_error_failed(risk, error, data):  # "retry on failure" thinking
    return "succeeded" if error is None else "failed"


def status_with(high_only=False, risk_ignored=False, timeout_failed=False, data_ignored=False,
                data_any_risk=False, data_unchecked=False):  # fmt: skip
    """A status rule, right unless told to make one of a learner's mistakes."""

    def status(risk, error, data):
        writes = risk == "high" if high_only else risk != "low"
        writes = writes or risk_ignored
        if error is None:
            if data_ignored:
                return "succeeded"
            unknown = (data_unchecked or isinstance(data, dict)) and data.get("status") == "unknown"
            return "needs_reconcile" if unknown and (writes or data_any_risk) else "succeeded"
        if isinstance(error, ToolError) or not writes:
            return "failed"
        if timeout_failed and isinstance(error, TimeoutError):
            return "failed"
        return "needs_reconcile"

    return status


def status_table(risk, error, data):
    if error is not None:
        known = isinstance(error, ToolError) or risk == "low"
        return "failed" if known else "needs_reconcile"
    said_unknown = type(data) is dict and data.get("status", None) == "unknown"
    return "needs_reconcile" if said_unknown and risk in ("medium", "high") else "succeeded"


def status_nested(risk, error, data):
    reads_only = risk == "low"
    if isinstance(error, Exception):
        if isinstance(error, ToolError):
            return "failed"
        return "failed" if reads_only else "needs_reconcile"
    if not reads_only and isinstance(data, dict):
        if data.get("status") == "unknown":
            return "needs_reconcile"
    return "succeeded"


# 08_context -------------------------------------------------------------------------------------


def fit_with(by_message=False, oldest_first=False, stop=False, strict=False, newest_order=False,
             keep_system=False, cost_is_len=False):  # fmt: skip
    """A turn fitter, right unless told to make one of a learner's mistakes."""

    def turns_of(messages):
        if by_message:
            return [[m] for m in messages if m.role != "system"]
        if keep_system:
            turns = []
            for m in messages:
                if m.role == "tool" and turns and turns[-1][0].tool_calls:
                    turns[-1].append(m)
                else:
                    turns.append([m])
            return turns
        return split_turns(messages)

    def fit(messages, budget, cost):
        cost = (lambda m: len(m.content)) if cost_is_len else cost
        turns, kept, used = turns_of(messages), [], 0
        for turn in turns if oldest_first else reversed(turns):
            size = sum(cost(m) for m in turn)
            if (used + size < budget) if strict else (used + size <= budget):
                kept.append(turn)
                used += size
            elif stop:
                break
        ordered = kept if oldest_first != newest_order else kept[::-1]
        return [m for turn in ordered for m in turn]

    return fit


def fit_by_index(messages, budget, cost):
    turns = split_turns(messages)
    chosen, left = set(), budget
    for i in range(len(turns) - 1, -1, -1):
        size = sum(map(cost, turns[i]))
        if size <= left:
            chosen.add(i)
            left -= size
    return [m for i, turn in enumerate(turns) if i in chosen for m in turn]


def fit_own_turns(messages, budget, cost):
    turns = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool" and turns and turns[-1][0].tool_calls:
            turns[-1] = turns[-1] + [m]
        else:
            turns.append([m])
    kept = []
    for turn in turns[::-1]:
        size = sum(cost(m) for m in turn)
        if size <= budget:
            budget -= size
            kept = turn + kept
    return kept


# 09_mcp -----------------------------------------------------------------------------------------


def refuses_new(pins, listed):
    return [t.name for t in listed if pins.get(t.name) != pin(t)]


def description_only(pins, listed):
    def described(t):  # the pin of the tool as approved, with only its description new
        return pin(SimpleNamespace(name=t.name, description=t.description, input_schema=SCHEMA))

    return [t.name for t in listed if t.name in pins and pins[t.name] != described(t)]


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def as_a_set(pins, listed):
    return {t.name for t in listed if t.name in pins and pins[t.name] != pin(t)}


def sorted_names(pins, listed):
    return sorted(t.name for t in listed if t.name in pins and pins[t.name] != pin(t))


def unchanged_ones(pins, listed):
    return [t.name for t in listed if t.name in pins and pins[t.name] == pin(t)]


def walks_the_pins(pins, listed):
    now = {t.name: pin(t) for t in listed}
    return [name for name, approved in pins.items() if now.get(name) != approved]


def changed_by_dict(pins, listed):
    now = [(t.name, pin(t)) for t in listed]
    return [name for name, p in now if pins.get(name, p) != p]


def changed_loop(pins, listed):
    changed = []
    for t in listed:
        approved = pins.get(t.name)
        if approved is not None and approved != pin(t):
            changed.append(t.name)
    return changed


# 10_evals ---------------------------------------------------------------------------------------


def normalize_stub(text):
    return text.replace(" ", "").lower()


def articles_inside_words(text):
    return re.sub(r"\s|a|an|the", "", text.lower()).translate(PUNCTUATION)


def articles_case_sensitive(text):
    dropped = re.sub(r"\b(a|an|the)\b", " ", text)
    text = dropped if dropped.strip() else text
    return re.sub(r"\s", "", text).lower().translate(PUNCTUATION)


def only_article_dropped(text):
    text = re.sub(r"\b(a|an|the)\b", " ", text, flags=re.I)
    return re.sub(r"\s", "", text).lower().translate(PUNCTUATION)


def spaces_first(text):
    text = re.sub(r"\s", "", text)
    dropped = re.sub(r"\b(a|an|the)\b", "", text, flags=re.I)
    return (dropped or text).lower().translate(PUNCTUATION)


def punctuation_kept(text):
    dropped = re.sub(r"\b(a|an|the)\b", " ", text, flags=re.I)
    return re.sub(r"\s", "", dropped if dropped.strip() else text).lower()


def ascii_white_space(text):
    dropped = re.sub(r"\b(a|an|the)\b", " ", text, flags=re.I)
    text = dropped if dropped.strip() else text
    return re.sub(r"[ \t\n\r]", "", text).lower().translate(PUNCTUATION)


def normalize_inline_flag(text):
    without = re.sub(r"(?i)\b(?:the|an|a)\b", "", text)
    if without.strip():
        text = without
    return "".join(text.split()).lower().translate(PUNCTUATION)


def normalize_by_characters(text):
    without = re.compile(r"\b(the|an|a)\b", re.IGNORECASE).sub(" ", text)
    text = without if not without.isspace() and without else text
    return "".join(c for c in text.lower() if not c.isspace() and c not in string.punctuation)


# ---------------------------------------------------------------- 11_coding_agent: SWE-bench's rule

F, K, X = "tests/test_units.py::test_l_to_ml", "tests/test_units.py::test_kg_to_g", "test_scale"
SWE = "11_coding_agent"


def only_fail_to_pass(results, fail_to_pass, pass_to_pass):
    return all(results.get(t) == "passed" for t in fail_to_pass)


def indexes_results(results, fail_to_pass, pass_to_pass):
    return all(results[t] == "passed" for t in fail_to_pass + pass_to_pass)


def not_failed_is_passed(results, fail_to_pass, pass_to_pass):
    return all(results.get(t) != "failed" for t in fail_to_pass + pass_to_pass)


def not_failed_not_missing(results, fail_to_pass, pass_to_pass):
    return all(t in results and results[t] != "failed" for t in fail_to_pass + pass_to_pass)


def skip_counts(results, fail_to_pass, pass_to_pass):
    return all(results.get(t) in ("passed", "skipped") for t in fail_to_pass + pass_to_pass)


def every_test_that_ran(results, fail_to_pass, pass_to_pass):
    listed = fail_to_pass + pass_to_pass
    return all(o == "passed" for o in results.values()) and all(t in results for t in listed)


def any_instead_of_all(results, fail_to_pass, pass_to_pass):
    return any(results.get(t) == "passed" for t in fail_to_pass + pass_to_pass)


def nothing_listed_nothing_proved(results, fail_to_pass, pass_to_pass):
    listed = fail_to_pass + pass_to_pass
    return bool(listed) and all(results.get(t) == "passed" for t in listed)


def failures_list(results, fail_to_pass, pass_to_pass):
    return [t for t in fail_to_pass + pass_to_pass if results.get(t) != "passed"]


def resolved_by_sets(results, fail_to_pass, pass_to_pass):
    passed = {t for t, outcome in results.items() if outcome == "passed"}
    return set(fail_to_pass) | set(pass_to_pass) <= passed


def resolved_by_loop(results, fail_to_pass, pass_to_pass):
    for test in [*fail_to_pass, *pass_to_pass]:
        if results.get(test, "missing") != "passed":
            return False
    return True


# -------------------------------------------------------------------------------------------------

C = ToolCall("call_1", "f", '{"a": 1, "b": 2}')
# name: (notebook, wrong solution, the rule whose hint it must get first, an input it gets wrong)
WRONG = {
    "01 text from every item": ("01_setup", every_item_text, "other types",
                                ([{"type": "reasoning", "summary": [{"text": "x"}]}],)),
    "01 call id from id": ("01_setup", call_id_from_id, "calls", ([fc("call_1")],)),
    "01 first part only": ("01_setup", first_part_only, "parts", ([msg("a", "b")],)),
    "01 text or calls": ("01_setup", text_or_calls, "both", ([msg("a"), fc("call_1")],)),
    "01 calls reversed": ("01_setup", calls_reversed, "order", ([fc("call_1"), fc("call_2")],)),
    "01 fields swapped": ("01_setup", fields_swapped, "calls", ([fc("call_1")],)),
    "02 Python's ==": ("02_tools", lambda a, b: a == b, "bool is no number", (1, True)),
    "02 strict types": ("02_tools", strict_types, "one number type", (1, 1.0)),
    "02 zip without length": ("02_tools", zip_no_length, "array length", ([1, 2], [1, 2, 3])),
    "02 bool at the top only": ("02_tools", bool_top_level_only, "inside arrays", ([True], [1])),
    "02 objects by Python": ("02_tools", arrays_only, "inside objects", ({"a": 0}, {"a": False})),
    "02 keys of a only": ("02_tools", keys_of_a_only, "object keys", ({}, {"a": 1})),
    "02 arrays as bags": ("02_tools", arrays_as_bags, "arrays item by item", ([1, 2], [2, 1])),
    "03 the notebook's stub": ("03_memory", notebook_stub, "exactly True", None),
    "03 truthy confirmed": ("03_memory", validator(truthy_confirmed=True), "exactly True", None),
    "03 blank tenant": ("03_memory", validator(tenant_any_text=True), "tenant", None),
    "03 bool as a number": ("03_memory", validator(bool_is_number=True), "bool is no number", None),
    "03 content unstripped": ("03_memory", validator(content_unstripped=True), "blank content",
                              None),
    "03 first problem only": ("03_memory", validator(first_problem_only=True), "every problem",
                              None),
    "03 ttl read by index": ("03_memory", validator(ttl_indexed=True), "ttl required", None),
    "03 ttl from zero": ("03_memory", validator(ttl_from_zero=True), "ttl range", None),
    "03 ends excluded": ("03_memory", validator(ends_excluded=True), "ends allowed", None),
    "04 the notebook's stub": ("04_loop", last_turn_only, "every turn",
                               ([asst("call_1"), asst("call_2")],)),
    "04 the next message": ("04_loop", the_next_message, "any order",
                            ([asst("call_1", "call_2"), out("call_2"), out("call_1")],)),
    "04 a set": ("04_loop", ids_as_a_set, "order asked", ([asst("call_2", "call_1")],)),
    "04 the calls": ("04_loop", the_calls, "a list", ([asst("call_1")],)),
    "04 either side": ("04_loop", either_side, "only calls", ([out("call_9")],)),
    "04 the answered ones": ("04_loop", the_answered, "answered calls",
                             ([asst("call_1"), out("call_1")],)),
    "04 first result only": ("04_loop", first_result_only, "any order",
                             ([asst("call_1", "call_2"), out("call_2"), out("call_1")],)),
    "05 compares the text": ("05_guardrails", lambda a, b: a == b, "keys in another order",
                             (C, ToolCall("call_1", "f", '{"b": 2, "a": 1}'))),
    "05 Python's == on parsed": ("05_guardrails", parsed_python_equal, "1 and true",
                                 (ToolCall("c", "f", '{"n": 1}'),
                                  ToolCall("c", "f", '{"n": true}'))),
    "05 dumped and sorted": ("05_guardrails", dumped_sorted, "1 and 1.0",
                             (ToolCall("c", "f", '{"n": 1}'), ToolCall("c", "f", '{"n": 1.0}'))),
    "05 name ignored": ("05_guardrails", name_ignored, "another tool",
                        (C, ToolCall("call_1", "g", C.arguments))),
    "05 lower-cased": ("05_guardrails", lower_cased, "values keep their case",
                       (ToolCall("c", "f", '{"s": "A"}'), ToolCall("c", "f", '{"s": "a"}'))),
    "05 broken never same": ("05_guardrails", broken_never_same, "broken JSON written twice",
                             (ToolCall("c", "f", "{"), ToolCall("c", "f", "{"))),
    "05 broken always same": ("05_guardrails", broken_always_same, "broken JSON and valid JSON",
                              (ToolCall("c", "f", "{"), ToolCall("c", "f", "{}"))),
    "06 ranks from 0": ("06_rag", rrf_with(start=0, dedupe=False), "ranks from 1", ([["a"]],)),
    "06 no dedupe": ("06_rag", rrf_with(dedupe=False), "repeats once", ([["a", "a"]],)),
    "06 k ignored": ("06_rag", rrf_with(use_k=False), "use k", ([["a"]], 1)),
    "06 ties by id": ("06_rag", rrf_with(order=lambda p: (-p[1], p[0])), "ties first-seen",
                      ([["b"], ["a"]],)),
    "06 ties by id, reversed": ("06_rag", rrf_with(order=lambda p: (-p[1], -ord(p[0][0]))),
                                "ties first-seen", ([["a"], ["b"]],)),
    "06 max, not sum": ("06_rag", rrf_with(combine=lambda old, new: max(old or 0, new)), "add up",
                        ([["a", "b"], ["b"]],)),
    "06 worst first": ("06_rag", rrf_with(order=lambda p: p[1]), "best first", ([["a", "b"]],)),
    "06 ids as text": ("06_rag", rrf_with(ids=str), "any ids", ([[1]],)),
    "06 once overall": ("06_rag", rrf_seen_once_overall, "add up", ([["a", "b"], ["b"]],)),
    "07 every error unknown": ("07_runtime", every_error_unknown, "tool error",
                               ("high", ToolError("declined"), None)),
    "07 every error failed": ("07_runtime", every_error_failed, "may have happened",
                              ("high", ConnectionError(), None)),
    "07 only high writes": ("07_runtime", status_with(high_only=True), "medium writes",
                            ("medium", ConnectionError(), None)),
    "07 risk ignored": ("07_runtime", status_with(risk_ignored=True), "reads change nothing",
                        ("low", ConnectionError(), None)),
    "07 timeout failed": ("07_runtime", status_with(timeout_failed=True), "timeouts",
                          ("high", TimeoutError(), None)),
    "07 data ignored": ("07_runtime", status_with(data_ignored=True), "answered unknown",
                        ("high", None, {"status": "unknown"})),
    "07 data at any risk": ("07_runtime", status_with(data_any_risk=True), "reads report data",
                            ("low", None, {"status": "unknown"})),
    "07 data unchecked": ("07_runtime", status_with(data_unchecked=True), "any data",
                          ("high", None, "unknown")),
    "08 by message": ("08_context", fit_with(by_message=True), "whole turns", None),
    "08 oldest first": ("08_context", fit_with(oldest_first=True), "newest first", None),
    "08 stops at the first too big": ("08_context", fit_with(stop=True), "skip, do not stop", None),
    "08 strict budget": ("08_context", fit_with(strict=True), "exact fit", None),
    "08 newest first out": ("08_context", fit_with(newest_order=True), "in order", None),
    "08 keeps system": ("08_context", fit_with(keep_system=True), "no system", None),
    "08 len, not cost": ("08_context", fit_with(cost_is_len=True), "use cost", None),
    "09 refuses new tools": ("09_mcp", refuses_new, "nothing approved yet", None),
    "09 description only": ("09_mcp", description_only, "a new parameter", None),
    "09 a set": ("09_mcp", as_a_set, "a list", None),
    "09 sorted": ("09_mcp", sorted_names, "two changed, in listing order", None),
    "09 unchanged ones": ("09_mcp", unchanged_ones, "the same tools", None),
    "09 walks the pins": ("09_mcp", walks_the_pins, "a tool added, one removed", None),
    "10 the notebook's stub": ("10_evals", normalize_stub, "white space", ("a\tb",)),
    "10 articles inside words": ("10_evals", articles_inside_words, "whole words", ("paris",)),
    "10 articles case-sensitive": ("10_evals", articles_case_sensitive, "articles in any case",
                                   ("THE END",)),
    "10 only article dropped": ("10_evals", only_article_dropped, "only an article", ("A",)),
    "10 spaces first": ("10_evals", spaces_first, "articles", ("the cup",)),
    "10 punctuation kept": ("10_evals", punctuation_kept, "punctuation", ("a.b",)),
    "10 ASCII white space": ("10_evals", ascii_white_space, "white space", ("a\u00a0b",)),
    "11 only FAIL_TO_PASS": (SWE, only_fail_to_pass, "the fix broke a test that passed",
                             ({F: "passed", K: "failed"}, [F], [K])),
    "11 indexes the results": (SWE, indexes_results, "a listed test did not run",
                               ({}, [F], [])),
    "11 not failed is passed": (SWE, not_failed_is_passed, "a listed test did not run",
                                ({}, [F], [])),
    "11 not failed, not missing": (SWE, not_failed_not_missing,
                                   "an error is not a pass", ({F: "error"}, [F], [])),
    "11 a skip counts": (SWE, skip_counts, "a skip is not a pass",
                         ({F: "skipped"}, [F], [])),
    "11 every test that ran": (SWE, every_test_that_ran, "a test in neither list fails",
                               ({F: "passed", X: "failed"}, [F], [])),
    "11 any instead of all": (SWE, any_instead_of_all, "the failing test still fails",
                              ({F: "failed", K: "passed"}, [F], [K])),
    "11 nothing listed, nothing proved": (SWE, nothing_listed_nothing_proved,
                                          "nothing listed", ({}, [], [])),
    "11 the list of failures": (SWE, failures_list, "a bool",
                                ({F: "failed"}, [F], [])),
}  # fmt: skip

RIGHT = {
    "01 by type": ("01_setup", read_output_by_type),
    "01 match": ("01_setup", read_output_match),
    "02 tagged": ("02_tools", json_equal_tagged),
    "02 match": ("02_tools", json_equal_match),
    "03 builder": ("03_memory", validator()),
    "03 table": ("03_memory", validate_by_table),
    "04 pending dict": ("04_loop", pending_dict),
    "04 any": ("04_loop", with_any),
    "05 parsed": ("05_guardrails", same_call_parsed),
    "05 tagged": ("05_guardrails", same_call_tagged),
    "06 builder": ("06_rag", rrf_with()),
    "06 counter": ("06_rag", rrf_counter),
    "06 defaultdict": ("06_rag", rrf_defaultdict),
    "07 builder": ("07_runtime", status_with()),
    "07 table": ("07_runtime", status_table),
    "07 nested": ("07_runtime", status_nested),
    "08 builder": ("08_context", fit_with()),
    "08 by index": ("08_context", fit_by_index),
    "08 own turns": ("08_context", fit_own_turns),
    "09 by dict": ("09_mcp", changed_by_dict),
    "09 loop": ("09_mcp", changed_loop),
    "10 inline flag": ("10_evals", normalize_inline_flag),
    "10 by characters": ("10_evals", normalize_by_characters),
    "11 sets": ("11_coding_agent", resolved_by_sets),
    "11 loop": ("11_coding_agent", resolved_by_loop),
}


@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_solution_fails_with_the_hint_of_its_mistake_first(name):
    notebook, wrong, rule, _ = WRONG[name]
    result = check(wrong, notebook, quiet=True)
    assert not result
    assert result.rules[0] == rule, result.lines
    first_hint = next(line for line in result.lines if "hint:" in line)
    task = TASKS[notebook]
    hints = {r.name: r.hint for r in task.rules}
    crash = {c.crash_hint for c in task.cases if c.crash_hint}
    assert first_hint.split("hint: ", 1)[1] in {hints[rule], *crash}, first_hint
    assert broken_rules(wrong, task)[0] == rule


@pytest.mark.parametrize("name", [n for n in WRONG if WRONG[n][3] is not None])
def test_a_wrong_solution_is_wrong_on_its_input(name):
    notebook, wrong, _, args = WRONG[name]
    task = TASKS[notebook]
    try:
        got = wrong(*args)
    except Exception:  # a crash is wrong too
        return
    compare = task.compare or (lambda g, e: g == e)
    assert not compare(got, task.reference(*args))


@pytest.mark.parametrize("name", RIGHT)
def test_a_correct_solution_written_another_way_passes(name):
    notebook, right = RIGHT[name]
    result = check(right, notebook, quiet=True)
    assert result, result.lines


@pytest.mark.parametrize("notebook", sorted(REFERENCES))
def test_every_task_has_six_wrong_and_two_correct_solutions(notebook):
    assert sum(w[0] == notebook for w in WRONG.values()) >= 6
    assert sum(r[0] == notebook for r in RIGHT.values()) >= 2


@pytest.mark.parametrize(
    "notebook, wrong",
    [("04_loop", last_two_turns), ("10_evals", ascii_white_space)],
    ids=["04 last two turns", "10 ASCII white space"],
)
def test_some_mistakes_only_the_generated_inputs_catch(notebook, wrong):
    result = check(wrong, notebook, quiet=True)
    assert result.passed == result.total - 1 and "generated inputs" in result.lines[-2]


def test_a_case_that_fails_only_because_of_an_earlier_mistake_says_so(capsys):
    check(rrf_with(start=0), "06_rag")  # one bug: ranks counted from 0
    out = capsys.readouterr().out
    assert out.count("hint: this case fails only because of the mistake in case 1") == 4
    for other in ("add up an id's", "use the k you were given", "ids can be any hashable"):
        assert other not in out


def test_a_hint_is_never_for_a_rule_the_function_follows(capsys):
    check(articles_inside_words, "10_evals")  # lowers the case; strips "a" inside "paris"
    out = capsys.readouterr().out
    assert "lower the case" not in out
    assert (
        "FAIL  1. lower case: expected 'paris', got 'pris'\n        hint: an article is a whole"
        in out
    )


def test_the_differential_line_shows_the_smallest_input_and_both_results(capsys):
    check(lambda a, b: a == b, "02_tools")
    line = next(x for x in capsys.readouterr().out.splitlines() if "generated inputs" in x)
    assert line.endswith(
        "on <lambda>([False], [0]) the reference returns False, yours returned True"
    )


def test_after_failing_cases_the_generated_input_names_no_rule():
    """04's stub looks at the last turn only: case 5 says so; its generated input may show that or
    another mistake, so the differential line names no rule."""
    result = check(last_turn_only, "04_loop", quiet=True)
    assert "generated inputs" in result.lines[-2]
    assert result.lines[-2].endswith(f"hint: {sys.modules['labkit.check'].AFTER_CASES}")
    assert result.rules == ["every turn"]


def test_unanswered_is_what_finish_answers_with_not_run():
    """The reference agrees with the loop: a run stopped by max_calls answers exactly the calls
    unanswered() finds with "not_run", and leaves none unanswered."""
    model = ScriptedModel([one_turn(*[call("calculate", expression=str(n)) for n in (1, 2, 3)])])
    result = run("x", model, [calculate], max_calls=2)
    not_run = [
        m.tool_call_id for m in result.messages if m.role == "tool" and "not_run" in m.content
    ]
    before = [m for m in result.messages if m.tool_call_id not in not_run]
    assert result.status == "tool_limit" and len(not_run) == 1
    assert unanswered(before) == not_run and unanswered(result.messages) == []


def test_an_exception_on_a_generated_input_is_one_line(capsys):
    def crashes_on_empty(items):
        return items[0]["type"] and ("", [])

    check(crashes_on_empty, "01_setup")
    out = capsys.readouterr().out
    assert "yours raised IndexError: list index out of range" in out and "Traceback" not in out


def test_the_generated_inputs_are_the_same_every_run():
    runs = [check(rrf_with(dedupe=False), "06_rag", quiet=True).lines for _ in range(2)]
    assert runs[0] == runs[1]


def test_the_turns_task_shows_each_message_by_its_role(capsys):
    check(fit_with(by_message=True), "08_context")
    shown = capsys.readouterr().out
    assert "got [tool call_1, assistant 'Light rain.']" in shown and "Message(" not in shown
