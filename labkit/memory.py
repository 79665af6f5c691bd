"""Long-term memory: a SQLite store that keeps only what the user confirmed, and forgets on purpose.

Built in 03_memory. `MemoryStore` refuses unconfirmed writes, bounds length and TTL (1-365 days),
keeps every replaced value in a history table, resolves a conflict newer-and-explicit-wins and says
so, and never returns expired items or another tenant's. `recall` ranks by (relevance x recency) x
(0.8 + 0.4 x importance), relevance = IDF-weighted keyword overlap. `WorkingMemory` is the
in-process scratchpad; `consolidate` promotes what matters. Command line: labkit/__main__.py.
Deliberately left out: embeddings (06_rag), stemming, encryption at rest, spotting contradictions
in free text (a model's job; here the id names what a memory is about), power-loss durability.
"""

# MemoryStore.list would shadow the built-in list in the annotations of the methods after it
from __future__ import annotations

import heapq
import json
import math
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, astuple, dataclass, fields
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any, Literal, get_args

from .config import redact
from .errors import ToolError, UserError
from .schema import WHOLE_CHARACTERS, check_text, required_id, unencodable
from .sqlite_store import connect, location_problem, retrying, transaction, use_wal
from .tools import Tool, approved, tool

Kind = Literal["preference", "fact", "episode", "note"]
KINDS = get_args(Kind)
SOURCES = ("user", "assistant", "tool")  # who said it; only "user" is explicit
MAX_CHARS = 500  # a memory is a sentence or two, not a document
TTL_DAYS = (1, 365)
DAY = 86400.0
HALF_LIFE_DAYS = 30.0  # recency halves every 30 days without an update
PROMOTE_AT = 0.7  # working-memory importance that earns long-term storage
STOPWORDS = frozenset(
    "a about an and are as at be by can could did do does for from has have he her his how i "
    "in is it its me my of on or she should that the their them they this to was we were what "
    "when where which who why will with would you your user users".split()
)
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
MAX_TENANT = 100


class Refused(UserError):
    """The memory policy refused a write. `kind` is "not_confirmed" or "invalid_record"."""

    def __init__(self, message, kind="invalid_record"):
        super().__init__(message)
        self.kind = kind


@dataclass
class Memory:
    id: str
    tenant: str
    kind: str  # preference | fact | episode | note
    content: str
    source: str  # user | assistant | tool
    confidence: float  # 0..1: how sure we are it is true
    importance: float  # 0..1: how much it matters when it is relevant
    created_at: float  # seconds since the epoch, from the store's clock
    updated_at: float
    expires_at: float


@dataclass
class Hit:
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


@dataclass
class Record:
    """One memory to write, as the caller gives it: every field and every default, once.

    write() builds one; write_many() fills a dict's missing fields from these defaults.
    Example: asdict(Record("ana", "Prefers metric units", id="units", confirmed=True))
    """

    tenant: str
    content: str
    id: str | None = None  # None: the store names the slot ("m1", "m2", ...)
    kind: str = "preference"  # one of KINDS
    confirmed: bool = False  # True only after the person said yes
    source: str = "user"  # one of SOURCES
    confidence: float = 1.0
    importance: float = 0.5
    ttl_days: float = 90


_FIELDS = [f.name for f in fields(Record)]
_DEFAULTS = {f.name: f.default for f in fields(Record) if f.default is not MISSING}


class ManualClock:
    """A clock that moves only when told: tests and notebooks pass it instead of time.time.

    Example: clock = ManualClock(); store = MemoryStore(clock=clock); clock.advance(days=31)
    """

    def __init__(self, start=1735689600.0):  # 2025-01-01T00:00:00Z
        self.now = float(start)

    def __call__(self):
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


def iso(seconds: float) -> str:
    """A timestamp as UTC ISO text. Example: iso(1735689600.0)  ->  "2025-01-01T00:00:00Z" """
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the write policy and the score


def _tenant(tenant):
    """The tenant, checked: whose memory it is, 1-100 characters (UserError otherwise)."""
    how = f"name whose memory this is in 1-{MAX_TENANT} characters, e.g. tenant='ana'"
    if len(required_id(tenant, "tenant", how)) > MAX_TENANT:
        raise UserError(f"tenant has {len(tenant)} characters — {how}")
    return tenant


def _memory_id(id):
    """A memory id to look up, checked: a missing, blank or malformed one can never be stored."""
    how = "pass the id a write returned, e.g. 'units' (store.list(tenant) shows them)"
    if not _ID.fullmatch(required_id(id, "id", how)):
        raise UserError(f"id {id!r} is not a memory id (1-64 letters, digits or _.:-) — {how}")
    return id


def _number_in(value, low, high):
    """Whether value is a real number (not a bool) from low to high."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def _unit(value):
    return _number_in(value, 0, 1)


def _tenant_problem(tenant):
    try:
        _tenant(tenant)
    except UserError as exc:
        return str(exc)
    return None


def _id_problem(id):
    # id None is the documented way to let the store assign one ("m1"); "" or "  " is refused
    if id is None or (isinstance(id, str) and _ID.fullmatch(id)):
        return None
    return "id must be 1-64 letters, digits or _.:- — name the slot, e.g. 'units'"


def _content_problem(content):
    if not isinstance(content, str) or not content.strip():
        return "content is empty — say what to remember in a sentence"
    if len(content) > MAX_CHARS:
        return f"content has {len(content)} characters — at most {MAX_CHARS} characters; summarise"
    if bad_text := unencodable(content, "content"):
        return f"{bad_text} — {WHOLE_CHARACTERS}"
    if redact(content) != content:
        return "content looks like it holds a key (sk-...) — never store secrets in memory"
    return None


def _one_of(name, value, allowed):
    if value in allowed:
        return None
    return f"{name} {value!r} is unknown — use one of {', '.join(allowed)}"


def _unit_problem(name, value):
    if _unit(value):
        return None
    return f"{name} must be a number from 0 to 1, got {value!r} — 0 is low, 1 is high"


def _ttl_problem(ttl):
    if _number_in(ttl, *TTL_DAYS):
        return None
    return f"ttl_days must be {TTL_DAYS[0]}-{TTL_DAYS[1]}, got {ttl!r} — nothing is kept forever"


def _confirmed_problem(confirmed):
    if confirmed is True:
        return None
    return (
        "the user has not confirmed this — ask the user, and write with "
        "confirmed=True only after they say yes"
    )


def record_problems(record: dict) -> dict:
    """What is wrong with a memory record, as {field: "what — fix"}; empty when it may be stored.

    Example: record_problems({..., "confirmed": False})  ->  {"confirmed": "the user has not ..."}
    """
    r = record
    problems = {
        "tenant": _tenant_problem(r.get("tenant")),
        "id": _id_problem(r.get("id")),
        "kind": _one_of("kind", r.get("kind"), KINDS),
        "content": _content_problem(r.get("content")),
        "source": _one_of("source", r.get("source"), SOURCES),
        "confidence": _unit_problem("confidence", r.get("confidence")),
        "importance": _unit_problem("importance", r.get("importance")),
        "ttl_days": _ttl_problem(r.get("ttl_days")),
        "confirmed": _confirmed_problem(r.get("confirmed")),
    }
    return {name: problem for name, problem in problems.items() if problem}


def tokens(text: str) -> list[str]:
    """The keywords of a text: lower-cased words, minus stopwords. Example: tokens("I like Tea")
    ->  ["like", "tea"]"""
    return [w for w in re.findall(r"\w+", text.casefold()) if len(w) > 1 and w not in STOPWORDS]


def idf(df: int, n: int) -> float:
    """Inverse document frequency: rare words weigh more. Example: idf(1, 100) > idf(50, 100)"""
    return math.log((n + 1) / (df + 1)) + 1.0


def recency(age_seconds: float, half_life_days: float = HALF_LIFE_DAYS) -> float:
    """1.0 for a fresh memory, 0.5 after one half-life. Example: recency(30 * DAY)  ->  0.5"""
    return 0.5 ** (max(age_seconds, 0.0) / (half_life_days * DAY))


def score(relevance: float, recency: float, importance: float) -> float:
    """The ranking formula. Example: score(1.0, 0.5, 1.0)  ->  0.6"""
    return relevance * recency * (0.8 + 0.4 * importance)


def resolve(old: Memory | None, new_source: str, new_content: str, now: float) -> tuple[str, str]:
    """Decide what a write to an existing id does: (status, reason). Newer and explicit wins.

    Example: resolve(None, "user", "metric", now)  ->  ("created", "")
    """
    if old is None:
        return "created", ""
    if old.content == new_content:
        return "unchanged", "already stored; its TTL starts again"
    if now < old.updated_at:  # subtle: clocks differ between processes; older never wins
        return "kept", "the stored value is newer than this statement"
    if old.source == "user" and new_source != "user":
        return (
            "kept",
            f"the user said it; this came from the {new_source} — "
            "ask the user to confirm the change",
        )
    return "replaced", "newer statement wins; the old value is in history"


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
            return WriteResult("kept", old, old, f"kept {old.content!r}, not {content!r}: {reason}")
        # the same words, repeated by the assistant, stay the user's
        keeps_user = status == "unchanged" and old.source == "user"
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
        tenant, id = _tenant(tenant), _memory_id(id)
        found = self._row(
            self.db, "tenant = ? AND id = ? AND expires_at > ?", (tenant, id, self.clock())
        )
        return found and found[1]

    def list(self, tenant: str, kind: str | None = None) -> list[Memory]:
        """Every live memory of a tenant, oldest first.
        Example: [m.id for m in store.list("ana")]"""
        tenant = _tenant(tenant)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND expires_at > ? "
            "AND (? IS NULL OR kind = ?) ORDER BY created_at, key",
            (tenant, self.clock(), kind, kind),
        )
        return [Memory(*row) for row in rows]

    def count(self, tenant: str) -> int:
        """How many live memories a tenant has. Example: store.count("ana")  ->  3"""
        tenant = _tenant(tenant)
        return self.db.execute(
            "SELECT COUNT(*) FROM memories WHERE tenant = ? AND expires_at > ?",
            (tenant, self.clock()),
        ).fetchone()[0]

    def history(self, tenant: str, id: str) -> list[dict]:
        """The values this memory had before, oldest first.
        Example: store.history("ana", "units")"""
        tenant, id = _tenant(tenant), _memory_id(id)
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
    ) -> list[Hit]:
        """The memories most worth showing for a query, best first, with why they scored.

        Example: [h.memory.content for h in store.recall("ana", "which units?")]
                 ->  ["Prefers metric units"]
        """
        tenant = _tenant(tenant)
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
            Hit(self._row(self.db, "key = ?", (key,))[1], value, relevance, fresh, 0.8 + 0.4 * i)
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
        tenant, id = _tenant(tenant), _memory_id(id)

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
    ) -> list[str]:
        """Delete by importance, by age, or down to `keep` memories (lowest priority first).
        Returns the ids it deleted.

        Example: store.forget("ana", keep=100)   # priority = recency x (0.8 + 0.4 x importance)
        """
        tenant = _tenant(tenant)
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
        tenant = _tenant(tenant)
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


# ---------------------------------------------------------------- working memory


@dataclass
class Item:
    id: str  # "w1", "w2", ... in the order they were added
    content: str
    kind: str
    importance: float
    confirmed: bool  # the user said yes to keeping it
    added_at: float
    expires_at: float
    promoted_to: str | None = None  # the long-term memory id, once consolidated


class WorkingMemory:
    """What the agent holds during one session, in process: a TTL and a capacity bound it.

    When full, the item with the lowest priority leaves: lowest importance, then the oldest.
    Example: wm = WorkingMemory(capacity=3, clock=clock)
             wm.add("Draft is due Friday", importance=0.8)
    """

    def __init__(self, capacity=20, ttl_seconds=3600.0, clock=time.time):
        if not isinstance(capacity, int) or capacity < 1 or ttl_seconds <= 0:
            raise UserError(
                "WorkingMemory needs capacity >= 1 and ttl_seconds > 0 — "
                "e.g. WorkingMemory(20, 3600)"
            )
        self.capacity, self.ttl_seconds, self.clock = capacity, ttl_seconds, clock
        self.evicted = []  # every item pushed out by capacity, in order
        self._items, self._ids = {}, count(1)

    def add(
        self, content: str, *, kind: str = "note", importance: float = 0.5, confirmed: bool = False
    ) -> Item:
        """Hold one item; may push out the lowest-priority one.
        Example: wm.add("Uses Oxford commas")"""
        if (
            not isinstance(content, str)
            or not content.strip()
            or kind not in KINDS
            or not _unit(importance)
        ):
            raise UserError(
                "a working-memory item needs non-empty content, a kind from "
                f"{', '.join(KINDS)} and importance from 0 to 1"
            )
        check_text(content, "content", UserError)
        now = self.clock()
        item = Item(
            f"w{next(self._ids)}",
            content.strip(),
            kind,
            importance,
            confirmed,
            now,
            now + self.ttl_seconds,
        )
        self._items[item.id] = item
        self.items()  # drop the expired before counting
        while len(self._items) > self.capacity:
            # the new item itself leaves when it is the least important one
            lowest = min(
                self._items.values(), key=lambda i: (i.importance, i.added_at, int(i.id[1:]))
            )
            self.evicted.append(self._items.pop(lowest.id))
        return item

    def items(self) -> list[Item]:
        """The live items, oldest first. Example: [i.content for i in wm.items()]"""
        now = self.clock()
        for item in [i for i in self._items.values() if i.expires_at <= now]:
            del self._items[item.id]
        return list(self._items.values())

    def consolidate(
        self,
        store: MemoryStore,
        tenant: str,
        *,
        threshold: float = PROMOTE_AT,
        confirm=None,
        ttl_days: float = 90,
    ) -> dict:
        """Promote items with importance >= threshold to long-term memory, under the same policy.

        An item goes only if it was confirmed when added or `confirm(question)` answers an explicit
        yes now (`approved`, the one consent rule). It is stored with source "assistant": the agent
        phrased it and the person only agreed to keep it (the rule of the `remember` tool), so it
        never passes for the person's own words.
        Example: wm.consolidate(store, "ana", confirm=lambda question: "yes")
        """
        tenant = _tenant(tenant)  # before anyone is asked anything
        report = {"promoted": {}, "needs_confirmation": [], "not_important": []}
        for item in self.items():
            if item.promoted_to:
                continue
            if item.importance < threshold:
                report["not_important"].append(item.id)
                continue
            question = f"May I remember: {item.content!r}?"
            if not item.confirmed and not (confirm and approved(confirm(question))):
                report["needs_confirmation"].append(item.id)
                continue
            result = store.write(
                tenant,
                item.content,
                kind=item.kind,
                importance=item.importance,
                ttl_days=ttl_days,
                confirmed=True,
                source="assistant",
            )
            item.confirmed, item.promoted_to = True, result.memory.id
            report["promoted"][item.id] = result.memory.id
        return report


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
    tenant = _tenant(tenant)

    @tool(risk="medium")
    def remember(id: str, content: str, kind: Kind, importance: float) -> dict:
        """Save one thing about the user for future conversations: only what the user told you
        and wants kept. The user is asked to confirm first. The same id replaces the old value.

        Args:
            id: a short slot name, e.g. 'units' or 'diet'
            content: one sentence, e.g. 'Prefers metric units'
            importance: 0 (trivia) to 1 (essential)
        """
        fields = dict(id=id, kind=kind, importance=importance, source="assistant", confirmed=True)
        record = asdict(Record(tenant, content, **fields))
        if problems := record_problems(record):  # fixed by the model before anyone is asked
            raise ToolError("memory not stored: " + "; ".join(problems.values()), "invalid_record")
        old = store.get(tenant, id)
        replacing = old is not None and old.content != content.strip()
        _ask(confirm, old if replacing else None, content.strip())
        # the words are the model's ("assistant"); only when the person chose them over their
        # own words are they the person's ("user"), protected like the value they replace
        if replacing and old.source == "user":
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


# python -m labkit.memory: the same command line as python -m labkit memory
if __name__ == "__main__":
    from labkit.__main__ import memory_main

    sys.exit(memory_main(prog="python -m labkit.memory"))
