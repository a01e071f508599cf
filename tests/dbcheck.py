"""Reading a test's database straight from the driver, whichever backend it is.

The process tests look at the database behind the CLI's back: plain SQL with `?`
placeholders, run through sqlite3 for a SQLite URL and psycopg for a PostgreSQL one.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

__all__ = [
    "query",
    "dump_db",
    "session_row",
    "payload",
    "write_lock",
    "conninfo",
    "sqlite_fault",
]


# SQLite's own words for the result codes the fault tests inject.
_SQLITE_WORDS = {
    sqlite3.SQLITE_FULL: "database or disk is full",
    sqlite3.SQLITE_IOERR: "disk I/O error",
    sqlite3.SQLITE_NOTADB: "file is not a database",
    sqlite3.SQLITE_BUSY: "database is locked",
}


def sqlite_fault(code: int) -> sqlite3.Error:
    """The error sqlite3 raises for SQLite's result `code`, as the driver builds it: its
    message, `sqlite_errorcode` and `sqlite_errorname` (the store reads the code)."""
    kind = sqlite3.DatabaseError if code == sqlite3.SQLITE_NOTADB else sqlite3.OperationalError
    error = kind(_SQLITE_WORDS[code])
    error.sqlite_errorcode = code
    error.sqlite_errorname = next(
        name
        for name in dir(sqlite3)
        if name.startswith("SQLITE_") and getattr(sqlite3, name) == code
    )
    return error


def is_sqlite(db_url: str) -> bool:
    return db_url.startswith("sqlite")


def sqlite_file(db_url: str) -> str:
    assert db_url.startswith("sqlite:///"), db_url
    return db_url.removeprefix("sqlite:///")


def conninfo(db_url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL."""
    return db_url.replace("postgresql+psycopg://", "postgresql://", 1)


@contextmanager
def _connect(db_url: str, *, dicts: bool = False) -> Iterator[Any]:
    if is_sqlite(db_url):
        with closing(sqlite3.connect(sqlite_file(db_url), timeout=30)) as conn:
            if dicts:
                conn.row_factory = sqlite3.Row
            yield conn
        return
    import psycopg
    from psycopg.rows import dict_row, tuple_row

    factory: Any = dict_row if dicts else tuple_row
    with psycopg.connect(conninfo(db_url), autocommit=True, row_factory=factory) as conn:
        yield conn


def _sql(db_url: str, sql: str) -> str:
    return sql if is_sqlite(db_url) else sql.replace("?", "%s")


def query(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with _connect(db_url) as conn:
        return [tuple(row) for row in conn.execute(_sql(db_url, sql), params).fetchall()]


def session_row(db_url: str, session_id: str) -> dict[str, Any]:
    with _connect(db_url, dicts=True) as conn:
        row = conn.execute(
            _sql(db_url, "SELECT * FROM sessions WHERE id = ?"), (session_id,)
        ).fetchone()
        assert row is not None, f"no session {session_id} in the database"
        return dict(row)


def payload(value: Any) -> Any:
    """A JSON column: text on SQLite, already decoded on PostgreSQL."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _tables(db_url: str, conn: Any) -> list[str]:
    if is_sqlite(db_url):
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    else:
        sql = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    return sorted(name for (name,) in conn.execute(sql).fetchall())


def dump_db(db_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (ours and LangGraph's checkpoints), for before/after diffs."""
    with _connect(db_url) as conn:
        return {
            table: sorted(
                (tuple(r) for r in conn.execute(f'SELECT * FROM "{table}"').fetchall()), key=repr
            )
            for table in _tables(db_url, conn)
        }


def writing_now(db_url: str) -> bool:
    """Is a transaction of the tool's open in the database (SQLite: its write lock held;
    PostgreSQL: a connection of the tool's inside a statement or a transaction)?"""
    if is_sqlite(db_url):
        with closing(sqlite3.connect(sqlite_file(db_url), timeout=0)) as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            conn.rollback()
            return False
    rows = query(
        db_url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'orchestrator' AND state <> 'idle'",
    )
    return bool(rows[0][0])


class WriteLock:
    """Holds off every writer of `events` while held (SQLite: the database's write lock;
    PostgreSQL: an EXCLUSIVE lock on the table). `fetch` reads inside the lock."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        if is_sqlite(db_url):
            self.conn: Any = sqlite3.connect(sqlite_file(db_url), timeout=0, isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(conninfo(db_url), autocommit=True)
        self.held = False

    def acquire(self, timeout: float = 30) -> None:
        if is_sqlite(self.db_url):
            # Retried at once, not through SQLite's busy handler: its sleeps grow to 100 ms,
            # and a writer that takes the lock again between them runs on for dozens of
            # transactions (a whole scripted run, on a loaded machine) before this gets it.
            deadline = time.monotonic() + timeout
            while True:
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.0002)
        else:
            self.conn.execute("BEGIN")
            self.conn.execute("LOCK TABLE events IN EXCLUSIVE MODE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sql).fetchall()]

    def close(self) -> None:
        self.release()
        self.conn.close()


@contextmanager
def write_lock(db_url: str) -> Iterator[WriteLock]:
    lock = WriteLock(db_url)
    try:
        yield lock
    finally:
        lock.close()
