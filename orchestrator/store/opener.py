"""The store's one opener: a database URL to the `Db` the store runs its SQL on."""

from __future__ import annotations

import sqlite3
from typing import Any

from orchestrator.redact import mask_url
from orchestrator.store.connect import HEAD_REVISION, create_private, open_failed, sqlite_path
from orchestrator.store.sql import SqliteDb

__all__ = ["open_db", "db_of_engine"]


def open_db(url: str) -> Any:
    """The store's database at `url` (resolved), its schema at HEAD_REVISION first.

    A SQLite file opens on the standard library alone when it is up to date (one SELECT);
    otherwise, and for PostgreSQL, SQLAlchemy opens it (and Alembic migrates it)."""
    path = sqlite_path(url)
    if path is not None:
        create_private(path)
        try:
            db = SqliteDb(path)
        except sqlite3.OperationalError as exc:  # e.g. a folder nobody may create files in
            raise open_failed(mask_url(url), exc) from None
        try:
            with db.read() as tx:
                has_table = tx.scalar(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
                )
                current = (
                    tx.scalar("SELECT version_num FROM alembic_version") if has_table else None
                )
        except BaseException:
            db.close()
            raise
        if current == HEAD_REVISION:
            return db
        db.close()
    from orchestrator.store.db import open_engine

    engine = open_engine(url)  # migrates (or refuses a revision it does not know)
    engine.dispose()
    if path is None:
        from orchestrator.store.pg_db import PgDb

        return PgDb(url)
    return SqliteDb(path)


def db_of_engine(engine: Any, url: str) -> Any:
    """The `Db` for a SQLAlchemy engine made elsewhere (tests, older callers): the store's
    own connection on a SQLite file, its own pool on PostgreSQL (the engine only opened
    and migrated the database)."""
    path = sqlite_path(url)
    if path is not None:
        return SqliteDb(path)
    from orchestrator.store.pg_db import PgDb

    return PgDb(url)
