"""PostgreSQL connections that fit a server: a pool checked before use, timeouts, and
connection failures turned into errors a user can act on (never a driver traceback)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from orchestrator.errors import ConfigError, DatabaseUnavailable
from orchestrator.redact import mask_url

__all__ = [
    "postgres_engine",
    "connect_options",
    "connection_error",
    "is_connection_failure",
    "STATEMENT_TIMEOUT_MS",
    "CONNECT_TIMEOUT_S",
]

# A statement that runs this long is stuck (ours are short: agents are never called inside a
# transaction); a URL's own `options=-c statement_timeout=...` wins.
STATEMENT_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 10
# Per process: the command's connection, the lease thread's, and room for a worker's threads.
POOL_SIZE = 5
MAX_OVERFLOW = 10

# What the user should do about a failed connection, by psycopg's SQLSTATE where the server
# sent one on an established connection: 08 connection exception; 57P01-57P03 admin
# shutdown, crash shutdown, cannot connect now (starting up, in recovery); 28 the login
# refused, 3D000 no such database, 42501 no privilege, 53300 too many connections.
_DOWN_STATES = frozenset({"57P01", "57P02", "57P03"})
_LOGIN_STATES = frozenset({"3D000", "42501", "53300"})

# A connection attempt that fails carries no SQLSTATE (libpq keeps the server's FATAL
# code to itself; psycopg 3.3 gives `sqlstate is None`, whatever the cause), so only for
# those libpq's words say which it was.
_CONNECT_URL = ("invalid port number", "invalid connection option")
_CONNECT_HOST = ("failed to resolve host", "could not translate host name")
_CONNECT_LOGIN = (
    "password authentication failed",
    "no password supplied",
    "does not exist",  # role or database
    "no pg_hba.conf entry",
    "permission denied",
    "too many connections",
)
_CONNECT_DOWN = (
    "connection refused",
    "no such file or directory",  # a unix socket that is not there: no server
    "server closed the connection",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "ssl syscall error",
)


def connect_options(url: str) -> dict[str, Any]:
    """libpq options we add unless the URL sets them itself."""
    query = make_url(url).query
    options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "application_name": "orchestrator",
        "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
    }
    return {k: v for k, v in options.items() if k not in query}


def postgres_engine(url: str) -> Engine:
    """A pooled engine: connections pinged before use (a restarted server costs nothing but a
    reconnect), recycled hourly, with connect and statement timeouts."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2: ours is 3
        parsed = parsed.set(drivername="postgresql+psycopg")
    engine = create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=POOL_SIZE,
        max_overflow=MAX_OVERFLOW,
        pool_recycle=3600,
        connect_args=connect_options(url),
    )

    @event.listens_for(engine, "handle_error")
    def _translate(context: Any) -> BaseException | None:
        # A failed pre-ping is handled by the pool (it reconnects): leave it alone.
        if context.is_pre_ping or not _is_connection_failure(context):
            return None
        return connection_error(context.original_exception, url)

    return engine


def _is_connection_failure(context: Any) -> bool:
    import psycopg

    original = context.original_exception
    return isinstance(original, psycopg.OperationalError) and (
        context.is_disconnect or context.connection is None or is_connection_failure(original)
    )


def is_connection_failure(exc: BaseException) -> bool:
    """Does the driver's error `exc` say the connection (not the statement) failed?"""
    return _kind(exc) != "other"


def _kind(exc: BaseException) -> str:
    """What failed, by psycopg's error class and SQLSTATE: "down" (the server is not
    there), "login" (it refused us), "host", "url", or "other" (not the connection)."""
    import psycopg
    from psycopg import errors

    if not isinstance(exc, psycopg.Error):
        return "other"
    if isinstance(exc, errors.ConnectionTimeout):
        return "down"
    state = exc.sqlstate
    if state is not None:
        if state.startswith("08") or state in _DOWN_STATES:
            return "down"
        if state.startswith("28") or state in _LOGIN_STATES:
            return "login"
        return "other"  # a statement's own failure (a timeout, a cancel)
    return _connect_kind(_first_line(exc))


def _connect_kind(message: str) -> str:
    text = message.lower()
    for kind, words in (
        ("url", _CONNECT_URL),
        ("host", _CONNECT_HOST),
        ("login", _CONNECT_LOGIN),
        ("down", _CONNECT_DOWN),
    ):
        if any(w in text for w in words):
            return kind
    return "other"


def _first_line(exc: BaseException) -> str:
    """libpq's message without its own hint lines ("Is the server running ...?")."""
    return " ".join(str(exc).strip().splitlines()[0].split()) if str(exc).strip() else ""


def connection_error(exc: BaseException, url: str) -> ConfigError:
    """The error to raise for a failed connection to `url` (password hidden)."""
    from orchestrator.store.connect import url_origin

    parsed = make_url(url)
    shown = mask_url(parsed.render_as_string(hide_password=True))
    origin = url_origin(url)  # --db, or ORCHESTRATOR_DB
    where = parsed.host or parsed.query.get("host") or "the local socket"
    if parsed.port:
        where = f"{where}:{parsed.port}"
    detail = _first_line(exc)
    kind = _kind(exc)
    if kind == "down":
        return DatabaseUnavailable(
            f"cannot reach the PostgreSQL server at {where} ({detail}). Is the server "
            f"running and accepting connections? Start it (or check {origin} {shown}), then try "
            "again."
        )
    if kind == "url":
        return ConfigError(
            f"{origin} {shown}: not a valid PostgreSQL URL ({detail}); expected "
            "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE"
        )
    if kind == "host":
        return ConfigError(
            f"{origin} {shown}: unknown host {parsed.host!r} ({detail}); check the host name"
        )
    if kind == "login":
        return ConfigError(
            f"{origin} {shown}: the server at {where} refused the connection ({detail}); check "
            "the user, password, database name and port in the URL"
        )
    return ConfigError(f"cannot open the database {shown}: {detail}")
