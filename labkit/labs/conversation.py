"""08_context: the frozen long conversation, its probes and the three compaction strategies.

Outside the lessons (see labkit.labs).
"""

import json
import logging
from pathlib import Path

from ..config import DEFAULT_MODEL, EVALS_DIR
from ..context import ORDER, compact, gather, structure
from ..models import (
    Message,
    ToolCall,
)
from ..tokens import count as count_tokens

# ---------------------------------------------------------------- 08_context: a long conversation

CONVERSATION = EVALS_DIR / "long_conversation.json"


def load_conversation(path=CONVERSATION) -> dict:
    """The frozen long conversation: {"messages": [Message], "probes", "summary", "notes", ...}.

    Example: load_conversation()["probes"][0]["question"]  ->  "What is the hotel booking ..."
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data["messages"] = [
        Message(
            m["role"],
            m["content"],
            [ToolCall(c["id"], c["name"], c["arguments"]) for c in m.get("tool_calls", [])],
            m.get("tool_call_id"),
        )
        for m in data["messages"]
    ]
    return data


def probes_kept(messages, probes) -> list[str]:
    """The ids of the probes whose answer is still somewhere in the messages (any alias, any case).

    It checks that the answer is there to read, not that a model would read it right.
    Example: probes_kept(compaction.messages, conversation["probes"])  ->  ["rooms", "diet"]
    """
    text = "\n".join(m.content for m in messages).casefold()
    return [p["id"] for p in probes if any(a.casefold() in text for a in p["answers"])]


def plot_sections(reports: dict, title: str = "Tokens per section of the context"):
    """A stacked bar chart: one bar per report (labelled by its key), one colour per section.

    Example: plot_sections({"budget 600": small.report, "budget 1,500": large.report})
    """

    # a first import builds matplotlib's font cache and logs that it does: not the learner's news
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    labels, bottom = list(reports), [0] * len(reports)
    for section in ORDER:  # the reading order of the context
        heights = [r.sections.get(section, 0) for r in reports.values()]
        if any(heights):
            axes.bar(labels, heights, bottom=bottom, label=section)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.plot(labels, [r.budget for r in reports.values()], "k_", markersize=40, label="budget")
    axes.set(title=title, xlabel="context built", ylabel="tokens (as the model counts them)")
    axes.legend(
        loc="upper left", bbox_to_anchor=(1, 1), fontsize="small", frameon=False, markerscale=0.4
    )
    plt.close(figure)  # shown once, where it is returned, never again by the inline backend
    return figure


def compaction_table(conversation, summarize, notes=(), threshold=1_000, model=DEFAULT_MODEL):
    """The three strategies on one conversation: truncate, summarise, summarise + notes, each with
    its tokens before and after and the probes whose answers survive.

    Example: compaction_table(load_conversation(), summarizer(model), notes=book.list())
    """
    history, keep_last = conversation["messages"], conversation["keep_last"]
    probes = conversation["probes"]
    task = " ".join(p["question"] for p in probes)
    noted = [b for b in gather(task, notes=notes, model=model) if b.section == "notes"]
    rows = []
    for name, how, extra in (
        ("truncate", None, []),
        ("summarise", summarize, []),
        ("summarise + notes", summarize, structure(noted)[:1]),
    ):
        kept = compact(history, how, threshold, keep_last, [b.text for b in noted] if extra else ())
        sent = extra + kept.messages
        rows.append(
            {
                "strategy": name,
                "before": kept.tokens_before,
                "after": count_tokens(sent, model),
                "probes": probes_kept(sent, probes),
                "lost": kept.lost,
            }
        )
    return rows
