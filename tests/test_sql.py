"""The store's SQL layer on SQLite (orchestrator.store.sql): rows, values, transactions."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.store.sql import SqliteDb, decode_row, sqlite_time


def _db(tmp_path: Path) -> SqliteDb:
    db = SqliteDb(tmp_path / "t.db")
    with db.write() as tx:
        tx.run("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT, created_at TEXT, n INT)")
    return db


def test_values_cross_as_the_store_writes_them(tmp_path: Path) -> None:
    db = _db(tmp_path)
    moment = datetime(2026, 11, 22, 3, 4, 5, 600, tzinfo=UTC)
    with db.write() as tx:
        tx.run(
            "INSERT INTO t (payload, created_at, n) VALUES (:payload, :created_at, :n)",
            {"payload": {"a": [1, "é"]}, "created_at": moment, "n": True},
        )
    with db.read() as tx:
        row = tx.first("SELECT * FROM t")
    assert row is not None
    assert row.payload == row["payload"] == {"a": [1, "é"]}
    assert row.created_at == moment.replace(tzinfo=None)  # naive UTC, as SQLAlchemy's
    assert row.n == 1
    with pytest.raises(AttributeError):
        _ = row.missing
    db.close()
    # the text SQLAlchemy's DateTime writes on SQLite, so both read each other's rows
    with sqlite3.connect(tmp_path / "t.db") as conn:
        assert conn.execute("SELECT created_at FROM t").fetchone() == (
            "2026-11-22 03:04:05.000600",
        )
    conn.close()
    assert sqlite_time(moment) == "2026-11-22 03:04:05.000600"


def test_a_failed_write_leaves_nothing_and_the_connection_usable(tmp_path: Path) -> None:
    db = _db(tmp_path)
    with pytest.raises(RuntimeError), db.write() as tx:
        tx.run("INSERT INTO t (n) VALUES (1)")
        raise RuntimeError("a bug mid-transaction")
    assert not db.conn.in_transaction
    with db.write() as tx:  # the shared connection is not left inside a transaction
        tx.run("INSERT INTO t (n) VALUES (2)")
    with db.read() as tx:
        assert [r.n for r in tx.rows("SELECT n FROM t")] == [2]
    db.close()


def test_a_durable_write_fsyncs_that_commit_only(tmp_path: Path) -> None:
    db = _db(tmp_path)
    seen: list[str] = []
    db.conn.set_trace_callback(seen.append)
    with db.write(durable=True) as tx:
        tx.run("INSERT INTO t (n) VALUES (3)")
    assert seen[0] == "PRAGMA synchronous = FULL" and seen[-1] == "PRAGMA synchronous = NORMAL"
    assert db.conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL again
    db.close()


def test_decode_row_leaves_values_other_databases_decoded() -> None:
    already = {"x": 1}
    row = decode_row(("payload", "created_at", "task"), (already, None, '{"not": "json col"}'))
    assert row.payload is already and row.created_at is None
    assert row.task == '{"not": "json col"}'  # only the JSON columns are parsed


def test_a_row_reads_its_columns_as_attributes_and_keys_and_nothing_else() -> None:
    row = decode_row(("id", "status", "items", "owner"), ("s1", "paused", "col", None))
    assert (row.id, row.status, row.owner) == ("s1", "paused", None)
    assert row["items"] == "col" and list(row.items())[0] == ("id", "s1")  # a method still
    row["status"] = "running"  # the attribute reads the mapping, not a copy
    assert row.status == "running"
    assert getattr(row, "last_error", "absent") == "absent"  # not selected: AttributeError
    with pytest.raises(AttributeError):
        row.last_error  # noqa: B018
    other = decode_row(("id",), ("s2",))
    assert getattr(other, "status", None) is None  # another query's columns are its own
    assert type(other) is not type(row)
    assert type(row) is type(decode_row(tuple(row), tuple(row.values())))  # one class a list
    assert dict(row) == {"id": "s1", "status": "running", "items": "col", "owner": None}


def test_a_command_leaves_the_sqlite_file_whole_without_its_log(tmp_path: Path) -> None:
    """At the process's exit the write-ahead log is folded back into the file and
    emptied: a copy of the file alone (a backup that misses the `-wal`) holds the run."""
    import json

    from tests.conftest import EXAMPLES, cli

    db = tmp_path / "s.db"
    done = cli("run", "--script", str(EXAMPLES / "answered-question.yaml"), "--json",
               db=f"sqlite:///{db}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    assert (tmp_path / "s.db-wal").stat().st_size == 0
    copy = tmp_path / "copy" / "s.db"
    copy.parent.mkdir()
    copy.write_bytes(db.read_bytes())
    shown = cli("status", session_id, "--json", db=f"sqlite:///{copy}")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "completed"


def test_settling_waits_for_nothing_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread of ours in the middle of a transaction, or another connection reading:
    the checkpoint is skipped or does what it can, at once, and raises nothing.

    What waits here is a broken settle's wait: the busy timeout is ten minutes, and the
    guards below let go after one (nothing that works comes near it, however loaded the
    machine): the test then fails instead of hanging."""
    import threading

    import orchestrator.store.sql as sql

    monkeypatch.setattr(sql, "BUSY_TIMEOUT", 600.0)
    db = SqliteDb(tmp_path / "s.db")
    with db.write() as tx:
        tx.run("CREATE TABLE t (x INTEGER)")
    with db.write() as tx:
        tx.run("INSERT INTO t VALUES (1)")
    wal = tmp_path / "s.db-wal"
    assert wal.stat().st_size > 0
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.read():
            held.set()
            release.wait(GUARD)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(GUARD)
    db.settle()  # the connection is another thread's: skipped, not waited for
    release.set()
    holder.join()
    assert wal.stat().st_size > 0
    # Another process reading a snapshot that the log has grown past since.
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path / "s.db")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
    with db.write() as tx:
        tx.run("INSERT INTO t VALUES (2)")
    waited = threading.Event()
    settled = threading.Event()

    def watchdog() -> None:  # a checkpoint waiting for the reader is let go, and told
        if not settled.wait(GUARD):
            waited.set()
            reader.kill()

    dog = threading.Thread(target=watchdog)
    dog.start()
    db.settle()  # it would wait for the reader, up to the busy timeout: it does not
    settled.set()
    dog.join()
    reader.communicate("done\n", timeout=30)
    assert not waited.is_set()
    assert wal.stat().st_size > 0
    db.settle()
    assert wal.stat().st_size == 0
    with db.read() as tx:
        assert [row["x"] for row in tx.rows("SELECT x FROM t")] == [1, 2]
    db.close()
    db.settle()  # closed: nothing


GUARD = 60.0  # seconds: a broken settle's wait is let go after this, and fails the test

READER = """
import sqlite3, sys
reader = sqlite3.connect(sys.argv[1], isolation_level=None)
reader.execute("BEGIN")
reader.execute("SELECT * FROM t").fetchall()
print("reading", flush=True)
sys.stdin.readline()
"""
