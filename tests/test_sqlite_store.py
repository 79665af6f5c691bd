"""labkit.sqlite_store: the one SQLite set-up, its bounded retries and all-or-nothing writes."""

import sqlite3

import pytest

from labkit import ServiceError, UserError
from labkit.sqlite_store import (
    connect,
    is_busy,
    location_problem,
    open_shared,
    retrying,
    transaction,
    use_wal,
)


@pytest.fixture
def db(tmp_path):
    db = connect(str(tmp_path / "f.sqlite3"), timeout=0.01)
    use_wal(db)
    db.execute("CREATE TABLE t (x INTEGER)")
    yield db
    db.close()


def test_connect_is_autocommit_and_use_wal_sets_wal(db):
    assert db.isolation_level is None
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("synchronous, level", [("FULL", 2), ("NORMAL", 1), ("OFF", 0)])
def test_open_shared_sets_wal_and_the_synchronous_level(tmp_path, synchronous, level):
    db = open_shared(str(tmp_path / "s.db"), synchronous, "the test store", timeout=0.01)
    assert db.isolation_level is None
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == level
    db.close()


def test_open_shared_refuses_a_level_it_would_write_into_the_pragma(tmp_path):
    with pytest.raises(UserError, match="synchronous='FULL; DROP TABLE t'"):
        open_shared(str(tmp_path / "s.db"), "FULL; DROP TABLE t", "the test store", timeout=0.01)
    assert not (tmp_path / "s.db").exists()  # refused before anything is opened


def test_open_shared_names_the_store_it_cannot_open(tmp_path):
    missing = tmp_path / "no" / "s.db"
    with pytest.raises(UserError, match="cannot open the test store .* folder exists") as caught:
        open_shared(str(missing), "FULL", "the test store", timeout=0.01)
    assert caught.value.__context__ is None  # sqlite's error is not chained to it


@pytest.mark.parametrize(
    "error, busy",
    [
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("database is busy"), True),
        (sqlite3.OperationalError("no such table: t"), False),
        (ValueError("locked"), False),
    ],
)
def test_is_busy_only_for_a_lock_held_elsewhere(error, busy):
    assert is_busy(error) is busy


def test_retrying_tries_retries_plus_one_times_then_raises_the_busy_message():
    tries = []

    def attempt():
        tries.append(1)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(ServiceError, match="^the file is busy$"):
        retrying(attempt, retries=2, backoff=0, busy="the file is busy")
    assert len(tries) == 3


def test_retrying_returns_once_the_lock_is_gone_and_passes_other_errors_through():
    answers = iter([sqlite3.OperationalError("database is locked"), "done"])

    def attempt():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retrying(attempt, retries=1, backoff=0, busy="busy") == "done"
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retrying(lambda: sqlite3.connect(":memory:").execute("SELECT * FROM t"), 3, 0, "busy")


def test_a_transaction_commits_all_or_nothing(db):
    assert transaction(db, lambda d: d.execute("INSERT INTO t VALUES (1)").rowcount) == 1

    def half_then_fail(d):
        d.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("halfway")

    with pytest.raises(RuntimeError):
        transaction(db, half_then_fail)
    assert not db.in_transaction
    assert db.execute("SELECT x FROM t").fetchall() == [(1,)]


def test_a_held_write_lock_is_a_busy_error_for_the_next_writer(tmp_path, db):
    other = connect(str(tmp_path / "f.sqlite3"), timeout=0.01)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError) as caught:
            transaction(db, lambda d: None)
        assert is_busy(caught.value)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_location_problem_refuses_a_folder_and_a_missing_folder(tmp_path):
    assert location_problem(tmp_path / "m.db") is None
    assert "it is a folder" in location_problem(tmp_path)
    assert "does not exist" in location_problem(tmp_path / "no" / "m.db")
