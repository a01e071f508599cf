"""Lean reads: `status`, `log` and a page of `list` straight off a SQLite file, on the
standard library alone (no SQLAlchemy, no pydantic), for the command line's fast path.

The documents are the store's own (store.views), read with the listing's SQL
(store.listing). `NeedsFullPath` says a read is not for this path: a database that is not
at our revision, a question whose deadline passed unapplied (the full path applies the
on-timeout policy first). A file is never created.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.domain import clock
from orchestrator.domain.expect import ENDED, check_expect
from orchestrator.errors import ConfigError, SessionNotFound
from orchestrator.store.connect import (
    ENV_DB,
    HEAD_REVISION,
    default_url,
    plain_sqlite_file,
    resolve_url,
)
from orchestrator.store.listing import CURSOR_SQL, WAITING, page_sql, select_listed
from orchestrator.store.sql import BUSY_TIMEOUT, Row, decode_rows, frozen
from orchestrator.store.views import LEDGER_SQL, deadline_due, event_view, session_view

__all__ = ["NeedsFullPath", "LeanFile", "sqlite_file", "status", "events", "page"]


class NeedsFullPath(Exception):
    """This read is for the full path (the store opened as usual)."""


def sqlite_file(db: str | None) -> Path | None:
    """The SQLite file store.connect.resolve_url opens for `db`, or None when the URL is
    anything but a plain sqlite:/// file (those go to the full path), or one it refuses
    (the full path says why: `sqlite:/x.db`, a relative path in ORCHESTRATOR_DB, ...)."""
    url = db if db is not None else os.environ.get(ENV_DB) or default_url()
    if "://" in url and plain_sqlite_file(url) is None:
        return None  # PostgreSQL, a URL with options: never the fast path's
    try:
        resolved = resolve_url(db)  # the same checks as the full path, on the same value
    except ConfigError:
        return None
    return plain_sqlite_file(resolved)


class LeanFile:
    """One read transaction on an existing file (never created), at our schema revision."""

    def __init__(self, path: Path) -> None:
        # mode=rw: an existing file only, never created. In a URI, % ? # must be escaped.
        self.path = path
        name = str(path.absolute())
        self.name = name.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        self.conn = self._connect("mode=rw")

    def _connect(self, query: str) -> sqlite3.Connection:
        uri = f"file:{self.name}?{query}"
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)

    def __enter__(self) -> sqlite3.Connection:
        try:
            try:
                version = self._begin()
            except sqlite3.OperationalError:
                if not frozen(self.path):
                    raise
                # A read-only filesystem and no write-ahead log: SQLite cannot open a WAL
                # file there without its -shm, but nothing can change the file either, so
                # it is read as immutable (`status` still answers while the disk is
                # read-only; every write says why it cannot be made).
                self.conn.close()
                self.conn = self._connect("mode=ro&immutable=1")
                version = self._begin()
        except BaseException:
            self.conn.close()
            raise
        if version != [(HEAD_REVISION,)]:
            self.conn.close()
            raise NeedsFullPath
        return self.conn

    def _begin(self) -> list[Any]:
        self.conn.execute("BEGIN")
        return self.conn.execute("SELECT version_num FROM alembic_version").fetchall()

    def __exit__(self, *exc: object) -> None:
        self.conn.close()  # a read transaction: closing ends it


def _rows(cursor: sqlite3.Cursor) -> list[Row]:
    return list(decode_rows(tuple(d[0] for d in cursor.description), cursor))


_EVENTS_SQL = "SELECT created_at, kind, agent, payload FROM events WHERE session_id = :id"


def status(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    sql = select_listed(", s.settings") + " WHERE s.id = :id"
    rows = _rows(conn.execute(sql, {"id": session_id}))
    if not rows:
        raise SessionNotFound(session_id)
    (row,) = rows
    if deadline_due(row, clock.now()):
        raise NeedsFullPath  # the full path applies the on-timeout policy first
    ledger = _rows(conn.execute(LEDGER_SQL, {"id": session_id}))
    view = session_view(row, row, [event_view(r) for r in ledger])
    expect = (row.settings or {}).get("expect")
    if expect and view["status"] in ENDED:
        view["expect"] = check_expect(expect, view)
    return view


def events(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise SessionNotFound(session_id)
    rows = conn.execute(_EVENTS_SQL + " ORDER BY id", {"id": session_id})
    return [event_view(r) for r in _rows(rows)]


def page(
    conn: sqlite3.Connection, *, status: str | None, after: str | None, limit: int | None
) -> Iterator[dict[str, Any]]:
    """Sessions newest first: with `status`, after session `after`, at most `limit`."""
    waiting = status == WAITING
    params: dict[str, Any] = {} if waiting else {"status": status}
    if after is not None:
        cursor = conn.execute(CURSOR_SQL, {"after": after}).fetchone()
        if cursor is None:
            raise SessionNotFound(after)
        params.update(after_created=cursor[0], after_id=after)
    if limit is not None:
        params["limit"] = limit
    sql = page_sql(
        status=status is not None, after=after is not None, limit=limit is not None, waiting=waiting
    )
    cursor = conn.execute(sql, params)
    names = tuple(d[0] for d in cursor.description)
    for row in decode_rows(names, cursor):  # one at a time: `--all --json` streams any number
        yield session_view(row, row)
