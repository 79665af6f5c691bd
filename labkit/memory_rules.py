"""The rules of memory, without a database: what may be kept, how a conflict ends, how recall ranks.

Built in 03_memory's Build it; labkit/memory.py stores by these rules in SQLite. `record_problems`
is the write policy (confirmed, bounded length, TTL 1-365 days, no secrets); `resolve` decides a
write to a taken id (newer and explicit wins); `score` = relevance x recency x (0.8 + 0.4 x
importance). `WorkingMemory` is the in-process scratchpad under the same rules; `consolidate`
promotes what matters to a store. Deliberately left out: stemming, embeddings (06_rag), spotting
contradictions in free text (a model's job; here the id names what a memory is about).
"""

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count
from typing import Any, Literal, Protocol, get_args

from .config import redact
from .errors import UserError
from .schema import WHOLE_CHARACTERS, check_text, is_number, required_id, unencodable
from .tools import approved

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


class ManualClock:
    """A clock that moves only when told: tests and notebooks pass it instead of time.time.

    Example: clock = ManualClock(); store = MemoryStore(clock=clock); clock.advance(days=31)
    """

    def __init__(self, start: float = 1735689600.0) -> None:  # 2025-01-01T00:00:00Z
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


def iso(seconds: float) -> str:
    """A timestamp as UTC ISO text. Example: iso(1735689600.0)  ->  "2025-01-01T00:00:00Z" """
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the write policy and the score


def checked_tenant(tenant: str) -> str:
    """The tenant, checked: whose memory it is, 1-100 characters (UserError otherwise).

    Example: checked_tenant("ana")  ->  "ana"
    """
    how = f"name whose memory this is in 1-{MAX_TENANT} characters, e.g. tenant='ana'"
    if len(required_id(tenant, "tenant", how)) > MAX_TENANT:
        raise UserError(f"tenant has {len(tenant)} characters — {how}")
    return tenant


def checked_id(id: str) -> str:
    """A memory id to look up, checked: a missing, blank or malformed one can never be stored.

    Example: checked_id("units")  ->  "units"
    """
    how = "pass the id a write returned, e.g. 'units' (store.list(tenant) shows them)"
    if not _ID.fullmatch(required_id(id, "id", how)):
        raise UserError(f"id {id!r} is not a memory id (1-64 letters, digits or _.:-) — {how}")
    return id


def _number_in(value, low, high):
    """Whether value is a real number (not a bool) from low to high."""
    return is_number(value) and low <= value <= high


def is_unit(value: object) -> bool:
    """Whether a value is a number from 0 to 1, not a bool. Example: is_unit(0.5)  ->  True"""
    return _number_in(value, 0, 1)


def _tenant_problem(tenant):
    try:
        checked_tenant(tenant)
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
    if is_unit(value):
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


# ---------------------------------------------------------------- working memory


class Store(Protocol):
    """What consolidate needs of a store: labkit.memory.MemoryStore has it."""

    def write(self, tenant: str, content: str, **fields: Any) -> Any: ...


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

    def __init__(
        self,
        capacity: int = 20,
        ttl_seconds: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(capacity, int) or capacity < 1 or ttl_seconds <= 0:
            raise UserError(
                "WorkingMemory needs capacity >= 1 and ttl_seconds > 0 — "
                "e.g. WorkingMemory(20, 3600)"
            )
        self.capacity, self.ttl_seconds, self.clock = capacity, ttl_seconds, clock
        self.evicted: list = []  # every item pushed out by capacity, in order
        self._items: dict = {}
        self._ids = count(1)

    def add(
        self, content: str, *, kind: str = "note", importance: float = 0.5, confirmed: bool = False
    ) -> Item:
        """Hold one item; may push out the lowest-priority one.
        Example: wm.add("Uses Oxford commas")"""
        if (
            not isinstance(content, str)
            or not content.strip()
            or kind not in KINDS
            or not is_unit(importance)
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
        store: Store,
        tenant: str,
        *,
        threshold: float = PROMOTE_AT,
        confirm: Callable[[str], Any] | None = None,
        ttl_days: float = 90,
    ) -> dict:
        """Promote items with importance >= threshold to long-term memory, under the same policy.

        An item goes only if it was confirmed when added or `confirm(question)` answers an explicit
        yes now (`approved`, the one consent rule). It is stored with source "assistant": the agent
        phrased it and the person only agreed to keep it (the rule of the `remember` tool), so it
        never passes for the person's own words.
        Example: wm.consolidate(store, "ana", confirm=lambda question: "yes")
        """
        tenant = checked_tenant(tenant)  # before anyone is asked anything
        report: dict[str, Any] = {"promoted": {}, "needs_confirmation": [], "not_important": []}
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
