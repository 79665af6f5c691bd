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
import stat
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from itertools import count
from pathlib import Path

from .config import redact
from .errors import ServiceError, ToolError, UserError
from .schema import WHOLE_CHARACTERS, check_text, required_id, unencodable
from .tools import Tool, approved

KINDS = ("preference", "fact", "episode", "note")
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


def _unit(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


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


def record_problems(record: dict) -> dict:
    """What is wrong with a memory record, as {field: "what — fix"}; empty when it may be stored.

    Example: record_problems({..., "confirmed": False})  ->  {"confirmed": "the user has not ..."}
    """
    r, problems = record, {}
    try:
        _tenant(r.get("tenant"))
    except UserError as exc:
        problems["tenant"] = str(exc)
    # id None is the documented way to let the store assign one ("m1"); "" or "  " is refused
    if r.get("id") is not None and not (isinstance(r["id"], str) and _ID.fullmatch(r["id"])):
        problems["id"] = "id must be 1-64 letters, digits or _.:- — name the slot, e.g. 'units'"
    if r.get("kind") not in KINDS:
        problems["kind"] = f"kind {r.get('kind')!r} is unknown — use one of {', '.join(KINDS)}"
    content = r.get("content")
    if not isinstance(content, str) or not content.strip():
        problems["content"] = "content is empty — say what to remember in a sentence"
    elif len(content) > MAX_CHARS:
        problems["content"] = (
            f"content has {len(content)} characters — at most {MAX_CHARS} characters; summarise"
        )
    elif bad_text := unencodable(content, "content"):
        problems["content"] = f"{bad_text} — {WHOLE_CHARACTERS}"
    elif redact(content) != content:
        problems["content"] = (
            "content looks like it holds a key (sk-...) — never store secrets in memory"
        )
    if r.get("source") not in SOURCES:
        problems["source"] = (
            f"source {r.get('source')!r} is unknown — use one of {', '.join(SOURCES)}"
        )
    for name in ("confidence", "importance"):
        if not _unit(r.get(name)):
            problems[name] = (
                f"{name} must be a number from 0 to 1, got {r.get(name)!r} — 0 is low, 1 is high"
            )
    ttl = r.get("ttl_days")
    if not (
        isinstance(ttl, (int, float))
        and not isinstance(ttl, bool)
        and TTL_DAYS[0] <= ttl <= TTL_DAYS[1]
    ):
        problems["ttl_days"] = (
            f"ttl_days must be {TTL_DAYS[0]}-{TTL_DAYS[1]}, got {ttl!r} — nothing is kept forever"
        )
    if r.get("confirmed") is not True:
        problems["confirmed"] = (
            "the user has not confirmed this — ask the user, and write with "
            "confirmed=True only after they say yes"
        )
    return problems


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


def _busy(exc):
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


def _location_problem(path):
    """Why `path` cannot hold a memory store, as "what — fix"; None when SQLite may open it.

    A missing folder is refused, not created: a typo must not start an empty store.
    """
    try:
        if path.is_dir():
            return f"it is a folder, not a file — pass a file in it, e.g. {str(path / 'm.db')!r}"
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            return "it is not a regular file (a device, pipe or socket) — pass a .sqlite3 file"
        if not path.parent.is_dir():
            where = "is not a folder" if path.parent.exists() else "does not exist"
            return f"the folder {str(path.parent)!r} {where} — create it first, or fix a typo"
    except (OSError, ValueError) as exc:  # e.g. a name too long, a NUL byte
        return f"the path cannot be used ({getattr(exc, 'strerror', None) or exc}) — pass another"
    return None


class MemoryStore:
    """Long-term memory in one SQLite file (or ":memory:"), safe to share between processes.

    Writes run in BEGIN IMMEDIATE with a busy timeout and a bounded retry; WAL lets readers go on.
    The file's folder must exist: it is never created, so a typo cannot start an empty store.
    Example: store = MemoryStore(":memory:")
             store.write("ana", "Prefers metric units", id="units", confirmed=True)
    """

    def __init__(
        self, path=":memory:", *, clock=time.time, busy_timeout=5.0, retries=5, backoff=0.05
    ):
        self.path, self.clock, self.retries, self.backoff = str(path), clock, retries, backoff
        self.busy_timeout = busy_timeout
        problem = None if self.path == ":memory:" else _location_problem(Path(self.path))
        if problem:
            raise UserError(f"cannot open the memory store {self.path!r}: {problem}")
        self.db = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
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
            self._retrying(lambda: self.db.execute("PRAGMA journal_mode = WAL"))
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"MemoryStore({Path(self.path).name!r})"

    def _retrying(self, attempt):
        """Run attempt(); on "database is locked" wait and try again, a bounded number of times."""
        for number in range(self.retries + 1):
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
            if number < self.retries:
                time.sleep(self.backoff * 2**number)
        raise ServiceError(
            f"the memory file is busy: another process kept its write lock through "
            f"{self.retries + 1} tries of {self.busy_timeout:g} s — try again, or "
            "give MemoryStore a longer busy_timeout"
        )

    def _write(self, work):
        """Run work(db) in one BEGIN IMMEDIATE transaction: all of it commits, or none of it."""

        def attempt():
            self.db.execute("BEGIN IMMEDIATE")  # take the write lock now, not halfway through
            try:
                result = work(self.db)
                self.db.execute("COMMIT")
                return result
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise

        return self._retrying(attempt)

    # ---- writing

    def write(
        self,
        tenant: str,
        content: str,
        *,
        id: str | None = None,
        kind: str = "preference",
        confirmed: bool = False,
        source: str = "user",
        confidence: float = 1.0,
        importance: float = 0.5,
        ttl_days: float = 90,
    ) -> WriteResult:
        """Store one memory the user confirmed; the same id replaces the old value (in history).

        id=None (the default) lets the store name the slot ("m1", "m2", ...); a blank id is refused.

        Example: store.write("ana", "Prefers metric units", id="units", confirmed=True).status
                 ->  "created"
        """
        return self.write_many(
            [
                dict(
                    tenant=tenant,
                    content=content,
                    id=id,
                    kind=kind,
                    confirmed=confirmed,
                    source=source,
                    confidence=confidence,
                    importance=importance,
                    ttl_days=ttl_days,
                )
            ]
        )[0]

    def write_many(self, records: list[dict]) -> list[WriteResult]:
        """Store several records in one transaction (all or none).
        Example: store.write_many([{...}, {...}])"""
        records = [
            dict(
                {
                    "kind": "preference",
                    "source": "user",
                    "confidence": 1.0,
                    "importance": 0.5,
                    "ttl_days": 90,
                    "id": None,
                    "confirmed": False,
                },
                **r,
            )
            for r in records
        ]
        for r in records:
            problems = record_problems(r)
            if problems:
                kind = "not_confirmed" if "confirmed" in problems else "invalid_record"
                raise Refused("memory not stored: " + "; ".join(problems.values()), kind)
        now = self.clock()

        def work(db):
            self._purge(db, now)  # expired memories leave the file at the next write
            return [self._apply(db, r, now) for r in records]

        return self._write(work)

    def _apply(self, db, r, now):
        old = self._row(db, "tenant = ? AND id = ?", (r["tenant"], r["id"])) if r["id"] else None
        status, reason = resolve(old and old[1], r["source"], r["content"].strip(), now)
        values = dict(
            id=r["id"] or self._next_id(db, r["tenant"]),
            tenant=r["tenant"],
            kind=r["kind"],
            content=r["content"].strip(),
            source=r["source"],
            confidence=float(r["confidence"]),
            importance=float(r["importance"]),
            created_at=old[1].created_at if old else now,
            updated_at=now,
            expires_at=now + r["ttl_days"] * DAY,
        )
        if status == "kept":
            return WriteResult(
                "kept",
                old[1],
                old[1],
                f"kept {old[1].content!r}, not {values['content']!r}: {reason}",
            )
        if status == "unchanged" and old[1].source == "user":
            values["source"] = "user"  # the same words, repeated by the assistant, stay the user's
        if old:
            key, previous = old
            if status == "replaced":
                db.execute(
                    "INSERT INTO history (key, kind, content, source, confidence, importance, "
                    "updated_at, "
                    "replaced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        previous.kind,
                        previous.content,
                        previous.source,
                        previous.confidence,
                        previous.importance,
                        previous.updated_at,
                        now,
                    ),
                )
            db.execute("DELETE FROM terms WHERE key = ?", (key,))
            db.execute(
                f"UPDATE memories SET ({_COLUMNS}) = ({', '.join('?' * 10)}) WHERE key = ?",
                (*values.values(), key),
            )
        else:
            key = db.execute(
                f"INSERT INTO memories ({_COLUMNS}) VALUES ({', '.join('?' * 10)})",
                tuple(values.values()),
            ).lastrowid
        db.executemany(
            "INSERT INTO terms (tenant, term, key) VALUES (?, ?, ?)",
            [(r["tenant"], term, key) for term in set(tokens(values["content"]))],
        )
        message = (
            f"replaced {old[1].content!r} with {values['content']!r}: {reason}"
            if status == "replaced"
            else reason or "remembered"
        )
        return WriteResult(status, Memory(**values), old[1] if old else None, message)

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
        names = (
            "kind",
            "content",
            "source",
            "confidence",
            "importance",
            "updated_at",
            "replaced_at",
        )
        return [dict(zip(names, row, strict=True)) for row in rows]

    def recall(
        self, tenant: str, query: str, limit: int = 5, half_life_days: float = HALF_LIFE_DAYS
    ) -> list[Hit]:
        """The memories most worth showing for a query, best first, with why they scored.

        Example: [h.memory.content for h in store.recall("ana", "which units?")]
                 ->  ["Prefers metric units"]
        """
        tenant = _tenant(tenant)
        if not isinstance(query, str):
            raise UserError(
                f"the query must be text, got {type(query).__name__} — ask with words, e.g. 'units'"
            )
        check_text(query, "the query", UserError)
        words = sorted(set(tokens(query)))
        if not words:
            raise UserError(f"the query {query!r} has no keywords — ask with words, e.g. 'units'")
        now, listed = self.clock(), json.dumps(words)
        # the query words travel as one JSON array (json_each), so any number of words is one
        # parameter: one ? per word would stop at SQLite's limits on variables and UNION terms
        # n and df count live memories only, so an expired memory cannot sway the weights
        n = self.count(tenant)
        df = dict(
            self.db.execute(
                "SELECT t.term, COUNT(*) FROM json_each(?) q CROSS JOIN terms t ON t.tenant = ? "
                "AND t.term = q.value JOIN memories m ON m.key = t.key WHERE m.expires_at > ? "
                "GROUP BY t.term",
                (listed, tenant, now),
            )
        )
        weights = {w: idf(df.get(w, 0), n) for w in words}
        total = sum(weights.values())
        # subtle: CROSS JOIN fixes the order (query words -> their terms -> those memories); left to
        # itself SQLite may walk every memory of the tenant instead
        rows = self.db.execute(
            "SELECT json_group_array(q.value), m.updated_at, m.importance, m.id, m.key "
            "FROM json_each(?) q CROSS JOIN terms t ON t.tenant = ? AND t.term = q.value "
            "CROSS JOIN memories m ON m.key = t.key WHERE m.tenant = ? AND m.expires_at > ? "
            "GROUP BY m.key",
            (listed, tenant, tenant, now),
        )
        matched = (
            (sum(weights[w] for w in sorted(json.loads(terms))) / total, *rest)
            for terms, *rest in rows
        )
        scored = (
            (
                score(relevance, recency(now - updated, half_life_days), importance),
                updated,
                id,
                key,
                relevance,
            )
            for relevance, updated, importance, id, key in matched
        )
        hits = []
        # only the best become Memory objects
        for value, _, _, key, relevance in heapq.nlargest(limit, scored):
            memory = self._row(self.db, "key = ?", (key,))[1]
            hits.append(
                Hit(
                    memory,
                    value,
                    relevance,
                    recency(now - memory.updated_at, half_life_days),
                    0.8 + 0.4 * memory.importance,
                )
            )
        return hits

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


def memory_tools(store: MemoryStore, tenant: str, confirm=None, limit: int = 5) -> list[Tool]:
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

    def remember(id, content, kind, importance):
        record = dict(
            tenant=tenant,
            id=id,
            content=content,
            kind=kind,
            importance=importance,
            source="assistant",
            confidence=1.0,
            ttl_days=90,
            confirmed=True,
        )
        if record_problems(record):  # a bad record is fixed by the model before anyone is asked
            raise ToolError(
                "memory not stored: " + "; ".join(record_problems(record).values()),
                "invalid_record",
            )
        old, new = store.get(tenant, id), content.strip()
        replacing = old is not None and old.content != new
        question = (
            f"Replace {old.content!r} with {new!r}? (yes/no)"
            if replacing  # a yes is never blind
            else f"May I remember this about you: {new!r}? (yes/no)"
        )
        if not approved(confirm(question) if confirm else None):
            if replacing and confirm:
                raise ToolError(
                    f"not replaced: the user kept {old.content!r} — go on with that value "
                    "and do not ask again unless the user brings it up",
                    "kept",
                )
            raise ToolError(
                "not stored: the user did not confirm it — remember only what the user asked you "
                "to keep; they are asked before anything is stored",
                "not_confirmed",
            )
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

    def recall(query):
        try:
            hits, problem = store.recall(tenant, query, limit=limit), None
        except UserError as exc:
            hits, problem = [], str(exc)
        if problem:  # the model's query to fix, raised outside the except block
            raise ToolError(problem, "bad_query")
        return [
            {
                "id": h.memory.id,
                "kind": h.memory.kind,
                "content": h.memory.content,
                "score": round(h.score, 3),
            }
            for h in hits
        ]

    text = {"type": "string"}
    return [
        Tool(
            "remember",
            "Save one thing about the user for future conversations: only what the user told "
            "you and wants kept. The user is asked to confirm first. "
            "The same id replaces the old value.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "content", "kind", "importance"],
                "properties": {
                    "id": {**text, "description": "a short slot name, e.g. 'units' or 'diet'"},
                    "content": {**text, "description": "one sentence, e.g. 'Prefers metric units'"},
                    "kind": {"type": "string", "enum": list(KINDS)},
                    "importance": {"type": "number", "description": "0 (trivia) to 1 (essential)"},
                },
            },
            remember,
            risk="medium",
        ),
        Tool(
            "recall",
            "Look up what you remember about the user: the best matches first, [] when none.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["query"],
                "properties": {
                    "query": {**text, "description": "keywords, e.g. 'units temperature'"}
                },
            },
            recall,
        ),
    ]


# python -m labkit.memory: the same command line as python -m labkit memory
if __name__ == "__main__":
    from labkit.__main__ import memory_main

    sys.exit(memory_main(prog="python -m labkit.memory"))
