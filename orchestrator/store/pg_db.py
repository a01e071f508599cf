"""The store's SQL on PostgreSQL: the `Tx` of orchestrator.store.sql straight on psycopg.

The same plain SQL as on SQLite, with psycopg's own parameter style; no SQLAlchemy on the
hot path (it cost about half of a session's client CPU: result metadata, the pool's
checkout and its pre-ping, per statement). Connections come from psycopg_pool's
ConnectionPool:
- made on demand (15 open at most; one more waits up to 30 s, then a message), recycled
  after an hour, closed after ten idle minutes; one that died while idle (a server restart
  or shutdown: the server writes its goodbye and closes the socket) is seen without a
  round trip, by the socket having something to read, then pinged and replaced;
- a connection that fails, or a server that cannot be reached, is a user's message
  (orchestrator.store._pg.connection_error) at once, never a driver traceback nor a wait
  for the pool's background reconnection;
- reads run in autocommit: each is one statement, one snapshot (as on SQLite; a read
  transaction at READ COMMITTED gave nothing more), so a read is one round trip;
- writes run in BEGIN ... COMMIT, rows locked FOR UPDATE where the store asks.

LangGraph's PostgresSaver is handed the same pool (orchestrator.runtime.checkpoints), so a
session opens no connection of its own.
"""

from __future__ import annotations

import logging
import re
import select
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from functools import cache
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Json
from psycopg_pool import ConnectionPool, PoolTimeout

from orchestrator.errors import DatabaseUnavailable
from orchestrator.store._pg import connect_options, connection_error, is_connection_failure
from orchestrator.store.sql import JSON_COLUMNS, Row, decode_row, decode_rows

__all__ = ["PgDb", "PgTx", "MAX_OPEN"]

MAX_OPEN = 15  # open at once; one more waits for a connection to come back
WAIT_S = 30.0  # ... this long, then gives up with a message
FIRST_WAIT_S = 0.5  # no connection from the pool this soon: connect here (see _Pool)
LIFETIME_S = 3600.0  # a connection older than this is closed when it comes back
IDLE_S = 600.0  # an idle connection beyond the ones in use is closed after this long

# The pool's own log lines (a reconnection attempt failed, a closed connection dropped)
# would reach a command's stderr as warnings; what the user needs of them is said by
# connection_error and the long-running processes' OutageLog.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

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
    """The store's database on PostgreSQL: psycopg_pool's ConnectionPool (autocommit, rows
    as dicts: what LangGraph's PostgresSaver expects of the connections it borrows; it is
    handed the same pool, orchestrator.runtime.checkpoints)."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self.pool = _Pool(url)

    def connection(self) -> AbstractContextManager[Connection[Any]]:
        """A connection of the pool's for the block's length (autocommit, dict rows)."""
        return self.pool.connection()

    def failure(self, exc: psycopg.OperationalError, conn: Connection[Any]) -> BaseException:
        """The error to raise for `exc`, raised on `conn`: a user's message when the
        connection failed, else `exc` itself (a statement timeout, say)."""
        if conn.broken or conn.closed or is_connection_failure(exc):
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
        self.pool.close()


class _Pool(ConnectionPool[Connection[Any]]):
    """psycopg_pool's pool, lending a connection as a command needs it (its public
    `getconn`/`putconn`, which `connection()` calls, extended):

    - an idle connection is lent once seen alive, without a round trip when nothing
      happened on it while idle (`_alive`); a dead one is handed back (the pool drops it)
      and the next one tried, at once (the pool's own `check` would pause between tries);
    - a server that cannot be reached is said at once, as a user's message
      (orchestrator.store._pg.connection_error): the pool itself reconnects in the
      background and lets its clients wait `timeout`. When no connection came within
      FIRST_WAIT_S and the pool is below MAX_OPEN, this client connects itself: that
      connection's error is raised, or the connection lent and closed after (the pool's
      reconnection catches up on its own).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": 0,  # as PostgresSaver.from_conn_string connects
            "row_factory": dict_row,
            **connect_options(url),
        }
        self._own: weakref.WeakSet[Connection[Any]] = weakref.WeakSet()  # lent outside
        super().__init__(
            self._conninfo,
            kwargs=self._connect_kwargs,
            min_size=0,  # connections are made on demand
            max_size=MAX_OPEN,
            timeout=WAIT_S,
            max_lifetime=LIFETIME_S,
            max_idle=IDLE_S,
            # Two quick tries, then the next client that needs a connection tries again
            # (at once: the pool would wait longer and longer between its own tries).
            reconnect_timeout=0.0,
            name="orchestrator",
            open=True,
        )

    def getconn(self, timeout: float | None = None) -> Connection[Any]:
        patience = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + patience
        while True:
            wait = max(min(FIRST_WAIT_S, deadline - time.monotonic()), 0.001)
            try:
                conn = super().getconn(wait)
            except PoolTimeout:
                if self.get_stats()["pool_size"] < self.max_size:
                    return self._connect_here()
                if time.monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"all {MAX_OPEN} of this process's PostgreSQL connections stayed "
                        f"busy for {patience:g} s; try again when the load is lower"
                    ) from None
                continue
            if _alive(conn):
                return conn
            super().putconn(conn)  # dead: the pool closes it

    def putconn(self, conn: Connection[Any]) -> None:
        if conn in self._own:
            self._own.discard(conn)
            conn.close()
            return
        super().putconn(conn)

    def _connect_here(self) -> Connection[Any]:
        try:
            conn = Connection.connect(self._conninfo, **self._connect_kwargs)
        except psycopg.OperationalError as exc:
            raise connection_error(exc, self.url) from exc
        self._own.add(conn)
        return conn


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
