"""BM25 and dense retrieval: labkit vs bm25s vs rank_bm25, in one run, on SciFact when present.

    python -m benchmarks rag            # BM25: build time, queries/s, nDCG@10 (+ ratios)
    python -m benchmarks rag --dense    # also MiniLM and RRF nDCG@10 (minutes on 2 cores; or
    LABKIT_BENCH_DENSE=1), and faiss's top 100 against labkit's on the SciFact vectors
Every run also times exact cosine top-k, labkit's embed.cosine_top_k (torch) beside faiss
IndexFlatIP, on seeded random 384-d vectors at the sizes the course uses.

Data: SciFact (BEIR format: corpus.jsonl, queries.jsonl, qrels/test.tsv) is not shipped; place it at
../shared/ir/scifact beside the repository (never copied into it). When it is absent, a generated
corpus with Zipf-distributed words stands in (nDCG is then against generated qrels, not comparable);
the first line printed says which data was used.
Everyone gets the same tokens: lowercase `\\w+` (labkit.rag.tokenize; SciFact has no CJK), k1=1.5,
b=0.75. bm25s runs method="lucene" (its default), the variant labkit implements; rank_bm25's
BM25Okapi has its own idf floor, so its nDCG differs slightly. Timings are this machine, now:
compare the ratios.
"""

import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from labkit.rag import BM25Index, bm25_naive, rrf, tokenize

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "ir" / "scifact"
# nDCG@10 from one earlier run of `python -m benchmarks rag --dense` on SciFact (BEIR test split):
# measured with this file, not taken from a paper. A change in tokens or scoring shows up against
# them.
EARLIER_RUN = {
    "labkit BM25Index": 0.6646,
    "bm25s (lucene, numpy)": 0.6646,
    "rank_bm25 BM25Okapi": 0.6519,
    "MiniLM": 0.6451,
    "RRF": 0.6907,
}


def load_scifact(folder=None):
    """(doc_ids, doc_texts, queries {id: text}, qrels {query id: {doc id: grade}}) or None."""
    folder = folder or SCIFACT
    if not (folder / "corpus.jsonl").is_file():
        return None
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
    queries = {
        q["_id"]: q["text"]
        for q in map(json.loads, (folder / "queries.jsonl").open(encoding="utf-8"))
    }
    qrels = {}
    for line in list((folder / "qrels" / "test.tsv").open(encoding="utf-8"))[1:]:
        qid, did, grade = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(grade)
    return (
        [d["_id"] for d in docs],
        [d["title"] + " " + d["text"] for d in docs],
        {qid: queries[qid] for qid in qrels},
        qrels,
    )


def choose_data(folder=None):
    """(data, is_scifact, line): SciFact when `folder` holds it, else the generated stand-in.

    `line` says which data was used and, for the stand-in, where SciFact must go.
    Example: data, is_scifact, line = choose_data(); print(line)   # the benchmark's first line
    """
    folder = Path(folder or SCIFACT)
    data = load_scifact(folder)
    if data:
        return (
            data,
            True,
            f"data: SciFact from {folder} (BEIR test: {len(data[0]):,} docs, {len(data[3])} "
            "queries)",
        )
    data = generated_corpus()
    return (
        data,
        False,
        (
            f"data: a GENERATED corpus ({len(data[0]):,} docs of Zipf words, {len(data[3])} "
            "queries), "
            f"NOT SciFact: no corpus.jsonl in {folder}. For the real figures place BEIR SciFact "
            "(corpus.jsonl, queries.jsonl, qrels/test.tsv) at ../shared/ir/scifact beside the "
            "repository"
        ),
    )


def generated_corpus(n_docs=5000, n_queries=300, seed=0):
    """A stand-in with Zipf word frequencies; each query is drawn from one document (its qrel)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(20000)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    texts = [" ".join(rng.choices(words, weights, k=rng.randint(50, 250))) for _ in range(n_docs)]
    ids = [str(i) for i in range(n_docs)]
    targets = rng.sample(range(n_docs), n_queries)
    queries = {f"q{i}": " ".join(rng.sample(texts[t].split(), 8)) for i, t in enumerate(targets)}
    return ids, texts, queries, {f"q{i}": {str(t): 1} for i, t in enumerate(targets)}


def ndcg_at_10(ranked_ids, relevant):
    dcg = sum(relevant.get(d, 0) / math.log2(rank + 2) for rank, d in enumerate(ranked_ids[:10]))
    ideal = sum(
        g / math.log2(rank + 2)
        for rank, g in enumerate(sorted(relevant.values(), reverse=True)[:10])
    )
    return dcg / ideal if ideal else 0.0


def mean_ndcg(rankings, qrels):
    return sum(ndcg_at_10(rankings[q], qrels[q]) for q in qrels) / len(qrels)


def timed(fn, *args, repeat=1):
    """(result, seconds): the best of `repeat` runs, since other work on a shared machine only adds
    time."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return result, best


def run_labkit(doc_tokens, query_tokens, ids):
    index, build = timed(BM25Index.build, doc_tokens, repeat=5)
    hits, elapsed = timed(
        lambda: {q: index.top_k(toks, 10) for q, toks in query_tokens.items()}, repeat=5
    )
    return build, elapsed, {q: [ids[i] for i, _ in h] for q, h in hits.items()}, index


def run_bm25s(doc_tokens, query_tokens, ids):
    import bm25s

    def build():
        model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        model.index(doc_tokens, show_progress=False)
        return model

    model, build_s = timed(build, repeat=5)

    def query():
        # subtle: bm25s raises on a query with no known token; give it the empty token it indexed
        tokens = [
            [t for t in toks if t in model.vocab_dict] or [""] for toks in query_tokens.values()
        ]
        docs, _ = model.retrieve(tokens, k=10, show_progress=False, n_threads=0)
        return {
            q: [ids[i] for i in row] for q, row in zip(query_tokens, docs.tolist(), strict=True)
        }

    rankings, elapsed = timed(query, repeat=5)
    return build_s, elapsed, rankings


def run_rank_bm25(doc_tokens, query_tokens, ids):
    from rank_bm25 import BM25Okapi

    model, build_s = timed(lambda: BM25Okapi(doc_tokens, k1=1.5, b=0.75))

    def query():
        out = {}
        for q, toks in query_tokens.items():
            scores = model.get_scores(toks)
            out[q] = [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
        return out

    rankings, elapsed = timed(query)
    return build_s, elapsed, rankings


def run_naive(doc_tokens, query_tokens, ids, limit=20):
    """labkit.rag.bm25_naive, the reference loop (recounts df and tf per query), on `limit`
    queries."""
    sample = dict(list(query_tokens.items())[:limit])
    _, elapsed = timed(lambda: [bm25_naive(doc_tokens, toks) for toks in sample.values()])
    return elapsed / len(sample)


class Progress:
    """An embedder that embeds in batches behind a progress bar (stderr), with the same identity,
    so the cache key is the wrapped model's."""

    def __init__(self, model, batch=256):
        self.model, self.identity, self.batch = model, model.identity, batch

    def embed(self, texts):
        import torch
        from tqdm import tqdm

        starts = range(0, len(texts), self.batch)
        parts = [self.model.embed(texts[i : i + self.batch]) for i in tqdm(starts, "embedding")]
        return torch.cat(parts)


def dense_rankings(texts, queries, ids, cache_dir=None):
    """MiniLM exact cosine: (rankings, seconds to embed the corpus, cache status, faiss agrees)."""
    from labkit.embed import CACHE_DIR, MiniLM, cosine_top_k, embed_cached
    from labkit.labs import faiss_index, faiss_top_k

    model = MiniLM()
    (vectors, status), seconds = timed(embed_cached, Progress(model), texts, cache_dir or CACHE_DIR)
    query_vectors = model.embed(list(queries.values()))
    hits = cosine_top_k(query_vectors, vectors, 100)
    theirs = faiss_top_k(faiss_index(vectors), query_vectors, 100)
    # a row may differ only where two similarities tie to float precision
    agree = sum([r for r, _ in a] == [r for r, _ in b] for a, b in zip(hits, theirs, strict=True))
    return (
        {q: [ids[i] for i, _ in row] for q, row in zip(queries, hits, strict=True)},
        seconds,
        status,
        agree,
    )


# the teaching corpus's chunks, a thousand, SciFact's abstracts, ten times that
EXACT_SIZES = (62, 1_000, 5_183, 50_000)


def exact_search_speed(sizes=EXACT_SIZES, dim=384, queries=300, k=10):
    """labkit's cosine_top_k (torch) beside faiss IndexFlatIP: queries/s one at a time and as a
    batch, on seeded random vectors; and whether their top k rows agree."""
    import torch

    from labkit.embed import cosine_top_k
    from labkit.labs import faiss_index, faiss_top_k

    print(
        f"exact cosine top-{k}, {dim}-d, {queries} queries: labkit embed.cosine_top_k (torch) "
        "vs faiss IndexFlatIP"
    )
    print(
        f"{'vectors':>8}  {'torch q/s':>10} {'faiss q/s':>10} {'torch/faiss':>11}   "
        f"{'batch torch':>11} {'batch faiss':>11} {'torch/faiss':>11}   same rows"
    )
    generator = torch.Generator().manual_seed(0)
    for n in sizes:
        vectors = torch.randn(n, dim, generator=generator)
        asked = torch.randn(queries, dim, generator=generator)
        index = faiss_index(vectors)
        one_torch = timed(lambda v=vectors, a=asked: [cosine_top_k(q, v, k) for q in a], repeat=5)[
            1
        ]
        one_faiss = timed(lambda i=index, a=asked: [faiss_top_k(i, q, k) for q in a], repeat=5)[1]
        ours, batch_torch = timed(cosine_top_k, asked, vectors, k, repeat=5)
        theirs, batch_faiss = timed(faiss_top_k, index, asked, k, repeat=5)
        same = sum(
            [r for r, _ in a] == [r for r, _ in b] for a, b in zip(ours, theirs, strict=True)
        )
        print(
            f"{n:>8,}  {queries / one_torch:>10,.0f} {queries / one_faiss:>10,.0f} "
            f"{one_faiss / one_torch:>10.2f}x   {queries / batch_torch:>11,.0f} "
            f"{queries / batch_faiss:>11,.0f} {batch_faiss / batch_torch:>10.2f}x   "
            f"{same}/{queries}"
        )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    dense = "--dense" in argv or os.environ.get("LABKIT_BENCH_DENSE") == "1"
    (ids, texts, queries, qrels), scifact, line = choose_data()
    print(line)
    print("tokens: lowercase \\w+ (labkit.rag.tokenize) for every system; k1=1.5, b=0.75")
    doc_tokens, _ = timed(lambda: [tokenize(t) for t in texts])
    query_tokens = {q: tokenize(t) for q, t in queries.items()}

    build, elapsed, labkit_rank, index = run_labkit(doc_tokens, query_tokens, ids)
    rows = [("labkit BM25Index", build, elapsed, mean_ndcg(labkit_rank, qrels))]
    for name, runner in (
        ("bm25s (lucene, numpy)", run_bm25s),
        ("rank_bm25 BM25Okapi", run_rank_bm25),
    ):
        b, e, rankings = runner(doc_tokens, query_tokens, ids)
        rows.append((name, b, e, mean_ndcg(rankings, qrels)))
    naive = run_naive(doc_tokens, query_tokens, ids)

    n = len(query_tokens)
    labkit_qps = n / rows[0][2]
    print(f"{'system':<24}{'build s':>9}{'queries/s':>11}{'nDCG@10':>9}   labkit qps / this")
    for name, b, e, score in rows:
        print(
            f"{name:<24}{b:>9.3f}{n / e:>11,.0f}{score:>9.4f}   {labkit_qps / (n / e):>6.2f}x"
            + (f"   (earlier run {EARLIER_RUN[name]:.4f})" if scifact else "")
        )
    print(
        f"{'bm25_naive (reference)':<24}{'-':>9}{1 / naive:>11,.1f}{'':>9}   "
        f"{labkit_qps * naive:>6.0f}x"
    )
    print(f"build: labkit takes {rows[0][1] / rows[1][1]:.2f}x the time of bm25s")
    exact_search_speed(EXACT_SIZES)

    if not dense:
        print(
            "dense: skipped (add --dense or LABKIT_BENCH_DENSE=1; MiniLM over SciFact takes "
            "minutes on CPU)"
        )
        return
    dense_rank, seconds, status, agree = dense_rankings(texts, queries, ids)
    bm25_100 = {q: [ids[i] for i, _ in index.top_k(toks, 100)] for q, toks in query_tokens.items()}
    fused = {q: [d for d, _ in rrf([bm25_100[q], dense_rank[q]])] for q in queries}
    print(
        f"MiniLM exact cosine  nDCG@10 {mean_ndcg(dense_rank, qrels):.4f}  ("
        + (f"earlier run {EARLIER_RUN['MiniLM']:.4f}; " if scifact else "")
        + f"corpus embedded in {seconds:.0f} s, cache {status}); faiss IndexFlatIP gives the "
        f"same top 100 rows for {agree} of {len(queries)} queries"
    )
    print(
        f"RRF(BM25, MiniLM)    nDCG@10 {mean_ndcg(fused, qrels):.4f}  (k=60, top 100 of each"
        + (f"; earlier run {EARLIER_RUN['RRF']:.4f})" if scifact else ")")
    )


if __name__ == "__main__":
    main()
