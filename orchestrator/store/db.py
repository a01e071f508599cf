"""SQLAlchemy engines: PostgreSQL's, SQLite's for Alembic and the tests, and migrations.

URL resolution and the file checks live in orchestrator.store.connect (standard library)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from orchestrator.errors import ConfigError
from orchestrator.install_hints import install_extra
from orchestrator.redact import mask_url
from orchestrator.store.connect import (
    HEAD_REVISION,
    MIGRATIONS,
    _check_known_revision,
    create_private,
    open_failed,
    sqlite_path,
    url_origin,
)
from orchestrator.store.sql import BUSY_TIMEOUT, configure_sqlite

__all__ = ["open_engine", "upgrade", "MIGRATION_LOCK_KEY"]

# Seconds a connection waits for SQLite's write lock before giving up. Agent calls never
# happen inside a write transaction, so waits are short; this covers many processes at once.
SQLITE_BUSY_TIMEOUT = BUSY_TIMEOUT
# PostgreSQL advisory lock keys: migrations take this one, LangGraph's checkpoint setup the
# next (orchestrator/runtime/checkpoints.py). Any fixed number works; this one spells "orch".
MIGRATION_LOCK_KEY = 0x6F726368


def open_engine(url: str, *, migrate: bool = True) -> Engine:
    """An engine for `url`, with the schema brought up to date before it is returned."""
    path = sqlite_path(url)
    if path is not None:
        create_private(path)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
        _configure_sqlite(engine)
    elif make_url(url).get_backend_name() == "postgresql":
        engine = _postgres_engine(url)
    else:
        try:
            engine = create_engine(url, pool_pre_ping=True)
        except ArgumentError as exc:
            raise ConfigError(
                f"{url_origin(url)} {mask_url(url)!r}: unknown database kind ({exc}); expected a "
                "sqlite:// or "
                "postgresql+psycopg:// URL, or a file path"
            ) from exc
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"the database driver for {make_url(url).drivername!r} is not installed "
                f"({exc.name}); for PostgreSQL install the extra: {install_extra('postgres')}"
            ) from exc
    if migrate:
        try:
            _ensure_schema(engine)
        except OperationalError as exc:
            shown = mask_url(engine.url.render_as_string(hide_password=True))
            raise open_failed(repr(shown), exc) from exc
    return engine


def _postgres_engine(url: str) -> Engine:
    """Pooled, with timeouts and readable connection errors (orchestrator/store/_pg.py)."""
    try:
        from orchestrator.store._pg import postgres_engine

        return postgres_engine(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"{url_origin(url)} {mask_url(url)!r}: unknown PostgreSQL driver ({exc}); expected "
            "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE"
        ) from exc
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the PostgreSQL driver is not installed ({exc.name}); install the extra: "
            + install_extra("postgres")
        ) from exc


def _configure_sqlite(engine: Engine) -> None:
    # WAL lets readers (status, list) run while a session writes. pysqlite's own BEGIN
    # handling is switched off so that write transactions start with BEGIN IMMEDIATE: a
    # read-then-write transaction that starts DEFERRED can fail with SQLITE_BUSY at the
    # upgrade to a write lock instead of waiting for the busy timeout.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        configure_sqlite(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = "IMMEDIATE" if conn.get_execution_options().get("write") else "DEFERRED"
        conn.exec_driver_sql(f"BEGIN {mode}")


def _current_revision(engine: Engine | Connection) -> str | None:
    def read(conn: Connection) -> str | None:
        if not inspect(conn).has_table("alembic_version"):
            return None
        version: str | None = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        return version

    if isinstance(engine, Connection):
        return read(engine)
    with engine.connect() as conn:
        return read(conn)


def _ensure_schema(engine: Engine) -> None:
    # Fast path (every command): one SELECT. Alembic is imported only to actually migrate.
    current = _current_revision(engine)
    if current != HEAD_REVISION:
        _check_known_revision(current, repr(engine.url.render_as_string(hide_password=True)))
        upgrade(engine, only_if_behind=True)


def upgrade(engine: Engine, revision: str = "head", *, only_if_behind: bool = False) -> None:
    """Apply Alembic revisions up to `revision` (what `orchestrator db upgrade` runs).

    Serialised across processes: on SQLite the transaction starts with BEGIN IMMEDIATE
    (the write lock), on PostgreSQL it takes an advisory lock first. Whoever waited then
    finds the schema at head and does nothing (`only_if_behind`).
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect().execution_options(write=True) as conn:
        config.attributes["connection"] = conn
        try:
            conn.begin()
            if conn.dialect.name == "postgresql":
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            if only_if_behind and _current_revision(conn) == HEAD_REVISION:
                conn.commit()
                return
            command.upgrade(config, revision)
            conn.commit()
        except OperationalError:
            # Another process migrated the same fresh file first: fine if it reached head.
            conn.rollback()
            if _current_revision(engine) != HEAD_REVISION:
                raise
