"""The store's SQL on PostgreSQL: the `Tx` of orchestrator.store.sql straight on psycopg.

The same plain SQL as on SQLite, with psycopg's own parameter style; no SQLAlchemy on the
hot path (it cost about half of a session's client CPU: result metadata, the pool's
checkout and its pre-ping, per statement). What the pool keeps:
- connections are made on demand and kept for reuse (5 idle at most, 15 open at most,
  recycled after an hour); one that died while idle (a server restart or shutdown: the
  server writes its goodbye and closes the socket) is seen without a round trip, by the
  socket having something to read, then pinged and replaced;
- a connection that fails is dropped, and its error is a user's message
  (orchestrator.store._pg.connection_error), never a driver traceback;
- reads run in autocommit: each is one statement, one snapshot (as on SQLite; a read
  transaction at READ COMMITTED gave nothing more), so a read is one round trip;
- writes run in BEGIN ... COMMIT, rows locked FOR UPDATE where the store asks.

LangGraph's PostgresSaver borrows from the same pool (orchestrator.runtime.checkpoints), so
a session opens no connection of its own.
"""

from __future__ import annotations

import re
import select
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Json

from orchestrator.errors import DatabaseUnavailable
from orchestrator.store._pg import connect_options, connection_error, is_connection_failure
from orchestrator.store.sql import JSON_COLUMNS, Row, decode_row, decode_rows

__all__ = ["PgDb", "PgTx"]

POOL_SIZE = 5  # idle connections kept: the command's, the lease thread's, a worker's threads
MAX_OPEN = 15  # open at once; one more waits for a connection to come back
WAIT_S = 30.0  # ... this long, then gives up with a message
LIFETIME_S = 3600.0  # a connection older than this is closed when it comes back

# `:name` as SQLAlchemy's text() reads it (not `::type`, not inside a word).
_PARAM = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


@cache
def _psycopg_sql(sql: str) -> str:
    """`sql` in psycopg's parameter style (`%(name)s`; a literal `%` doubled)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def _values(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as psycopg sends them: a JSON column's value as JSON (SQL NULL for
    None, as on SQLite), anything else as it is."""
    return {
        name: Json(value) if name in JSON_COLUMNS and value is not None else value
        for name, value in params.items()
    }


def _names(cursor: psycopg.Cursor[Any]) -> tuple[str, ...]:
    """The result's column names (read off the result: `cursor.description` builds a
    Column object per column, a third of a wide row's cost)."""
    result = cursor.pgresult
    if result is None:
        return ()
    return tuple(bytes(result.fname(i) or b"").decode() for i in range(result.nfields))


class PgTx:
    """A Tx on one pooled connection: inside BEGIN ... COMMIT for writes, autocommit for
    reads."""

    dialect = "postgresql"
    lock_rows = " FOR UPDATE"

    __slots__ = ("db", "cursor", "info")

    def __init__(self, db: PgDb, conn: Connection[Any]) -> None:
        self.db = db
        self.cursor = conn.cursor(row_factory=tuple_row)
        self.info: dict[str, Any] = {}

    def _execute(self, sql: str, params: Mapping[str, Any] | None) -> psycopg.Cursor[Any]:
        values = _values(params) if params else None
        try:
            return self.cursor.execute(_psycopg_sql(sql), values)
        except psycopg.OperationalError as exc:
            raise self.db.failure(exc, self.cursor.connection) from exc

    def command(self, sql: str) -> None:
        """A transaction command (never prepared)."""
        try:
            self.cursor.execute(sql, prepare=False)
        except psycopg.OperationalError as exc:
            raise self.db.failure(exc, self.cursor.connection) from exc

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        cursor = self._execute(sql, params)
        return list(decode_rows(_names(cursor), cursor.fetchall()))

    def first(self, sql: str, params: Mapping[str, Any] | None = None) -> Row | None:
        cursor = self._execute(sql, params)
        values = cursor.fetchone()
        return None if values is None else decode_row(_names(cursor), values)

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        row = self.first(sql, params)
        return None if row is None else next(iter(row.values()))

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        return self._execute(sql, params).rowcount


class PgDb:
    """The store's database on PostgreSQL: a small pool of psycopg connections (autocommit,
    rows as dicts: what LangGraph's PostgresSaver expects of the connections it borrows)."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._options = connect_options(url)
        self._idle: list[tuple[Connection[Any], float]] = []  # (connection, when made)
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_OPEN)
        self._closed = False

    # -- the pool --------------------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A connection of the pool's for the block's length (autocommit, dict rows)."""
        if not self._slots.acquire(timeout=WAIT_S):
            raise DatabaseUnavailable(
                f"all {MAX_OPEN} of this process's PostgreSQL connections stayed busy for "
                f"{WAIT_S:.0f} s; try again when the load is lower"
            )
        try:
            conn, made = self._take()
            try:
                yield conn
            finally:
                self._give_back(conn, made)
        finally:
            self._slots.release()

    def _take(self) -> tuple[Connection[Any], float]:
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, made = self._idle.pop()
            if _alive(conn):
                return conn, made
            with suppress(Exception):
                conn.close()
        try:
            conn = Connection.connect(
                self._conninfo,
                autocommit=True,
                prepare_threshold=0,  # as PostgresSaver.from_conn_string connects
                row_factory=dict_row,
                **self._options,
            )
        except psycopg.OperationalError as exc:
            raise connection_error(exc, self.url) from exc
        return conn, time.monotonic()

    def _give_back(self, conn: Connection[Any], made: float) -> None:
        keep = (
            not self._closed
            and not conn.closed
            and conn.info.transaction_status == TransactionStatus.IDLE
            and time.monotonic() - made < LIFETIME_S
        )
        if keep:
            with self._lock:
                if len(self._idle) < POOL_SIZE:
                    self._idle.append((conn, made))
                    return
        with suppress(Exception):
            conn.close()

    def failure(self, exc: psycopg.OperationalError, conn: Connection[Any]) -> BaseException:
        """The error to raise for `exc`, raised on `conn`: a user's message when the
        connection failed, else `exc` itself (a statement timeout, say)."""
        if conn.broken or is_connection_failure(exc):
            return connection_error(exc, self.url)
        return exc

    # -- the Db interface ------------------------------------------------------------

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[PgTx]:
        """A write transaction (PostgreSQL's commits are durable: `durable` asks nothing
        more)."""
        with self.connection() as conn:
            tx = PgTx(self, conn)
            tx.command("BEGIN")
            try:
                yield tx
            except BaseException:
                if not conn.broken:
                    with suppress(psycopg.Error):
                        conn.execute("ROLLBACK", prepare=False)
                raise
            tx.command("COMMIT")

    @contextmanager
    def read(self) -> Iterator[PgTx]:
        """Reads, each statement its own snapshot (what must agree is read in one)."""
        with self.connection() as conn:
            yield PgTx(self, conn)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            with suppress(Exception):
                conn.close()


def _alive(conn: Connection[Any]) -> bool:
    """Can `conn` be lent? Without a round trip when nothing happened on it while idle."""
    if conn.closed or conn.broken:
        return False
    try:
        if not _readable(conn.fileno()):
            return True
    except (OSError, ValueError):
        return False
    # The server said something while we were not asking: most often its goodbye (a
    # restart, a shutdown, an idle timeout). A ping decides.
    try:
        conn.execute("")
    except psycopg.Error:
        return False
    return not conn.broken


def _readable(fd: int) -> bool:
    """Has the socket `fd` something to read (or hung up), without waiting? poll() where
    there is one: select() refuses descriptors above 1023, which a long-running server
    with many files open reaches."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)
