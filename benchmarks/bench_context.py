"""08_context: the context builder's cost per call, and exact token counts against the estimate.

1. build and compact on histories of about 1k, 10k and 100k tokens (the frozen long conversation
   repeated, call ids renumbered so every call stays paired), beside counting that history once:
   what Gather → Select → Structure → Compress costs over the counting it cannot avoid.
2. Counting the teaching corpus, English and Chinese apart: exact o200k_base (bpe-openai, through
   labkit.tokens.exact and called directly) against labkit's estimate, time and error side by side.
Run: python -m benchmarks context
Timings are for this machine at this moment; compare the ratios, not the absolute numbers.
"""

import time
from dataclasses import replace

import bpe_openai

from labkit import context, labs, rag, tokens

SIZES = (1_000, 10_000, 100_000)  # history tokens, roughly
TASK = "Draft the team email: hotel, train, meal budget, receipt rules, first class."


def history_of(n_tokens):
    """The frozen conversation repeated until it holds about n_tokens, every call still paired."""
    turns = context.split_turns(labs.load_conversation()["messages"])
    out, total, copy = [], tokens.PER_REPLY, 0
    while total < n_tokens:
        copy += 1
        for turn in turns:
            for m in turn:  # a new id per copy: the same call twice would not be paired
                calls = [replace(c, id=f"{c.id}_{copy}") for c in m.tool_calls]
                answers = f"{m.tool_call_id}_{copy}" if m.tool_call_id else None
                out.append(replace(m, tool_calls=calls, tool_call_id=answers))
            total += tokens.count(turn) - tokens.PER_REPLY  # a list's reply priming counts once
            if total >= n_tokens:
                break
    return out


def timed(fn, repeat, *args):
    fn(*args)  # the first call loads the tokenizer's tables; not what a call costs
    start = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - start) / repeat


def builder():
    print(f"{'history':>8} {'msgs':>5} {'count':>9} {'build':>9} {'compact':>9}  build/count")
    summary = labs.load_conversation()["summary"]
    for size in SIZES:
        history = history_of(size)
        repeat = max(2, 200_000 // size)
        counting = timed(tokens.count, repeat, history)
        building = timed(lambda h: context.build(TASK, history=h, budget=2_000), repeat, history)
        compacting = timed(context.compact, repeat, history, lambda m: summary, 1_000)
        print(
            f"{tokens.count(history):>8} {len(history):>5} {counting * 1e3:>7.2f}ms "
            f"{building * 1e3:>7.2f}ms {compacting * 1e3:>7.2f}ms  {building / counting:>10.1f}x"
        )


def counting():
    docs = rag.load_corpus()
    encoding = bpe_openai.get_encoding(tokens.ENCODING)
    print(f"{'corpus':<8} {'tokens':>6} {'exact':>9} {'direct':>9} {'estimate':>9}  error  speed")
    for lang in ("English", "Chinese"):
        texts = [d.text for d in docs if d.doc_id.startswith("zh-") == (lang == "Chinese")]
        exact = sum(tokens.exact(t) for t in texts)
        assert exact == sum(len(encoding.encode_ordinary(t)) for t in texts)  # one tokenizer
        guess = sum(tokens.estimate(t) for t in texts)
        per = 1_000 / exact  # time per 1,000 tokens
        t_exact = timed(lambda ts: [tokens.exact(t) for t in ts], 50, texts) * per
        t_direct = timed(lambda ts: [encoding.encode_ordinary(t) for t in ts], 50, texts) * per
        t_guess = timed(lambda ts: [tokens.estimate(t) for t in ts], 50, texts) * per
        print(
            f"{lang:<8} {exact:>6} {t_exact * 1e6:>7.1f}us {t_direct * 1e6:>7.1f}us "
            f"{t_guess * 1e6:>7.1f}us {(guess - exact) / exact:>+6.0%} {t_exact / t_guess:>5.1f}x"
        )
    print("(time per 1,000 tokens; speed = exact / estimate; error = estimate vs exact)")


def main():
    builder()
    print()
    counting()


if __name__ == "__main__":
    main()
