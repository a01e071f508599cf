"""LangGraph's checkpointer for a database URL, in the same database as our tables.

Three rules beyond opening it:
- its tables are set up once per database per process, serialised across processes (an
  advisory lock on PostgreSQL; SQLite's own write lock), never once per drive;
- a driver's checkpointer is fenced: every `put` and `put_writes` checks the claim, so a
  process that lost its session writes no checkpoint (no forked history). On SQLite the
  check runs in the checkpoint's own write transaction; on PostgreSQL, where LangGraph's
  PostgresSaver is handed the store's pool as it is, just before the write;
- on SQLite it shares the store's connection and lock (orchestrator.store.sql.SqliteDb):
  the store and the checkpointer never wait on each other's locks in one process.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from orchestrator.errors import ConfigError, StorageFailed
from orchestrator.install_hints import install_extra
from orchestrator.outages import Backoff
from orchestrator.store.connect import sqlite_path
from orchestrator.store.sql import BUSY_TIMEOUT, SqliteDb, Tx, configure_sqlite

__all__ = ["checkpointer", "set_up", "fenced", "unwritten", "not_at_the_end", "StoreSaver"]

_setup_lock = threading.Lock()
_set_up: set[str] = set()  # URLs whose checkpoint tables this process has set up


def _store_saver_class() -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class _StoreSaver(SqliteSaver):
        """SqliteSaver on the store's connection, under the store's lock. Each write is a
        transaction of the store's (BEGIN IMMEDIATE) that runs `fence` first."""

        def __init__(self, db: SqliteDb, fence: Callable[[Tx], None] | None) -> None:
            super().__init__(db.conn)
            self.db = db
            self.lock = db.lock  # type: ignore[assignment]  # an RLock: the store's
            self.fence = fence
            self.is_setup = True  # set up once per file per process, by checkpointer()

        @contextmanager
        def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
            if not transaction:  # a read
                with self.lock:
                    cur = self.conn.cursor()
                    try:
                        yield cur
                    finally:
                        cur.close()
                return
            with self.db.write() as tx:
                if self.fence is not None:
                    self.fence(tx)
                cur = self.conn.cursor()
                try:
                    yield cur
                finally:
                    cur.close()

    return _StoreSaver


_saver_class: Any = None


def StoreSaver(db: SqliteDb, fence: Callable[[Tx], None] | None = None) -> Any:  # noqa: N802
    """A SqliteSaver sharing `db`'s connection and lock; `fence(tx)` runs first in every
    write transaction (it raises to refuse the write)."""
    global _saver_class
    if _saver_class is None:
        _saver_class = _store_saver_class()
    with _setup_lock:
        if str(db.path) not in _set_up:
            with db.lock:
                saver = _saver_class(db, None)
                saver.is_setup = False
                saver.setup()  # CREATE TABLE IF NOT EXISTS (autocommit: its own writes)
            _set_up.add(str(db.path))
    return _saver_class(db, fence)


@contextmanager
def checkpointer(
    url: str, db: Any = None, fence: Callable[[Tx], None] | None = None
) -> Iterator[Any]:
    """The store's own connection when `db` is a SqliteDb, the store's pool when it is a
    PgDb (`fence` checks each write in its transaction, either way); else SqliteSaver on
    the same file (WAL, same busy timeout)."""
    if isinstance(db, SqliteDb):
        yield StoreSaver(db, fence)
        return
    path = sqlite_path(url)
    if path is not None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
        configure_sqlite(conn, foreign_keys=False)  # as our own connection's
        try:
            saver = SqliteSaver(conn)
            with _setup_lock:
                if url not in _set_up:
                    saver.setup()  # CREATE TABLE IF NOT EXISTS, under SQLite's write lock
                    _set_up.add(url)
                saver.is_setup = True
            yield saver
        finally:
            conn.close()
        return
    if url.startswith("sqlite"):
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if url.startswith("postgresql"):
        _set_up_postgres(url)
        if getattr(db, "dialect", None) == "postgresql":
            yield _pool_saver_class()(db, fence)
            return
        from orchestrator.store.pg_db import PgDb

        own = PgDb(url)  # no store: a pool of its own for the block
        try:
            yield _pool_saver_class()(own, fence)
        finally:
            own.close()
        return
    from orchestrator.redact import mask_url

    raise ConfigError(f"no LangGraph checkpointer for database URL {mask_url(url)!r}")


def set_up(url: str) -> None:
    """Set up LangGraph's tables in a PostgreSQL database before a session is created in
    it, so that a set-up that cannot happen (StorageFailed) leaves no session behind.
    Once per process; SQLite's are set up with the store's connection."""
    if url.startswith("postgresql"):
        _set_up_postgres(url)


def _postgres_saver_class() -> Any:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "PostgreSQL needs the postgres extra: " + install_extra("postgres")
        ) from exc
    return PostgresSaver


_pool_saver: Any = None


def _pool_saver_class() -> Any:
    """PostgresSaver handed the store's own pool (orchestrator.store.pg_db.PgDb.pool):
    each of its operations borrows a connection, checked as every borrowed one is, so a
    server restarted under a run costs a reconnect, not the run; the session opens no
    connection of its own. Its writes are fenced where we call them: `put` and
    `put_writes` run `fence` first (one read), so a process that lost its session writes
    no checkpoint. (Only public methods are extended; LangGraph's own writes are as it
    makes them.)"""
    global _pool_saver
    if _pool_saver is not None:
        return _pool_saver

    class _PoolSaver(_postgres_saver_class()):  # type: ignore[misc]
        def __init__(self, db: Any, fence: Callable[[Tx], None] | None) -> None:
            super().__init__(db.pool)
            self.db = db
            self.fence = fence

        def _check(self) -> None:
            if self.fence is not None:
                with self.db.read() as tx:
                    self.fence(tx)

        def put(self, *args: Any, **kwargs: Any) -> Any:
            self._check()
            return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            self._check()
            return super().put_writes(*args, **kwargs)

    _pool_saver = _PoolSaver
    return _pool_saver


def _set_up_postgres(url: str) -> None:
    """LangGraph's tables in the database at `url`, once per process (no connection after
    that)."""
    PostgresSaver = _postgres_saver_class()  # noqa: N806
    from psycopg import Connection, OperationalError
    from psycopg.rows import dict_row

    from orchestrator.store._pg import connect_options, connection_error

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with _setup_lock:
        if url in _set_up:
            return
        try:
            # As PostgresSaver.from_conn_string opens it (autocommit, no prepared
            # statements), with our timeouts.
            conn = Connection.connect(
                conninfo,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                **connect_options(url),
            )
        except OperationalError as exc:
            raise connection_error(exc, url) from exc
        with conn:
            _setup_postgres(PostgresSaver(conn))
        _set_up.add(url)


# Seconds a first use waits for another process's set-up of LangGraph's tables before it
# stops and names that process (a frozen or stuck holder never hangs the others).
SETUP_WAIT_ENV = "ORCHESTRATOR_SETUP_WAIT"
_DEFAULT_SETUP_WAIT = 30.0


def _setup_postgres(saver: Any) -> None:
    """PostgresSaver.setup() under a session advisory lock: concurrent first uses of one
    database otherwise race on its migrations table.

    Once the tables are at LangGraph's last migration no lock is taken at all: a process
    frozen while holding it (or stuck in it) blocks nobody but a database's very first
    use, and that one waits at most `ORCHESTRATOR_SETUP_WAIT` seconds, then says who holds
    it. The lock is polled, not waited for: setup's CREATE INDEX CONCURRENTLY waits for
    every open transaction, a pg_advisory_lock call blocked on us included (a deadlock).
    """
    from orchestrator.store.db import MIGRATION_LOCK_KEY

    if _set_up_already(saver):
        return
    key = MIGRATION_LOCK_KEY + 1
    lock = "SELECT pg_try_advisory_lock(%s) AS taken"
    wait = float(os.environ.get(SETUP_WAIT_ENV, _DEFAULT_SETUP_WAIT))
    deadline = time.monotonic() + wait
    backoff = Backoff(0.05, 0.5)
    while not (saver.conn.execute(lock, (key,)).fetchone() or {}).get("taken"):
        if time.monotonic() >= deadline:
            raise StorageFailed(_setup_held(saver, key, wait))
        time.sleep(min(backoff.next(), max(deadline - time.monotonic(), 0.0)))
    try:
        if not _set_up_already(saver):  # the holder we waited for may have done it
            saver.setup()
    finally:
        saver.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _set_up_already(saver: Any) -> bool:
    """LangGraph's checkpoint tables are at its last migration (what setup() would do)."""
    found = saver.conn.execute(
        "SELECT to_regclass('checkpoint_migrations') IS NOT NULL AS there"
    ).fetchone()
    if not (found or {}).get("there"):
        return False
    row = saver.conn.execute("SELECT max(v) AS v FROM checkpoint_migrations").fetchone() or {}
    return row.get("v") is not None and int(row["v"]) >= len(saver.MIGRATIONS) - 1


def _setup_held(saver: Any, key: int, wait: float) -> str:
    """Who holds the set-up lock `key`, and what to do about it."""
    holder = saver.conn.execute(
        "SELECT a.pid, a.application_name AS app, host(a.client_addr) AS addr, "
        "a.backend_start::timestamp(0)::text AS since "
        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s "
        "AND l.objsubid = 1",
        (key >> 32, key & 0xFFFFFFFF),
    ).fetchone()
    if holder is None:  # let go between our last try and this look
        who = "another connection"
        stop = "stop the process that sets it up"
    else:
        where = f", from {holder['addr']}" if holder.get("addr") else ""
        app = f" ({holder['app']})" if holder.get("app") else ""
        who = (
            f"the connection with backend pid {holder['pid']}{app}{where}, connected since "
            f"{holder['since']}"
        )
        stop = (
            "if that process is frozen or stuck, stop it or end its connection with "
            f"`SELECT pg_terminate_backend({holder['pid']})`"
        )
    return (
        f"LangGraph's checkpoint tables in this PostgreSQL database are being set up by {who}, "
        f"which has held the set-up lock (advisory lock {key}) for over {wait:g} s "
        f"(${SETUP_WAIT_ENV}); {stop}, then try again"
    )


def fenced(saver: Any, check: Callable[[], None]) -> Any:
    """`saver`, with `check()` (which raises when the claim is lost) before every write.

    Per drive the saver is a fresh object, so its write methods are wrapped on the
    instance. Reads go through untouched.
    """
    put, put_writes = saver.put, saver.put_writes

    def guarded_put(*args: Any, **kwargs: Any) -> Any:
        check()
        return put(*args, **kwargs)

    def guarded_put_writes(*args: Any, **kwargs: Any) -> Any:
        check()
        return put_writes(*args, **kwargs)

    saver.put = guarded_put
    saver.put_writes = guarded_put_writes
    return saver


def unwritten(saver: Any, thread_id: str) -> Any:
    """`saver` for a session this drive created: its thread has no checkpoint until this
    saver writes one, so LangGraph's reads of it are answered (None) without a query until
    then. Wrapped on the instance, as `fenced` does."""
    get_tuple, put, put_writes = saver.get_tuple, saver.put, saver.put_writes
    written = threading.Event()

    def first_get_tuple(config: Any) -> Any:
        if not written.is_set() and config.get("configurable", {}).get("thread_id") == thread_id:
            return None
        return get_tuple(config)

    def noted_put(*args: Any, **kwargs: Any) -> Any:
        written.set()
        return put(*args, **kwargs)

    def noted_put_writes(*args: Any, **kwargs: Any) -> Any:
        written.set()
        return put_writes(*args, **kwargs)

    saver.get_tuple = first_get_tuple
    saver.put = noted_put
    saver.put_writes = noted_put_writes
    return saver


def not_at_the_end(saver: Any, ended: Callable[[Mapping[str, Any]], bool]) -> Any:
    """`saver`, writing no checkpoint whose channel values say the run has `ended`: the
    session's release deletes its checkpoints in the same breath, so that one would be
    serialised and written only to go. A crash before the release commits resumes from
    the checkpoint before it, and meets every turn and decision of the rest in the store
    (keyed): replayed, never repeated. Wrapped on the instance, as `fenced` does."""
    put = saver.put

    def put_unless_ended(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if ended(checkpoint.get("channel_values") or {}):
            configurable = config.get("configurable", {})
            return {"configurable": {**configurable, "checkpoint_id": checkpoint["id"]}}
        return put(config, checkpoint, metadata, new_versions)

    saver.put = put_unless_ended
    return saver
