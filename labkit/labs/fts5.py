"""03_memory beside SQLite FTS5: the frozen memory set, an FTS5 index, recall@5, recall cost.

Outside the lessons (see labkit.labs).
"""

import json
import random
import time
from functools import partial
from pathlib import Path

from ..config import EVALS_DIR

# ------------------------------------------------- 03_memory: recall beside SQLite FTS5

MEMORY_QUERIES = EVALS_DIR / "memory_queries.json"


def load_memory_set(path=MEMORY_QUERIES, clock=None):
    """The frozen memory set in a new in-memory MemoryStore, each memory written `age_days` ago.

    Returns (store, tenant, queries); the store's clock ends at "now" (pass a ManualClock to keep
    it). Example: store, tenant, queries = load_memory_set(); queries[0]["expected"]  ->  ["units"]
    """
    from ..memory import ManualClock, MemoryStore

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    clock = clock or ManualClock()
    store, tenant = MemoryStore(":memory:", clock=clock), data["tenant"]
    oldest = max(m["age_days"] for m in data["memories"])
    age = oldest
    for m in sorted(data["memories"], key=lambda m: -m["age_days"]):  # oldest first
        clock.advance(days=age - m["age_days"])
        age = m["age_days"]
        store.write(
            tenant,
            m["content"],
            id=m["id"],
            kind=m["kind"],
            importance=m["importance"],
            confirmed=True,
            ttl_days=365,
        )
    clock.advance(days=age)
    return store, tenant, data["queries"]


class FTS5Index:
    """The same memories in an SQLite FTS5 table, ranked by FTS5's bm25 (text only: no recency,
    no importance). The query is labkit's keywords joined with OR, so both see the same words;
    stem=True adds FTS5's porter stemmer ("allergies" finds "allergic"), which labkit lacks.

    Example: FTS5Index(store.list("ana")).recall("which units?")  ->  ["units", ...]
    """

    def __init__(self, memories, stem: bool = False):
        import sqlite3

        self.db = sqlite3.connect(":memory:")
        tokenize = "porter unicode61" if stem else "unicode61"
        columns = f"id UNINDEXED, content, tokenize='{tokenize}'"
        self.db.execute(f"CREATE VIRTUAL TABLE memories USING fts5({columns})")
        self.db.executemany(
            "INSERT INTO memories VALUES (?, ?)", [(m.id, m.content) for m in memories]
        )

    def recall(self, query: str, limit: int = 5) -> list[str]:
        from ..memory import tokens

        # each word quoted: FTS5 would read AND, OR, NOT, NEAR or a '-' as its own syntax
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in sorted(set(tokens(query))))
        if not match:
            return []
        rows = self.db.execute(
            "SELECT id FROM memories WHERE memories MATCH ? ORDER BY bm25(memories), rowid LIMIT ?",
            (match, limit),
        )
        return [id for (id,) in rows]


def memory_recall_table(store, tenant, queries, k: int = 5) -> dict:
    """recall@k of labkit's recall, FTS5's bm25 and FTS5 with stemming, overall and per query.

    Example: memory_recall_table(*load_memory_set())["recall"]["fts5"]  ->  0.74...
    """
    fts, stemmed = FTS5Index(store.list(tenant)), FTS5Index(store.list(tenant), stem=True)
    ranked = {
        "labkit": lambda q: [h.memory.id for h in store.recall(tenant, q, limit=k)],
        "fts5": lambda q: fts.recall(q, limit=k),
        "fts5 porter": lambda q: stemmed.recall(q, limit=k),
    }
    rows = []
    for q in queries:
        found = {name: rank(q["query"]) for name, rank in ranked.items()}
        hit = {
            name: len(set(ids) & set(q["expected"])) / len(q["expected"])
            for name, ids in found.items()
        }
        rows.append({"id": q["id"], "kind": q["kind"], "found": found, "recall": hit})
    recall = {name: sum(r["recall"][name] for r in rows) / len(rows) for name in ranked}
    return {"recall": recall, "rows": rows}


def synthetic_memories(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """n pseudo-sentences whose word frequencies follow a Zipf-like curve, as text does, and the
    vocabulary. Example: texts, words = synthetic_memories(1000); len(texts)  ->  1000
    """
    rng = random.Random(seed)
    words = [
        f"{a}{b}{c}"
        for a in "bcdfgklmnprstvz"
        for b in "aeiou"
        for c in ("n", "r", "s", "l", "x", "m", "nd", "rt", "st", "sk", "lp", "mp", "ng", "ck")
    ]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    texts = [" ".join(rng.choices(words, weights, k=rng.randint(5, 10))) for _ in range(n)]
    return texts, words


def recall_cost(sizes, queries: int = 20, seed: int = 0, clock=time.perf_counter) -> dict:
    """Mean seconds per recall (top 5) of labkit's MemoryStore and of an FTS5 table holding the
    same n synthetic memories, for each n in sizes. Timings: this machine, this moment.

    Example: recall_cost([1000, 4000])  ->  {"sizes": [1000, 4000], "labkit": [...], "fts5": [...]}
    """
    from ..memory import MemoryStore

    rng, out = random.Random(seed), {"sizes": list(sizes), "labkit": [], "fts5": []}
    for n in sizes:
        texts, words = synthetic_memories(n, seed)
        asked = [" ".join(rng.sample(words[20:2000], 3)) for _ in range(queries)]
        store = MemoryStore(":memory:")
        for start in range(0, n, 1000):  # one transaction per 1,000
            chunk = texts[start : start + 1000]
            store.write_many(
                [
                    {"tenant": "t", "id": f"k{start + i}", "content": text, "confirmed": True}
                    for i, text in enumerate(chunk)
                ]
            )
        fts = FTS5Index(store.list("t"))
        for name, recall in (("labkit", partial(store.recall, "t")), ("fts5", fts.recall)):
            start = clock()
            for q in asked:
                recall(q)
            out[name].append((clock() - start) / queries)
        store.close()
    return out
