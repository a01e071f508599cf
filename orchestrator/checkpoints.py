"""LangGraph's checkpointer for a database URL, in the same database as our tables."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.store.db import SQLITE_BUSY_TIMEOUT, sqlite_path

__all__ = ["checkpointer"]

CHECKPOINT_SETUP_LOCK = 0x6F726369  # pg_advisory_lock key for LangGraph's setup()


@contextmanager
def checkpointer(url: str) -> Iterator[Any]:
    """SqliteSaver on the same file (WAL, same busy timeout); PostgresSaver for PostgreSQL."""
    path = sqlite_path(url)
    if path is not None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT * 1000)}")
        # As for our own connection: in WAL mode NORMAL survives a killed process (only a
        # power loss can drop the last commits), and skips an fsync per checkpoint.
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
        return
    if url.startswith("sqlite"):
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if url.startswith("postgresql"):
        with _postgres_saver(url) as pg_saver:
            yield pg_saver
        return
    raise ConfigError(f"no LangGraph checkpointer for database URL {url!r}")


@contextmanager
def _postgres_saver(url: str) -> Iterator[Any]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "PostgreSQL needs the postgres extra: pip install 'orchestrator[postgres]'"
        ) from exc
    from psycopg import Connection, OperationalError
    from psycopg.rows import dict_row

    from orchestrator.store._pg import connect_options, connection_error

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        # As PostgresSaver.from_conn_string opens it (autocommit, no prepared statements),
        # with our timeouts.
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
        # setup() runs LangGraph's migrations; two processes doing it at once on a new
        # database collide, so one at a time (a session lock: the connection autocommits).
        # Polled, not waited for: its CREATE INDEX CONCURRENTLY waits for every open
        # transaction, a blocked pg_advisory_lock call included (a deadlock).
        lock = "SELECT pg_try_advisory_lock(%s) AS taken"
        while not (conn.execute(lock, (CHECKPOINT_SETUP_LOCK,)).fetchone() or {}).get("taken"):
            time.sleep(0.05)
        saver = PostgresSaver(conn)
        try:
            saver.setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (CHECKPOINT_SETUP_LOCK,))
        yield saver
