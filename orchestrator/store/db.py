"""Opening the database: URL resolution, SQLite settings, and migrations before first use."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

import orchestrator.migrations as _migrations_package
from orchestrator.errors import ConfigError
from orchestrator.install_hints import install_extra
from orchestrator.store.schema import HEAD_REVISION

__all__ = [
    "ENV_DB",
    "default_url",
    "resolve_url",
    "db_origin",
    "check_sqlite_file",
    "damaged_database",
    "open_engine",
    "upgrade",
    "sqlite_path",
    "MIGRATION_LOCK_KEY",
]

ENV_DB = "ORCHESTRATOR_DB"
# Seconds a connection waits for SQLite's write lock before giving up. Agent calls never
# happen inside a write transaction, so waits are short; this covers many processes at once.
SQLITE_BUSY_TIMEOUT = 30.0
# The Alembic scripts: the repository's migrations/, installed as orchestrator.migrations.
MIGRATIONS = Path(_migrations_package.__file__).resolve().parent
# PostgreSQL advisory lock keys: migrations take this one, LangGraph's checkpoint setup the
# next (orchestrator/checkpoints.py). Any fixed number works; this one spells "orch".
MIGRATION_LOCK_KEY = 0x6F726368


def default_url() -> str:
    """A SQLite file in the user's data directory (platformdirs)."""
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('orchestrator', appauthor=False)) / 'orchestrator.db'}"


def db_origin(db: str | None) -> str:
    """Where the database setting came from, as messages name it."""
    if db is not None:
        return "--db"
    return ENV_DB if os.environ.get(ENV_DB) else "the default database"


def resolve_url(db: str | None) -> str:
    """`--db` wins, then $ORCHESTRATOR_DB, then the default. A bare path means a SQLite file."""
    origin = db_origin(db)
    if db is not None and not db.strip():
        raise ConfigError(
            "--db is empty; expected a SQLite file path or a database URL "
            "(e.g. sqlite:///path/to/file.db); leave it out for the default database"
        )
    url = db or os.environ.get(ENV_DB) or default_url()
    _check_url_shape(url, origin)
    if "://" not in url:
        url = f"sqlite:///{Path(url).expanduser().resolve()}"
    for plain in ("postgresql://", "postgres://"):  # the driver we ship, not psycopg2
        if url.startswith(plain):
            url = "postgresql+psycopg://" + url.removeprefix(plain)
    try:
        make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigError(
            f"{origin} {url!r} is not a database URL ({exc}); expected e.g. "
            "sqlite:///path/to/file.db or postgresql+psycopg://user:password@host:5432/db"
        ) from None
    return url


_DIALECTS = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9.]*)(\+[A-Za-z0-9_]+)?:(?!//)")


def _check_url_shape(url: str, origin: str) -> None:
    """`sqlite:/x.db` is a URL missing its slashes, not a file named so: say which was meant."""
    match = _SCHEME.match(url)
    if match and match.group(1).lower() in _DIALECTS:
        rest = url[match.end() :].lstrip("/")
        raise ConfigError(
            f"{origin} {url!r}: a database URL needs '//' after '{match.group(0)}'; "
            f"did you mean {match.group(0)}///{rest} (the file {rest})?"
        )


_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_sqlite_file(url: str, *, create: bool, origin: str) -> bool:
    """Check the file behind a SQLite URL before anything opens it; True if it exists.

    A folder, another kind of file, a truncated database, another application's database
    or one from a newer version of orchestrator is refused (ConfigError, nothing touched).
    A missing file is fine: `create` makes its folder only for the default database
    (folders the user named must exist), and read commands create nothing.
    """
    path = sqlite_path(url)
    if path is None:
        return True
    label = f"{origin} {path}"
    if path.exists():
        if path.is_dir():
            raise ConfigError(f"{label}: is a folder; expected a database file")
        _check_sqlite_content(path, label)
        return create or path.stat().st_size > 0  # an empty file holds no sessions yet
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{label}: {parent} is a file, not a folder")
            break
    if create and not path.parent.is_dir():
        if origin != "the default database":
            raise ConfigError(
                f"{label}: the folder {path.parent} does not exist; create it first "
                "(orchestrator creates the database file, never the folders you name)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)  # our own data directory
    return False


def _check_sqlite_content(path: Path, label: str) -> None:
    with path.open("rb") as file:
        header = file.read(100)
    if not header:
        return  # an empty file: a new database
    if not header.startswith(_SQLITE_MAGIC):
        raise ConfigError(f"{label}: not a SQLite database file")
    page_size = int.from_bytes(header[16:18], "big") if len(header) >= 18 else 0
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big") if len(header) >= 32 else 0
    if len(header) < 100 or path.stat().st_size < page_size * pages:
        raise ConfigError(
            f"{label}: the database file is truncated ({path.stat().st_size:,} bytes, "
            f"its header says {page_size * pages:,}); restore it from a backup"
        )
    import sqlite3

    # Look without leaving a trace: with no -wal file beside it the file is the whole
    # database, and `immutable` keeps SQLite from creating -wal/-shm files just to read.
    live_wal = path.with_name(path.name + "-wal").exists()
    query = "mode=ro" if live_wal else "immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True)
    except sqlite3.Error:
        return  # cannot look without writing (e.g. no -shm yet): the open reports problems
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        revision = None
        if "alembic_version" in tables:
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{label}: the database file is damaged ({exc})") from None
    finally:
        conn.close()
    if revision is not None:
        _check_known_revision(revision[0], label)
    elif tables - {"alembic_version"}:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise ConfigError(
            f"{label}: a database of another application (tables: {shown}); orchestrator "
            "will not add its tables to it: give another file"
        )


def _known_revisions() -> set[str]:
    found = set()
    for script in (MIGRATIONS / "versions").glob("*.py"):
        match = re.search(r'^revision\s*=\s*["\']([^"\']+)', script.read_text(), re.M)
        if match:
            found.add(match.group(1))
    return found


def _check_known_revision(revision: str | None, label: str) -> None:
    if revision is None or revision == HEAD_REVISION or revision in _known_revisions():
        return
    raise ConfigError(
        f"{label}: the database is at schema revision {revision!r}, which this version of "
        f"orchestrator does not know (ours go up to {HEAD_REVISION!r}); it was written by a "
        "newer version: upgrade orchestrator to use it"
    )


def damaged_database(exc: BaseException) -> str | None:
    """The message for a database file found damaged while reading it, else None."""
    import sqlite3

    from sqlalchemy.exc import DatabaseError

    orig = getattr(exc, "orig", None)
    if isinstance(exc, DatabaseError) and type(orig) is sqlite3.DatabaseError:
        return f"the database file is damaged or not a SQLite database ({orig})"
    return None


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for other databases and in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_engine(url: str, *, migrate: bool = True) -> Engine:
    """An engine for `url`, with the schema brought up to date before it is returned."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
        _configure_sqlite(engine)
    elif make_url(url).get_backend_name() == "postgresql":
        engine = _postgres_engine(url)
    else:
        try:
            engine = create_engine(url, pool_pre_ping=True)
        except ArgumentError as exc:
            raise ConfigError(
                f"--db {url!r}: unknown database kind ({exc}); expected a sqlite:// or "
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
            raise ConfigError(f"cannot open the database {engine.url!r}: {exc.orig}") from exc
    return engine


def _postgres_engine(url: str) -> Engine:
    """Pooled, with timeouts and readable connection errors (orchestrator/store/_pg.py)."""
    try:
        from orchestrator.store._pg import postgres_engine

        return postgres_engine(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"--db {url!r}: unknown PostgreSQL driver ({exc}); expected "
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
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
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
