"""Long-term memory: a SQLite store that keeps only what the user confirmed, and forgets on purpose.

Built in 03_memory. `MemoryStore` keeps the rules of labkit/memory_rules.py (the write policy,
`resolve`, `score`) in one SQLite file: every replaced value in a history table, a conflict
surfaced, never an expired item or another tenant's. `recall` ranks by (relevance x recency) x
(0.8 + 0.4 x importance), relevance = IDF-weighted keyword overlap. `memory_tools` gives an agent
`remember` and `recall`, with the person's consent. Command line: labkit/__main__.py.
Deliberately left out: embeddings (06_rag), encryption at rest, power-loss durability.
"""

# MemoryStore.list would shadow the built-in list in the annotations of the methods after it:
# at run time (hence this import) and for the type checker (hence builtins.list there)
from __future__ import annotations

import builtins
import heapq
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, astuple, dataclass, fields
from pathlib import Path
from typing import Any

from .errors import ToolError, UserError
from .memory_rules import (
    DAY,
    HALF_LIFE_DAYS,
    KINDS,
    MAX_CHARS,
    MAX_TENANT,
    PROMOTE_AT,
    SOURCES,
    STOPWORDS,
    TTL_DAYS,
    Item,
    Kind,
    ManualClock,
    Memory,
    Record,
    WorkingMemory,
    checked_id,
    checked_tenant,
    idf,
    iso,
    recency,
    record_problems,
    resolve,
    score,
    tokens,
)
from .schema import check_text
from .sqlite_store import connect, location_problem, retrying, transaction, use_wal
from .tools import Tool, approved, tool

# fmt: off
__all__ = [  # the rules are labkit.memory's names too: labkit.memory.score is memory_rules.score
    "DAY", "HALF_LIFE_DAYS", "KINDS", "MAX_CHARS", "MAX_TENANT", "PROMOTE_AT", "SCHEMA", "SOURCES",
    "STOPWORDS", "TTL_DAYS", "Item", "Kind", "ManualClock", "Memory", "MemoryHit", "MemoryStore",
    "Record", "Refused", "WorkingMemory", "WriteResult", "idf", "iso", "memory_tools", "recency",
    "record_problems", "resolve", "score", "tokens"
]
# fmt: on


class Refused(UserError):
    """The memory policy refused a write. `kind` is "not_confirmed" or "invalid_record"."""

    def __init__(self, message: str, kind: str = "invalid_record") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class MemoryHit:
    memory: Memory
    score: float  # relevance * recency * weight
    relevance: float  # 0..1, share of the query's IDF weight this memory contains
    recency: float  # 0..1, halves every half_life_days since updated_at
    weight: float  # 0.8 + 0.4 * importance: 0.8..1.2


@dataclass
class WriteResult:
    status: str  # created | replaced | unchanged | kept
    memory: Memory  # what is stored now
    previous: Memory | None  # what was stored before, when there was something
    message: str  # one line to show the user: a conflict is never silent


_FIELDS = [f.name for f in fields(Record)]
_DEFAULTS = {f.name: f.default for f in fields(Record) if f.default is not MISSING}


def _keywords(query):
    """The query's keywords, sorted and once each; UserError when it is not text or has none."""
    if not isinstance(query, str):
        raise UserError(
            f"the query must be text, got {type(query).__name__} — ask with words, e.g. 'units'"
        )
    check_text(query, "the query", UserError)
    words = sorted(set(tokens(query)))
    if not words:
        raise UserError(f"the query {query!r} has no keywords — ask with words, e.g. 'units'")
    return words


# ---------------------------------------------------------------- the store

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (key INTEGER PRIMARY KEY, tenant TEXT NOT NULL,
  id TEXT NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL, source TEXT NOT NULL,
  confidence REAL NOT NULL, importance REAL NOT NULL, created_at REAL NOT NULL,
  updated_at REAL NOT NULL, expires_at REAL NOT NULL, UNIQUE (tenant, id));
CREATE INDEX IF NOT EXISTS memories_expiry ON memories (expires_at);
CREATE INDEX IF NOT EXISTS memories_tenant ON memories (tenant, expires_at);
CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY,
  key INTEGER NOT NULL REFERENCES memories (key) ON DELETE CASCADE, kind TEXT, content TEXT,
  source TEXT, confidence REAL, importance REAL, updated_at REAL, replaced_at REAL);
CREATE INDEX IF NOT EXISTS history_key ON history (key);
CREATE TABLE IF NOT EXISTS terms (tenant TEXT NOT NULL, term TEXT NOT NULL,
  key INTEGER NOT NULL REFERENCES memories (key) ON DELETE CASCADE,
  PRIMARY KEY (tenant, term, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS terms_key ON terms (key)
"""
_COLUMNS = (
    "id, tenant, kind, content, source, confidence, importance, created_at, updated_at, expires_at"
)


class MemoryStore:
    """Long-term memory in one SQLite file (or ":memory:"), safe to share between processes.

    Writes run in BEGIN IMMEDIATE with a busy timeout and a bounded retry; WAL lets readers go on.
    The file's folder must exist: it is never created, so a typo cannot start an empty store.
    Example: store = MemoryStore(":memory:")
             store.write("ana", "Prefers metric units", id="units", confirmed=True)
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        retries: int = 5,
        backoff: float = 0.05,
    ) -> None:
        self.path, self.clock, self.retries, self.backoff = str(path), clock, retries, backoff
        self.busy_timeout = busy_timeout
        problem = None if self.path == ":memory:" else location_problem(Path(self.path))
        if problem:
            raise UserError(f"cannot open the memory store {self.path!r}: {problem}")
        self.db = connect(self.path, busy_timeout)
        try:
            self._open()
        except BaseException:
            self.db.close()
            raise

    def _open(self):
        """Check the file is a memory store (or new), then set it up; a failure is one UserError."""
        cannot = f"cannot open the memory store {self.path!r}:"
        try:
            listed = "SELECT name FROM sqlite_master WHERE type = 'table'"
            tables = sorted(t for (t,) in self.db.execute(listed))
            if tables and "memories" not in tables:  # e.g. --db runtime.db: never add to it
                raise UserError(
                    f"{cannot} it is a SQLite database of something else (tables: "
                    f"{', '.join(tables)[:60]}) — pass a memory store or a new file"
                )
            self.db.execute("PRAGMA foreign_keys = ON")
            self._retrying(lambda: use_wal(self.db))
            # NORMAL in WAL survives a killed process; power loss may undo the last commits
            self.db.execute("PRAGMA synchronous = NORMAL")
            self._write(lambda db: [db.execute(s) for s in SCHEMA.split(";")])
        except sqlite3.DatabaseError as exc:  # "file is not a database", "disk I/O error", ...
            fix = (
                "it is not a SQLite database — pass a memory store or a new file"
                if "not a database" in str(exc)
                else f"SQLite says {exc} — check that the file and its folder are writable"
            )
        else:
            return
        raise UserError(f"{cannot} {fix}")  # out here: sqlite's error is not its __context__

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({Path(self.path).name!r})"

    def _retrying(self, attempt):
        """Run attempt(); on "database is locked" wait and try again, a bounded number of times."""
        busy = (
            f"the memory file is busy: another process kept its write lock through "
            f"{self.retries + 1} tries of {self.busy_timeout:g} s — try again, or "
            "give MemoryStore a longer busy_timeout"
        )
        return retrying(attempt, self.retries, self.backoff, busy)

    def _write(self, work):
        """Run work(db) in one BEGIN IMMEDIATE transaction, retried while the file is busy."""
        return self._retrying(lambda: transaction(self.db, work))

    # ---- writing

    def write(self, tenant: str, content: str, **fields: Any) -> WriteResult:
        """Store one memory the user confirmed; the same id replaces the old value (in history).

        `fields` are Record's, with its defaults: id, kind, confirmed, source, confidence,
        importance, ttl_days. id=None (the default) lets the store name the slot ("m1", "m2",
        ...); a blank id is refused.

        Example: store.write("ana", "Prefers metric units", id="units", confirmed=True).status
                 ->  "created"
        """
        return self.write_many([asdict(Record(tenant, content, **fields))])[0]

    def write_many(self, records: list[dict]) -> list[WriteResult]:
        """Store several records in one transaction (all or none); a missing field is Record's
        default. Example: store.write_many([{...}, {...}])"""
        checked = []
        for r in records:
            r = {**_DEFAULTS, **r}
            problems = record_problems(r)
            if problems:
                kind = "not_confirmed" if "confirmed" in problems else "invalid_record"
                raise Refused("memory not stored: " + "; ".join(problems.values()), kind)
            checked.append(Record(**{name: r[name] for name in _FIELDS}))
        now = self.clock()

        def work(db):
            self._purge(db, now)  # expired memories leave the file at the next write
            return [self._apply(db, r, now) for r in checked]

        return self._write(work)

    def _apply(self, db, r: Record, now: float) -> WriteResult:
        """Write one checked record in the open transaction; resolve() decides what happens."""
        found = self._row(db, "tenant = ? AND id = ?", (r.tenant, r.id)) if r.id else None
        key, old = found or (None, None)
        content = r.content.strip()
        status, reason = resolve(old, r.source, content, now)
        if status == "kept":
            assert old is not None  # resolve keeps only a stored memory
            return WriteResult("kept", old, old, f"kept {old.content!r}, not {content!r}: {reason}")
        # the same words, repeated by the assistant, stay the user's
        keeps_user = status == "unchanged" and old is not None and old.source == "user"
        memory = Memory(
            id=r.id or self._next_id(db, r.tenant),
            tenant=r.tenant,
            kind=r.kind,
            content=content,
            source="user" if keeps_user else r.source,
            confidence=float(r.confidence),
            importance=float(r.importance),
            created_at=old.created_at if old else now,
            updated_at=now,
            expires_at=now + r.ttl_days * DAY,
        )
        if status != "replaced":
            self._save(db, key, memory, None, now)
            return WriteResult(status, memory, old, reason or "remembered")
        assert old is not None  # resolve replaces only a stored memory
        self._save(db, key, memory, old, now)
        message = f"replaced {old.content!r} with {content!r}: {reason}"
        return WriteResult(status, memory, old, message)

    def _save(self, db, key, memory, replaced, now):
        """Insert the memory (key None) or update row `key`, keeping `replaced` in history; then
        index its terms."""
        placeholders = ", ".join("?" * 10)
        if key is None:
            insert = f"INSERT INTO memories ({_COLUMNS}) VALUES ({placeholders})"
            key = db.execute(insert, astuple(memory)).lastrowid
        else:
            if replaced:
                was = replaced
                db.execute(
                    "INSERT INTO history (key, kind, content, source, confidence, importance, "
                    "updated_at, replaced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        was.kind,
                        was.content,
                        was.source,
                        was.confidence,
                        was.importance,
                        was.updated_at,
                        now,
                    ),
                )
            db.execute("DELETE FROM terms WHERE key = ?", (key,))
            update = f"UPDATE memories SET ({_COLUMNS}) = ({placeholders}) WHERE key = ?"
            db.execute(update, (*astuple(memory), key))
        db.executemany(
            "INSERT INTO terms (tenant, term, key) VALUES (?, ?, ?)",
            [(memory.tenant, term, key) for term in set(tokens(memory.content))],
        )

    def _next_id(self, db, tenant):
        number = db.execute("SELECT COALESCE(MAX(key), 0) + 1 FROM memories").fetchone()[0]
        while db.execute(
            "SELECT 1 FROM memories WHERE tenant = ? AND id = ?", (tenant, f"m{number}")
        ).fetchone():
            number += 1
        return f"m{number}"

    def _purge(self, db, now):
        """Delete expired memories (their history and terms go with them). Returns how many."""
        return db.execute("DELETE FROM memories WHERE expires_at <= ?", (now,)).rowcount

    # ---- reading

    def _row(self, db, where, params):
        row = db.execute(f"SELECT key, {_COLUMNS} FROM memories WHERE {where}", params).fetchone()
        return (row[0], Memory(*row[1:])) if row else None

    def get(self, tenant: str, id: str) -> Memory | None:
        """The live memory with this id, or None. Example: store.get("ana", "units").content"""
        tenant, id = checked_tenant(tenant), checked_id(id)
        found = self._row(
            self.db, "tenant = ? AND id = ? AND expires_at > ?", (tenant, id, self.clock())
        )
        return found and found[1]

    def list(self, tenant: str, kind: str | None = None) -> list[Memory]:
        """Every live memory of a tenant, oldest first.
        Example: [m.id for m in store.list("ana")]"""
        tenant = checked_tenant(tenant)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND expires_at > ? "
            "AND (? IS NULL OR kind = ?) ORDER BY created_at, key",
            (tenant, self.clock(), kind, kind),
        )
        return [Memory(*row) for row in rows]

    def count(self, tenant: str) -> int:
        """How many live memories a tenant has. Example: store.count("ana")  ->  3"""
        tenant = checked_tenant(tenant)
        return self.db.execute(
            "SELECT COUNT(*) FROM memories WHERE tenant = ? AND expires_at > ?",
            (tenant, self.clock()),
        ).fetchone()[0]

    def history(self, tenant: str, id: str) -> builtins.list[dict]:
        """The values this memory had before, oldest first.
        Example: store.history("ana", "units")"""
        tenant, id = checked_tenant(tenant), checked_id(id)
        rows = self.db.execute(
            "SELECT h.kind, h.content, h.source, h.confidence, h.importance, h.updated_at, "
            "h.replaced_at FROM history h JOIN memories m ON m.key = h.key WHERE m.tenant = ? "
            "AND m.id = ? ORDER BY h.seq",
            (tenant, id),
        )
        names = "kind content source confidence importance updated_at replaced_at".split()
        return [dict(zip(names, row, strict=True)) for row in rows]

    def recall(
        self, tenant: str, query: str, limit: int = 5, half_life_days: float = HALF_LIFE_DAYS
    ) -> builtins.list[MemoryHit]:
        """The memories most worth showing for a query, best first, with why they scored.

        Example: [h.memory.content for h in store.recall("ana", "which units?")]
                 ->  ["Prefers metric units"]
        """
        tenant = checked_tenant(tenant)
        words = _keywords(query)
        now = self.clock()
        weights = self._idf(tenant, words, now)
        total = sum(weights.values())

        def scored(terms, updated, importance, id, key):
            relevance = sum(weights[w] for w in sorted(json.loads(terms))) / total
            fresh = recency(now - updated, half_life_days)
            value = score(relevance, fresh, importance)
            return value, updated, id, key, relevance, fresh, importance

        best = heapq.nlargest(limit, (scored(*row) for row in self._matches(tenant, words, now)))
        # only the best become Memory objects; weight is score()'s importance factor
        return [
            MemoryHit(
                self._row(self.db, "key = ?", (key,))[1], value, relevance, fresh, 0.8 + 0.4 * i
            )
            for value, _, _, key, relevance, fresh, i in best
        ]

    def _idf(self, tenant, words, now):
        """{word: idf} over the tenant's live memories, so an expired one cannot sway them."""
        # the query words travel as one JSON array (json_each), so any number of words is one
        # parameter: one ? per word would stop at SQLite's limits on variables and UNION terms
        n = self.count(tenant)
        df = dict(
            self.db.execute(
                "SELECT t.term, COUNT(*) FROM json_each(?) q CROSS JOIN terms t ON t.tenant = ? "
                "AND t.term = q.value JOIN memories m ON m.key = t.key WHERE m.expires_at > ? "
                "GROUP BY t.term",
                (json.dumps(words), tenant, now),
            )
        )
        return {w: idf(df.get(w, 0), n) for w in words}

    def _matches(self, tenant, words, now):
        """(matched words as JSON, updated_at, importance, id, key) of each live memory sharing a
        word with the query."""
        # subtle: CROSS JOIN fixes the order (query words -> their terms -> those memories); left to
        # itself SQLite may walk every memory of the tenant instead
        return self.db.execute(
            "SELECT json_group_array(q.value), m.updated_at, m.importance, m.id, m.key "
            "FROM json_each(?) q CROSS JOIN terms t ON t.tenant = ? AND t.term = q.value "
            "CROSS JOIN memories m ON m.key = t.key WHERE m.tenant = ? AND m.expires_at > ? "
            "GROUP BY m.key",
            (json.dumps(words), tenant, tenant, now),
        )

    # ---- forgetting and privacy

    def delete(self, tenant: str, id: str) -> Memory:
        """Delete one memory with its history. Example: store.delete("ana", "units")"""
        tenant, id = checked_tenant(tenant), checked_id(id)

        def work(db):
            found = self._row(db, "tenant = ? AND id = ?", (tenant, id))
            if not found:
                raise UserError(
                    f"no memory {id!r} for tenant {tenant!r} — list them to see the ids"
                )
            db.execute("DELETE FROM memories WHERE key = ?", (found[0],))
            return found[1]

        return self._write(work)

    def forget(
        self,
        tenant: str,
        *,
        below_importance: float | None = None,
        older_than_days: float | None = None,
        keep: int | None = None,
        half_life_days: float = HALF_LIFE_DAYS,
    ) -> builtins.list[str]:
        """Delete by importance, by age, or down to `keep` memories (lowest priority first).
        Returns the ids it deleted.

        Example: store.forget("ana", keep=100)   # priority = recency x (0.8 + 0.4 x importance)
        """
        tenant = checked_tenant(tenant)
        if below_importance is None and older_than_days is None and keep is None:
            raise UserError(
                "forget() needs below_importance=, older_than_days= or keep= — say what to forget"
            )
        now = self.clock()

        def work(db):  # choose and delete in one transaction, so no write slips in between
            alive = self.list(tenant)
            drop = {
                m.id
                for m in alive
                if (below_importance is not None and m.importance < below_importance)
                or (older_than_days is not None and m.updated_at < now - older_than_days * DAY)
            }
            if keep is not None:
                rest = sorted(
                    (m for m in alive if m.id not in drop),
                    reverse=True,
                    key=lambda m: (
                        score(1.0, recency(now - m.updated_at, half_life_days), m.importance),
                        m.updated_at,
                    ),
                )
                drop |= {m.id for m in rest[max(keep, 0) :]}
            db.executemany(
                "DELETE FROM memories WHERE tenant = ? AND id = ?", [(tenant, i) for i in drop]
            )
            return sorted(drop)

        return self._write(work)

    def export(self, tenant: str) -> dict:
        """Everything stored about a tenant, with history, as JSON-able data.
        Example: store.export("ana")"""
        tenant = checked_tenant(tenant)
        self._write(lambda db: self._purge(db, self.clock()))
        memories = []
        for m in self.list(tenant):
            item = {k: (iso(v) if k.endswith("_at") else v) for k, v in asdict(m).items()}
            item["history"] = [
                {k: (iso(v) if k.endswith("_at") else v) for k, v in h.items()}
                for h in self.history(tenant, m.id)
            ]
            memories.append(item)
        return {"tenant": tenant, "count": len(memories), "memories": memories}


# ---------------------------------------------------------------- tools for an agent


def memory_tools(
    store: MemoryStore, tenant: str, confirm: Callable[[str], Any] | None = None, limit: int = 5
) -> list[Tool]:
    """The `remember` and `recall` tools of one tenant. Only the person confirms, never the model.

    `remember` asks `confirm(question)` (the person, through your app) before it writes, naming the
    old value when the id holds one ("Replace 'A' with 'B'?"); with no confirm, or any answer but
    yes, nothing changes and the model is told why (error "not_confirmed", or "kept" when the old
    value stays). The words are stored as the assistant's; a yes to replacing the person's own words
    makes the new words theirs (source "user"). The model has no `confirmed` argument to set, so no
    text it read (a tool result saying "remember that ...") can confirm.
    Example: remember, recall = memory_tools(store, "ana", confirm=input)
    """
    tenant = checked_tenant(tenant)

    @tool(risk="medium")
    def remember(id: str, content: str, kind: Kind, importance: float) -> dict:
        """Save one thing about the user for future conversations: only what the user told you
        and wants kept. The user is asked to confirm first. The same id replaces the old value.

        Args:
            id: a short slot name, e.g. 'units' or 'diet'
            content: one sentence, e.g. 'Prefers metric units'
            importance: 0 (trivia) to 1 (essential)
        """
        fields: dict[str, Any] = dict(
            id=id, kind=kind, importance=importance, source="assistant", confirmed=True
        )
        record = asdict(Record(tenant, content, **fields))
        if problems := record_problems(record):  # fixed by the model before anyone is asked
            raise ToolError("memory not stored: " + "; ".join(problems.values()), "invalid_record")
        old = store.get(tenant, id)
        replaced = old if old is not None and old.content != content.strip() else None
        _ask(confirm, replaced, content.strip())
        # the words are the model's ("assistant"); only when the person chose them over their
        # own words are they the person's ("user"), protected like the value they replace
        if replaced is not None and replaced.source == "user":
            record["source"] = "user"
        # no lock is held while the person answers; a write by another process in that gap is
        # judged by resolve() like any other
        result = store.write_many([record])[0]
        if result.status == "kept":  # e.g. the stored value is newer: the write changed nothing
            raise ToolError(
                f"not replaced: {result.message} — the stored value stands; call remember again "
                "only if the user asks for the change",
                "kept",
            )
        return {"status": result.status, "id": result.memory.id, "message": result.message}

    @tool
    def recall(query: str) -> list[dict]:
        """Look up what you remember about the user: the best matches first, [] when none.

        Args:
            query: keywords, e.g. 'units temperature'
        """
        try:
            hits, problem = store.recall(tenant, query, limit=limit), None
        except UserError as exc:
            hits, problem = [], str(exc)
        if problem:  # the model's query to fix, raised outside the except block
            raise ToolError(problem, "bad_query")
        found = [(h.memory, round(h.score, 3)) for h in hits]
        return [{"id": m.id, "kind": m.kind, "content": m.content, "score": s} for m, s in found]

    return [remember, recall]


def _ask(confirm, replaced, new):
    """Ask the person before a write; ToolError unless they say yes. `replaced`: the old Memory
    when the write changes its words (a yes is never blind), else None."""
    question = (
        f"Replace {replaced.content!r} with {new!r}? (yes/no)"
        if replaced
        else f"May I remember this about you: {new!r}? (yes/no)"
    )
    if approved(confirm(question) if confirm else None):
        return
    if replaced and confirm:
        raise ToolError(
            f"not replaced: the user kept {replaced.content!r} — go on with that value "
            "and do not ask again unless the user brings it up",
            "kept",
        )
    raise ToolError(
        "not stored: the user did not confirm it — remember only what the user asked you "
        "to keep; they are asked before anything is stored",
        "not_confirmed",
    )


# The command line is in labkit/__main__.py (it imports this module, so this one cannot import it)
if __name__ == "__main__":
    sys.exit("the memory command line is python -m labkit memory set|list|delete|export")
