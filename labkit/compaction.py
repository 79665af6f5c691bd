"""Compaction of a long history: its turns, one marked summary of the older ones, the facts lost.

Built in 08_context; labkit.context (the builder, whose Compress step uses the summary message)
re-exports every name here. `split_turns` cuts a history into turns, never parting a call from its
output; `truncate` keeps the last N; `compact` replaces the turns before the last N by one summary
message marked as one (`summarizer(model)` writes it), or cuts them, and reports the facts
(numbers and codes) the summary dropped.
Left out, and what production uses instead: judged summaries (a model grades what was kept).
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .config import DEFAULT_MODEL
from .errors import ModelBehaviorError, UserError
from .models import Message, system, user
from .tokens import count

SUMMARY_HEAD = (
    "[summary of turns {first}-{last}, written by a model: it may be incomplete or wrong; "
    "the notes and the turns after it win]"
)
SUMMARY_PROMPT = (
    "Summarise the conversation below for the assistant who continues it. Keep every name, "
    "number, code, date and decision, and the latest value of anything that was corrected."
)
# a fact, for the report of what a summary dropped: a number or a code ("HX-4471", "08:04")
FACT = re.compile(r"(?<![\w.,:])(?:[A-Za-z]+-)?\d+(?:[.,:]\d+)*")
Summarize = Callable[[list[Message]], str]  # a summariser: the messages -> the summary's text


# ---------------------------------------------------------------- turns


def split_turns(messages: Iterable[Message]) -> list[list[Message]]:
    """The history cut into turns: each message with the tool outputs that answer it, so a turn
    never parts a call from its output; system messages are left out (the rules replace them).

    Example: [len(t) for t in split_turns([user("hi"), call_message, output])]  ->  [1, 2]
    """
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool" and turns and turns[-1][0].tool_calls:
            turns[-1].append(m)
        else:
            turns.append([m])
    return turns


def truncate(messages: Iterable[Message], keep_last: int) -> list[Message]:
    """The last `keep_last` turns of a history, each whole: the truncating compactor.

    Example: truncate([user("a"), call_message, output, say_message], 2)  ->  the last three
    """
    turns = split_turns(messages)
    return [m for t in turns[max(len(turns) - keep_last, 0) :] for m in t]


def transcript(messages: Iterable[Message]) -> str:
    """The messages as plain lines, for scoring and for a summariser to read."""
    lines = []
    for m in messages:
        if m.content:
            lines.append(f"{m.role}: {m.content}")
        lines += [f"{m.role} calls {c.name}({c.arguments})" for c in m.tool_calls]
    return "\n".join(lines)


# ---------------------------------------------------------------- summaries


def summary_message(text: str, first: int, last: int) -> Message:
    """The summary as it enters a history: marked as a summary, never mistaken for a user's words.

    Example: summary_message("Ana booked ...", 1, 34).content.startswith("[summary of turns 1-34")
    """
    return user(SUMMARY_HEAD.format(first=first, last=last) + "\n" + text.strip())


def is_summary(message: Message) -> bool:
    """Whether a message is a summary made by summary_message. Example: is_summary(messages[1])"""
    return message.role == "user" and message.content.startswith(SUMMARY_HEAD.split("{")[0])


def summarizer(model: Any) -> Summarize:
    """A summarise function for build's Compress step and `compact`: the model writes the summary.

    Offline the model is a ScriptedModel, so the summary is its script's words, nothing more.
    A reply cut short (status "incomplete") is refused: half a summary drops facts silently.
    Example: compact(history, summarize=summarizer(connect(script=[say("Ana booked ...")])))
    """

    def summarize(messages: list[Message]) -> str:
        reply = model.respond([system(SUMMARY_PROMPT), user(transcript(messages))])
        if reply.status != "completed":
            raise ModelBehaviorError(
                f"the summary was cut short ({reply.incomplete_reason or reply.status}): half a "
                "summary drops facts without saying so — keep the history, raise the model's "
                "max_output_tokens or compact fewer turns at a time"
            )
        return reply.text

    return summarize


def facts(text: str) -> list[str]:
    """The number- and code-like facts in a text, once each, in order (1,260 and 1260 are one).

    Example: facts("Booking HX-4471, 6 rooms at 08:04")  ->  ["HX-4471", "6", "08:04"]
    """
    seen: dict[str, str] = {}
    for fact in FACT.findall(text):
        seen.setdefault(fact.replace(",", ""), fact)
    return list(seen.values())


def lost_facts(before: str, after: str) -> list[str]:
    """Facts in `before` found nowhere in `after`. Example: lost_facts("HX-4471", "")"""
    kept = {f.replace(",", "") for f in facts(after)}
    return [f for f in facts(before) if f.replace(",", "") not in kept]


# ---------------------------------------------------------------- compaction


@dataclass
class Compaction:
    messages: list[Message]  # the compacted history: the summary (if any), then the kept turns
    summary: str | None  # what the summariser wrote; None when older turns were cut
    replaced: int  # turns replaced by the summary (or cut)
    kept: int  # turns kept verbatim
    tokens_before: int
    tokens_after: int
    lost: list[str]  # facts of the replaced turns found nowhere in what is left

    def __repr__(self) -> str:
        lost = ", ".join(self.lost[:8]) + (" ..." if len(self.lost) > 8 else "")
        how = "summarised" if self.summary is not None else "cut"
        return (
            f"Compaction({self.replaced} turns {how}, {self.kept} kept: {self.tokens_before} -> "
            f"{self.tokens_after} tokens; {len(self.lost)} facts lost: {lost or 'none'})"
        )


def compact(
    history: Iterable[Message],
    summarize: Summarize | None = None,
    threshold: int = 2_000,
    keep_last: int = 8,
    keep: Iterable[str] = (),
    model: str | None = DEFAULT_MODEL,
) -> Compaction:
    """Over `threshold` tokens, the turns before the last `keep_last` become one summary message
    (marked as one), or are cut when there is no `summarize`; a call stays with its output.

    keep: texts that survive beside the history (notes): a fact in them is not reported lost.
    Example: compact(messages, summarizer(model), threshold=1_500, keep_last=8).lost
    """
    if not isinstance(keep_last, int) or keep_last < 0:
        raise UserError(f"keep_last={keep_last!r} — give how many turns stay verbatim, e.g. 8")
    turns = split_turns(history)
    flat = [m for t in turns for m in t]
    before = count(flat, model)
    if before <= threshold or len(turns) <= keep_last:
        return Compaction(flat, None, 0, len(turns), before, before, [])
    older = turns[: len(turns) - keep_last]
    old, messages = [m for t in older for m in t], truncate(flat, keep_last)
    summary = None
    if summarize is not None:
        summary = summarize(old)
        messages = [summary_message(summary, 1, len(older)), *messages]
    after = transcript(messages) + "\n" + "\n".join(keep)
    lost, tokens = lost_facts(transcript(old), after), count(messages, model)
    return Compaction(messages, summary, len(older), keep_last, before, tokens, lost)
