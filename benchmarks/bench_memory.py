"""03_memory: store and recall throughput at 1k and 100k memories, side by side, in one run.

labkit  MemoryStore: SQLite file, WAL, one BEGIN IMMEDIATE transaction per write, its own keyword
index
list    a plain Python list of dicts scanned per query with the same formula (one process, nothing
on disk)
fts5    SQLite's built-in full-text index (C) with bm25() ranking, same file settings (a different
ranking)
Writes are single, committed, acknowledged calls made when the store already holds N memories; the
N are bulk-loaded first (one transaction per 1,000). Run: python -m benchmarks memory
Timings are for this machine at this moment; compare the ratios, not the absolute numbers.
"""

import random
import sqlite3
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from labkit.labs import synthetic_memories
from labkit.memory import MemoryStore, idf, recency, score, tokens

SIZES = (1_000, 100_000)
WRITES = 200  # single writes timed at each size
QUERIES = 200  # recalls timed at each size (the list scan gets fewer at 100k)


class Clock:
    """Real elapsed time is measured with perf_counter; the store's clock only has to move
    forward."""

    def __init__(self):
        self.now = 1735689600.0

    def __call__(self):
        self.now += 1.0
        return self.now


def records(texts, start=0):
    return [
        {
            "tenant": "bench",
            "id": f"k{start + i}",
            "content": text,
            "confirmed": True,
            "ttl_days": 365,
            "importance": (i % 10) / 10,
        }
        for i, text in enumerate(texts)
    ]


def progress(steps, what):
    """A progress bar on stderr for a load of many chunks (gone when done); none for a short one."""
    return tqdm(steps, what, leave=False, disable=len(steps) < 20)


def timed(fn, repeat):
    start = time.perf_counter()
    out = [fn(i) for i in range(repeat)]
    return (time.perf_counter() - start) / repeat, out


# ---------------------------------------------------------------- the three stores


def labkit_store(folder, texts, clock):
    store = MemoryStore(folder / "labkit.sqlite3", clock=clock)
    start = time.perf_counter()
    for i in progress(range(0, len(texts), 1000), f"labkit: loading {len(texts):,}"):
        store.write_many(records(texts[i : i + 1000], i))
    return store, time.perf_counter() - start


def list_recall(memories, query, now, limit=5):
    words = set(tokens(query))
    df = {w: sum(w in m["terms"] for m in memories) for w in words}
    weights = {w: idf(df[w], len(memories)) for w in words}
    total = sum(weights.values())
    scored = []
    for m in memories:
        matched = sum(weights[w] for w in words & m["terms"])
        if matched:
            scored.append(
                (score(matched / total, recency(now - m["updated_at"]), m["importance"]), m["id"])
            )
    return [i for _, i in sorted(scored, reverse=True)[:limit]]


def fts_store(folder, texts):
    db = sqlite3.connect(folder / "fts.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(
        "CREATE VIRTUAL TABLE memories USING fts5(content, tenant UNINDEXED, expires_at UNINDEXED)"
    )
    start = time.perf_counter()
    for i in progress(range(0, len(texts), 1000), f"fts5: loading {len(texts):,}"):
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO memories VALUES (?, 'bench', ?)", [(t, 4e9) for t in texts[i : i + 1000]]
        )
        db.execute("COMMIT")
    return db, time.perf_counter() - start


def fts_write(db, text):
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO memories VALUES (?, 'bench', ?)", (text, 4e9))
    db.execute("COMMIT")


def fts_recall(db, query, limit=5):
    match = " OR ".join(f'"{w}"' for w in sorted(set(tokens(query))))
    return db.execute(
        "SELECT rowid FROM memories WHERE memories MATCH ? AND tenant = 'bench' AND expires_at > ? "
        "ORDER BY bm25(memories) LIMIT ?",
        (match, 0, limit),
    ).fetchall()


# ---------------------------------------------------------------- one size


def measure(n, rng):
    texts, words = synthetic_memories(n + WRITES, seed=n)
    base, extra = texts[:n], texts[n:]
    queries = [" ".join(rng.sample(words[20:2000], rng.randint(2, 3))) for _ in range(QUERIES)]
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        folder, clock = Path(folder), Clock()
        store, load = labkit_store(folder, base, clock)
        write, _ = timed(
            lambda i: store.write("bench", extra[i], id=f"x{i}", confirmed=True, ttl_days=365),
            WRITES,
        )
        recall, found = timed(
            lambda i: [h.memory.id for h in store.recall("bench", queries[i])], QUERIES
        )
        memories = [
            {
                "id": m.id,
                "terms": set(tokens(m.content)),
                "updated_at": m.updated_at,
                "importance": m.importance,
            }
            for m in store.list("bench")
        ]
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = (folder / "labkit.sqlite3").stat().st_size
        store.close()
        rows["labkit"] = (n / load, 1 / write, 1 / recall, size)

        start = time.perf_counter()
        plain = [
            {"id": f"k{i}", "terms": set(tokens(t)), "updated_at": 0.0, "importance": 0.0}
            for i, t in enumerate(base)
        ]
        list_load = time.perf_counter() - start
        list_write, _ = timed(
            lambda i: plain.append(
                {
                    "id": f"x{i}",
                    "terms": set(tokens(extra[i])),
                    "updated_at": 0.0,
                    "importance": 0.0,
                }
            ),
            WRITES,
        )
        asked = QUERIES if n <= 10_000 else 20
        list_time, listed = timed(lambda i: list_recall(memories, queries[i], clock.now), asked)
        rows["list"] = (n / list_load, 1 / list_write, 1 / list_time, None)
        same = sum(a == b for a, b in zip(found, listed, strict=False)) / asked

        db, fts_load = fts_store(folder, base)
        fts_single, _ = timed(lambda i: fts_write(db, extra[i]), WRITES)
        fts_time, _ = timed(lambda i: fts_recall(db, queries[i]), QUERIES)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size_fts = (folder / "fts.sqlite3").stat().st_size
        db.close()
        rows["fts5"] = (n / fts_load, 1 / fts_single, 1 / fts_time, size_fts)
    return rows, same


def main():
    rng = random.Random(0)
    print(__doc__.split("\n")[0])
    print(
        f"{'memories':>9}  {'store':<7} {'bulk load/s':>12} {'write/s':>9} {'recall/s':>9} "
        f"{'ms/recall':>10} {'file MB':>8}"
    )
    results = {}
    for n in SIZES:
        rows, same = measure(n, rng)
        results[n] = rows
        for name, (load, write, recall, size) in rows.items():
            megabytes = f"{size / 1e6:8.1f}" if size else f"{'memory':>8}"
            print(
                f"{n:>9,}  {name:<7} {load:>12,.0f} {write:>9,.0f} {recall:>9,.1f} "
                f"{1000 / recall:>10.2f} {megabytes}"
            )
        lab = rows["labkit"]
        print(
            f"{'':>9}  ratios: recall labkit/list {lab[2] / rows['list'][2]:.1f}x, fts5/labkit "
            f"{rows['fts5'][2] / lab[2]:.1f}x; write fts5/labkit {rows['fts5'][1] / lab[1]:.1f}x; "
            f"labkit top-5 equals the list scan's for {same:.0%} of queries"
        )
    small, large = results[SIZES[0]], results[SIZES[-1]]
    growth = {name: small[name][2] / large[name][2] for name in small}
    print(
        f"recall cost from {SIZES[0]:,} to {SIZES[-1]:,} memories (x{SIZES[-1] // SIZES[0]}): "
        + ", ".join(f"{name} x{g:.0f}" for name, g in growth.items())
        + f"; labkit write cost x{small['labkit'][1] / large['labkit'][1]:.1f}"
    )


if __name__ == "__main__":
    main()
