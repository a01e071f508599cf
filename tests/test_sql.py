"""The store's SQL layer on SQLite (orchestrator.store.sql): rows, values, transactions."""

from __future__ import annotations

import sqlite3
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
