"""One SQLite set-up for every labkit store that keeps a file several processes may share.

Used by memory (03_memory) and the operation store (07_runtime); read it after 03's Appendix.
The connection is autocommit (a store says where a transaction begins) with a busy timeout; WAL
lets readers go on while one process writes (`open_shared` sets up both, and how often to fsync);
`transaction` takes the write lock first (BEGIN IMMEDIATE), so two writers queue instead of
deadlocking; `retrying` tries a busy file again a bounded number of times, then raises
ServiceError. A missing folder is refused, never created.
Deliberately left out: network file systems, power-loss durability beyond `synchronous`.
"""

import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .errors import ServiceError, UserError

T = TypeVar("T")


def connect(path: str, timeout: float) -> sqlite3.Connection:
    """An autocommit connection that waits up to `timeout` seconds for another process's lock.

    Example: db = connect("runtime.db", timeout=30)
    """
    # isolation_level=None: autocommit, so each statement commits unless a store says BEGIN
    return sqlite3.connect(path, timeout=timeout, isolation_level=None)


def use_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode: readers never wait for the writer. Example: use_wal(db)"""
    db.execute("PRAGMA journal_mode = WAL")


SYNCHRONOUS = ("FULL", "NORMAL", "OFF")  # PRAGMA synchronous levels, most durable first


def open_shared(path: str, synchronous: str, what: str, timeout: float) -> sqlite3.Connection:
    """connect(), then WAL and `synchronous`; a UserError naming `what` when it cannot open.

    Example: db = open_shared("runtime.db", "FULL", "the operation store", timeout=30)
    """
    if synchronous not in SYNCHRONOUS:  # checked: it is written into the PRAGMA below
        raise UserError(f"synchronous={synchronous!r} — use 'FULL' (durable), 'NORMAL' or 'OFF'")
    problem = None
    try:
        db = connect(path, timeout)
        use_wal(db)
        # under WAL, NORMAL may lose the last commits on power loss; FULL fsyncs each commit
        db.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.OperationalError as exc:
        problem = str(exc)
    if problem:  # raised out here: sqlite's error is not its __context__
        raise UserError(
            f"cannot open {what} {path} ({problem}) — check that its folder exists and is writable"
        )
    return db


def is_busy(exc: BaseException) -> bool:
    """Whether an error is another process holding the lock. Example: is_busy(exc)  ->  True"""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


def location_problem(path: Path) -> str | None:
    """Why `path` cannot hold a SQLite file, as "what — fix"; None when SQLite may open it.

    A missing folder is refused, not created: a typo must not start an empty store.
    Example: location_problem(Path("no/such/folder/m.db"))  ->  "the folder 'no/such/folder' ..."
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


def retrying(attempt: Callable[[], T], retries: int, backoff: float, busy: str) -> T:
    """attempt(); on "database is locked" wait and try again, at most `retries` more times.

    `busy` is the ServiceError's message when every try found the file locked.
    Example: retrying(lambda: db.execute("PRAGMA journal_mode = WAL"), 5, 0.05, "busy — retry")
    """
    for number in range(retries + 1):
        try:
            return attempt()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        if number < retries:
            time.sleep(backoff * 2**number)  # 1, 2, 4, ... backoffs
    raise ServiceError(busy)


def transaction(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run work(db) in one BEGIN IMMEDIATE transaction: all of it commits, or none of it.

    Example: transaction(db, lambda db: db.execute("DELETE FROM memories").rowcount)
    """
    db.execute("BEGIN IMMEDIATE")  # take the write lock now, not halfway through
    try:
        result = work(db)
        db.execute("COMMIT")
        return result
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
