"""How the store talks to its database: fixed SQL text through a transaction object.

Every store module writes plain SQL with `:named` parameters and runs it on a `Tx`, which
both databases implement:

- SQLite (`SqliteDb`, this module, standard library only): one `sqlite3` connection per
  store, shared with LangGraph's checkpointer (orchestrator.runtime.checkpoints) under one lock,
  so the two never wait on each other; writes run in BEGIN IMMEDIATE, reads run each
  statement on its own (one SELECT is one consistent snapshot in SQLite; the store reads
  what a decision needs in one statement).
- PostgreSQL (`orchestrator.store.pg_db.PgDb`): psycopg on a small pool of its own, shared
  with LangGraph's PostgresSaver; writes in BEGIN ... COMMIT, reads in autocommit (each
  one statement, as on SQLite).

Values cross in one shape either way: the JSON columns as Python objects, the time columns
as datetimes (naive UTC from SQLite, as SQLAlchemy stored them), booleans as bool or 0/1.
"""

from __future__ import annotations

import atexit
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol

from orchestrator.outages import Backoff

__all__ = [
    "Row",
    "Tx",
    "Db",
    "SqliteDb",
    "JSON_COLUMNS",
    "TIME_COLUMNS",
    "BUSY_TIMEOUT",
    "configure_sqlite",
    "sqlite_time",
    "decode_row",
    "decode_rows",
    "row_type",
    "open_in_this_process",
]

ENV_BUSY_TIMEOUT = "ORCHESTRATOR_SQLITE_BUSY_TIMEOUT"


def _busy_timeout() -> float:
    """Seconds a connection waits for SQLite's write lock: 30, or $ORCHESTRATOR_SQLITE_BUSY_TIMEOUT
    (a positive number of seconds; anything else is ignored)."""
    given = os.environ.get(ENV_BUSY_TIMEOUT, "")
    try:
        seconds = float(given)
    except ValueError:
        return 30.0
    return seconds if 0 < seconds < 86_400 else 30.0


# Seconds a connection waits for SQLite's write lock (store.db.SQLITE_BUSY_TIMEOUT).
BUSY_TIMEOUT = _busy_timeout()


def configure_sqlite(conn: Any, *, foreign_keys: bool = True) -> None:
    """The pragmas every connection to our SQLite file gets (a sqlite3 connection or
    cursor): the busy timeout; WAL, so that readers (status, list) run while a session
    writes; synchronous NORMAL (in WAL mode a commit survives a killed process, only a
    power loss can drop the last ones; the user's answer is fsynced on its own).

    Switching a new file to WAL needs an exclusive lock, and SQLite answers "database is
    locked" at once, without the busy handler, while another process is switching it too
    (the first commands on a fresh database, run concurrently). The mode is persistent,
    so it is read first and set, with retries up to the busy timeout, only when needed."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
    deadline = time.monotonic() + BUSY_TIMEOUT
    backoff = Backoff(0.005, 0.2)
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            break
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            pause = backoff.next()
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
    conn.execute("PRAGMA synchronous = NORMAL")
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys = ON")


# Columns (and the parameters that fill them, named the same) holding JSON documents.
JSON_COLUMNS = frozenset(
    {"agents", "settings", "tasks", "question_object", "fallback_counts", "payload", "usage"}
)
# Columns holding moments (SQLAlchemy's DateTime; "YYYY-MM-DD HH:MM:SS.ffffff" in SQLite).
TIME_COLUMNS = frozenset(
    {"created_at", "updated_at", "cancel_requested_at", "asked_at", "resolved_at", "used_at"}
)


class Row(dict[str, Any]):
    """A result row: by column name as a mapping and as attributes (`row.status`).

    A decoded row is of its column list's own subclass (`row_type`), where each column
    is a property reading the mapping: an attribute read costs a C call, not the failed
    lookup and Python call of `__getattr__` (a listed session's view reads ~35 a row).
    `__getattr__` is left for names a query did not select."""

    __slots__ = ()
    _json: tuple[str, ...] = ()  # its JSON columns and time columns, decoded once read
    _times: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


_ROW_NAMES = frozenset(dir(Row))  # a column never hides a mapping method (`row.items`)


@lru_cache(maxsize=1024)  # one per distinct column list: the store's queries are fixed text
def row_type(names: tuple[str, ...]) -> type[Row]:
    """The Row subclass of rows with these columns."""
    columns = {name: property(itemgetter(name)) for name in names if name not in _ROW_NAMES}
    decoded = {
        "_json": tuple(name for name in names if name in JSON_COLUMNS),
        "_times": tuple(name for name in names if name in TIME_COLUMNS),
    }
    return type("Row", (Row,), {"__slots__": (), **columns, **decoded})


def decode_rows(names: tuple[str, ...], rows: Iterable[tuple[Any, ...] | Any]) -> Iterator[Row]:
    """Rows from raw values, all with the columns `names` (see decode_row)."""
    kind = row_type(names)
    return (decode_row(names, values, kind) for values in rows)


def decode_row(
    names: tuple[str, ...], values: tuple[Any, ...] | Any, kind: type[Row] | None = None
) -> Row:
    """A Row from raw values: JSON text parsed, time text made datetimes (values another
    database's driver decoded already are left as they are)."""
    row = (kind or row_type(names))(zip(names, values, strict=True))
    for name in row._json:
        if type(value := row[name]) is str:
            row[name] = json.loads(value)
    for name in row._times:
        if type(value := row[name]) is str:
            row[name] = datetime.fromisoformat(value)
    return row


def sqlite_time(moment: datetime) -> str:
    """A moment as SQLAlchemy stores DateTime in SQLite (UTC, no offset): sortable text."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite_value(value: Any) -> Any:
    kind = type(value)
    if kind is dict or kind is list:
        return json.dumps(value)
    if kind is datetime:
        return sqlite_time(value)
    return value


class Tx(Protocol):
    """One transaction (or, for SQLite reads, one connection's autocommit statements)."""

    dialect: str
    lock_rows: str  # appended to a SELECT that must lock its rows (" FOR UPDATE" or "")

    @property
    def info(self) -> dict[str, Any]: ...  # the transaction's scratch space

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...

    def first(self, sql: str, params: Mapping[str, Any] | None = None) -> Row | None: ...

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any: ...

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int: ...


class Db(Protocol):
    dialect: str

    def write(self, *, durable: bool = False) -> Any: ...

    def read(self) -> Any: ...

    def close(self) -> None: ...


class _SqliteTx:
    dialect = "sqlite"
    lock_rows = ""  # BEGIN IMMEDIATE holds the database's write lock already

    __slots__ = ("conn", "info")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.info: dict[str, Any] = {}

    def _execute(self, sql: str, params: Mapping[str, Any] | None) -> sqlite3.Cursor:
        if params:
            params = {name: _sqlite_value(value) for name, value in params.items()}
        return self.conn.execute(sql, params or {})

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        cursor = self._execute(sql, params)
        names = tuple(d[0] for d in cursor.description)
        return list(decode_rows(names, cursor.fetchall()))

    def first(self, sql: str, params: Mapping[str, Any] | None = None) -> Row | None:
        cursor = self._execute(sql, params)
        values = cursor.fetchone()
        if values is None:
            return None
        return decode_row(tuple(d[0] for d in cursor.description), values)

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        row = self.first(sql, params)
        return None if row is None else next(iter(row.values()))

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        return self._execute(sql, params).rowcount


# The files (device, inode) this process holds SQLite connections on, and how many. SQLite's
# locks are POSIX record locks, which belong to the process and the file: closing *any*
# descriptor of the file in this process drops them all (fcntl(2)). A process that then
# read the file's header with open()/close() would leave its connections without their
# shared lock; the next process to close its own connection finds itself "last", deletes
# the -wal and -shm files, and this process goes on reading a stale snapshot and writing
# into an unlinked log (an answer committed elsewhere is never seen, our writes are lost).
_OPEN_FILES: dict[tuple[int, int], int] = {}
_OPEN_LOCK = threading.Lock()


# The SQLite stores open in this process, each settled at its exit (SqliteDb.settle).
_LIVE: weakref.WeakSet[SqliteDb] = weakref.WeakSet()


@atexit.register
def _settle_all() -> None:
    for db in list(_LIVE):
        db.settle()


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def open_in_this_process(path: Path) -> bool:
    """Does this process hold a store connection on the SQLite file `path`? (Then nothing
    in it may open the file by other means: see _OPEN_FILES.)"""
    key = _file_key(path)
    with _OPEN_LOCK:
        return key is not None and _OPEN_FILES.get(key, 0) > 0


def frozen(path: Path) -> bool:
    """Is the SQLite file `path` on a read-only filesystem, with no write-ahead log beside
    it (nothing committed that only the log holds)? Then it may be read as immutable."""
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
        wal = Path(f"{path}-wal")
        return read_only and (not wal.exists() or wal.stat().st_size == 0)
    except OSError:
        return False


class SqliteDb:
    """A SQLite file through one `sqlite3` connection, shared by the threads of a process
    under `lock` (LangGraph's checkpointer takes the same lock on the same connection)."""

    dialect = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._key: tuple[int, int] | None = None
        # Autocommit mode (isolation_level None): transactions are ours to BEGIN, so that a
        # write starts with BEGIN IMMEDIATE (a DEFERRED one can fail with SQLITE_BUSY when
        # it upgrades to a write, instead of waiting for the busy timeout).
        self.conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT, check_same_thread=False, isolation_level=None
        )
        try:
            configure_sqlite(self.conn)  # durable answers: write(durable=True)
        except sqlite3.OperationalError:
            self.conn.close()
            if not frozen(self.path):
                raise
            # A read-only filesystem and no write-ahead log: SQLite cannot open a WAL file
            # there without its -shm, and nothing can change the file either: it is read
            # as immutable (reads answer; a write fails as "readonly", and says so).
            uri = f"{self.path.absolute().as_uri()}?mode=ro&immutable=1"
            self.conn = sqlite3.connect(
                uri, uri=True, check_same_thread=False, isolation_level=None
            )
        except BaseException:
            self.conn.close()
            raise
        self.lock = threading.RLock()
        self._key = _file_key(self.path)  # (the file exists once connected)
        if self._key is not None:
            with _OPEN_LOCK:
                _OPEN_FILES[self._key] = _OPEN_FILES.get(self._key, 0) + 1
        self._pid = os.getpid()
        _LIVE.add(self)

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[_SqliteTx]:
        """A write transaction (BEGIN IMMEDIATE). `durable`: fsync this commit even under
        synchronous=NORMAL, so that it survives a power loss and not only a killed process."""
        with self.lock:
            conn = self.conn
            if durable:
                conn.execute("PRAGMA synchronous = FULL")  # only outside a transaction
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield _SqliteTx(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    # (SQLite may have rolled back on its own already, e.g. on a full disk;
                    # never leave a transaction open on the shared connection.)
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous = NORMAL")

    @contextmanager
    def read(self) -> Iterator[_SqliteTx]:
        """Reads, each statement its own snapshot (what must agree is read in one)."""
        with self.lock:
            yield _SqliteTx(self.conn)

    def settle(self) -> None:
        """Fold the write-ahead log back into the file and empty it (a TRUNCATE
        checkpoint), if that needs no wait: run at the process's exit, so that the file
        alone holds everything committed (a copy of it without its `-wal`, a read-only
        medium) where SQLite would fold the log in only after 1,000 pages. Never waits:
        not while a thread of ours holds the connection, nor for another process's
        readers (the checkpoint then does what it can, or nothing); never raises."""
        if self._key is None or self._pid != os.getpid():  # closed, or a parent's (fork)
            return
        if not self.lock.acquire(blocking=False):
            return
        try:
            self.conn.execute("PRAGMA busy_timeout = 0")
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                self.conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        except sqlite3.Error:
            pass  # busy, read-only, a full disk: the log keeps it all, as before
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            key, self._key = self._key, None
        if key is not None:
            with _OPEN_LOCK:
                left = _OPEN_FILES.pop(key, 0) - 1
                if left > 0:
                    _OPEN_FILES[key] = left
