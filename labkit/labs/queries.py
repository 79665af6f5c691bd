"""06_rag: the frozen query set and its ranking metrics.

Outside the lessons (see labkit.labs).
"""

import json
from pathlib import Path

import numpy as np

from ..config import EVALS_DIR

# ---------------------------------------------------------------- 06_rag: the frozen query set


def load_queries(path=EVALS_DIR / "rag_queries.jsonl"):
    """The frozen query set: [{"id", "query", "expected": [source_id], "kind"}]; [] = none."""
    return [
        json.loads(line)
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def rank_metrics(ranked, relevant, k=5):
    """(recall@k, reciprocal rank, nDCG@10) of one ranked list of ids against the relevant ids.

    Example: rank_metrics(["a", "b"], {"b"}, k=1)  ->  (0.0, 0.5, 0.6309...)
    """
    relevant = set(relevant)
    recall = len(relevant & set(ranked[:k])) / len(relevant)
    rr = next((1 / rank for rank, item in enumerate(ranked, 1) if item in relevant), 0.0)
    dcg = sum(1 / np.log2(rank + 1) for rank, item in enumerate(ranked[:10], 1) if item in relevant)
    ideal = sum(1 / np.log2(rank + 1) for rank in range(1, min(len(relevant), 10) + 1))
    return recall, rr, float(dcg / ideal)


def evaluate_retrieval(library, queries, method, k=5):
    """Mean Recall@k, MRR and nDCG@10 over answerable queries; refusal accuracy over all of them.

    Example: evaluate_retrieval(library, load_queries(), "bm25")
             ->  {"recall": 0.9, "mrr": ..., ...}
    """
    rows, correct = [], 0
    for q in queries:
        hits = library.search(q["query"], 10, method)
        correct += library.answerable(hits) == bool(q["expected"])
        if q["expected"]:
            rows.append(rank_metrics([h.chunk.source_id for h in hits], q["expected"], k))
    recall, mrr, ndcg = (float(np.mean(column)) for column in zip(*rows, strict=True))
    return {
        "method": method,
        f"recall@{k}": recall,
        "mrr": mrr,
        "ndcg@10": ndcg,
        "refusal_accuracy": correct / len(queries),
    }


def eval_table(scores: dict, k: int = 5) -> str:
    """One line per method of {method: evaluate_retrieval(...)}: Recall@k, MRR, nDCG@10, refusal
    accuracy. Example: print(eval_table({m: evaluate_retrieval(lib, qs, m) for m in ("bm25",)}))"""
    lines = [f"{'method':<8}{f'recall@{k}':>10}{'MRR':>7}{'nDCG@10':>9}{'refusal acc':>13}"]
    for method, r in scores.items():
        lines.append(
            f"{method:<8}{r[f'recall@{k}']:>10.3f}{r['mrr']:>7.3f}{r['ndcg@10']:>9.3f}"
            f"{r['refusal_accuracy']:>13.3f}"
        )
    return "\n".join(lines)
