"""BM25: the Lucene formula, as its definition reads and as an inverted index in numpy.

Built in 06_rag; labkit.rag ranks chunks with it and re-exports every name here. `bm25_naive`
scores one document at a time, as the formula reads; `BM25Index` computes each (term, document)
weight once, at build time, and a query adds up the postings of its own terms; the two agree to the
last bit. Both take tokens already made (labkit.rag.tokenize).
Deliberately left out: other BM25 variants (Robertson's idf, BM25+, BM25L), incremental updates.
"""

from collections import Counter
from dataclasses import dataclass
from typing import overload

import numpy as np

from .errors import UserError


@overload
def bm25_idf(df: int, n_docs: int) -> float: ...
@overload
def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray: ...
def bm25_idf(df: np.ndarray | int, n_docs: int) -> np.ndarray | float:
    """Lucene's idf: ln(1 + (N - df + 0.5) / (df + 0.5)); always > 0 (unlike Robertson's)."""
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def bm25_naive(
    docs_tokens: list, query_tokens: list, k1: float = 1.5, b: float = 0.75
) -> list[float]:
    """BM25 by the definition, one document at a time: the reference BM25Index must equal.

    Lucene variant (bm25s method="lucene"): sum over query tokens (repeats count again) of
    idf * tf / (tf + k1 * (1 - b + b * len / avg_len)).
    Example: bm25_naive([["a", "b"], ["b"]], ["a"])  ->  [0.2410..., 0.0]
    """
    n = len(docs_tokens)
    avg_len = sum(map(len, docs_tokens)) / n or 1.0
    df = Counter(token for doc in docs_tokens for token in set(doc))
    scores = []
    for doc in docs_tokens:
        score, norm = 0.0, k1 * (1 - b + b * len(doc) / avg_len)
        for token in query_tokens:
            tf = doc.count(token)
            if tf:
                score += float(bm25_idf(df[token], n)) * tf / (tf + norm)
        scores.append(score)
    return scores


def top_scores(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best positive (index, score) pairs of a 1-D array, ties broken by the lower index."""
    n = len(scores)
    if k <= 0 or n == 0:
        return []
    floor = np.nextafter(0.0, 1.0)  # the smallest positive score
    if k < n:  # keep everything tied with the k-th best
        floor = max(floor, np.partition(scores, n - k)[n - k])
    candidates = np.flatnonzero(scores >= floor)
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [(int(i), float(scores[i])) for i in candidates[order]]


@dataclass
class BM25Index:
    """An inverted index with each (term, document) weight computed once, at build time.

    Example: BM25Index.build([["a", "b"], ["b"]]).top_k(["b"], 2)  ->  [(1, ...), (0, ...)]
    """

    vocab: dict  # token -> term number
    indptr: np.ndarray  # (terms + 1,) term t's postings are [indptr[t], indptr[t + 1])
    postings: np.ndarray  # (pairs,) document numbers, ascending within a term
    weights: np.ndarray  # (pairs,) idf * tf / (tf + k1 * (1 - b + b * len / avg_len))
    n_docs: int
    k1: float = 1.5
    b: float = 0.75

    @classmethod
    def build(cls, docs_tokens: list[list[str]], k1: float = 1.5, b: float = 0.75) -> "BM25Index":
        n = len(docs_tokens)
        if n == 0:
            raise UserError(
                "cannot build a BM25 index of zero documents — load and chunk documents first"
            )
        if k1 < 0 or not 0 <= b <= 1:
            raise UserError(
                f"k1={k1}, b={b}: need k1 >= 0 and 0 <= b <= 1 (the usual k1=1.5, b=0.75)"
            )
        vocab: dict[str, int] = {}
        terms = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for doc in docs_tokens for t in doc), np.int64
        )
        lengths = np.fromiter(map(len, docs_tokens), np.int64, n)
        docs = np.repeat(np.arange(n), lengths)
        pairs, tf = np.unique(terms * n + docs, return_counts=True)  # sorted by term, then document
        term, doc = np.divmod(pairs, n)
        df = np.bincount(term, minlength=len(vocab))
        norm = k1 * (1 - b + b * lengths / (lengths.mean() or 1.0))  # (documents,)
        weights = bm25_idf(df, n)[term] * tf / (tf + norm[doc])
        indptr = np.concatenate(([0], np.cumsum(df)))
        return cls(vocab, indptr, doc.astype(np.int32), weights, n, k1, b)

    def scores(self, query_tokens: list) -> np.ndarray:
        """Every document's score, as a (documents,) float64 array."""
        terms = [self.vocab[token] for token in query_tokens if token in self.vocab]
        if not terms:
            return np.zeros(self.n_docs)
        spans = [slice(self.indptr[t], self.indptr[t + 1]) for t in terms]
        # one C loop over every posting of the query; per document it adds in query order, as the
        # naive loop does, so the two agree to the last bit
        return np.bincount(
            np.concatenate([self.postings[s] for s in spans]),
            np.concatenate([self.weights[s] for s in spans]),
            minlength=self.n_docs,
        )

    def top_k(self, query_tokens: list, k: int) -> list[tuple[int, float]]:
        """The k best documents as [(index, score)], ties by index; non-matches left out."""
        return top_scores(self.scores(query_tokens), k)
