"""Finding and opening the database, with the standard library where that is enough.

A command on a SQLite file resolves its URL, checks the file, and opens the store here
without importing SQLAlchemy (a process that resumes a session pays for LangGraph only);
SQLAlchemy and Alembic load when a database needs migrating, and for PostgreSQL.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import sys
from pathlib import Path

import orchestrator.migrations as _migrations_package
from orchestrator.errors import ConfigError, DatabaseUnavailable, StorageFailed, UserError
from orchestrator.redact import mask_url
from orchestrator.store.sql import open_in_this_process

__all__ = [
    "ENV_DB",
    "HEAD_REVISION",
    "MIGRATIONS",
    "create_private",
    "default_url",
    "resolve_url",
    "db_origin",
    "url_origin",
    "check_sqlite_file",
    "sqlite_path",
    "damaged_database",
    "sqlite_code",
    "storage_failure",
    "plain_sqlite_file",
]

ENV_DB = "ORCHESTRATOR_DB"
# The newest Alembic revision; tests/test_migrations.py checks it matches migrations/.
HEAD_REVISION = "0010"
# The Alembic scripts: the repository's migrations/, installed as orchestrator.migrations.
MIGRATIONS = Path(_migrations_package.__file__).resolve().parent
_SQLITE_FILE = "sqlite:///"


def plain_sqlite_file(url: str) -> Path | None:
    """The file of a plain `sqlite:///PATH` URL (no query, no escapes), else None."""
    if not url.startswith(_SQLITE_FILE) or any(c in url for c in "?#%"):
        return None
    rest = url[len(_SQLITE_FILE) :]
    return None if rest in ("", ":memory:") else Path(rest)


def default_url() -> str:
    """A SQLite file in the user's data directory (platformdirs)."""
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('orchestrator', appauthor=False)) / 'orchestrator.db'}"


def db_origin(db: str | None) -> str:
    """Where the database setting came from, as messages name it."""
    if db is not None:
        return "--db"
    return ENV_DB if os.environ.get(ENV_DB) else "the default database"


def url_origin(url: str) -> str:
    """Where a resolved `url` came from, as messages name it, where only the URL is known
    (opening it): ORCHESTRATOR_DB when that holds this very database, else --db."""
    env = os.environ.get(ENV_DB)
    if env and env.strip() and "://" in env and _with_driver(env) == url:
        return ENV_DB
    return "--db"


def _with_driver(url: str) -> str:
    for plain in ("postgresql://", "postgres://"):  # the driver we ship, not psycopg2
        if url.startswith(plain):
            return "postgresql+psycopg://" + url.removeprefix(plain)
    return url


def resolve_url(db: str | None) -> str:
    """`--db` wins, then $ORCHESTRATOR_DB, then the default. A bare path means a SQLite file
    (from ORCHESTRATOR_DB an absolute one: a relative one would follow the working folder)."""
    origin = db_origin(db)
    if db is not None and not db.strip():
        raise ConfigError(
            "--db is empty; expected a SQLite file path or a database URL "
            "(e.g. sqlite:///path/to/file.db); leave it out for the default database"
        )
    url = db or os.environ.get(ENV_DB) or default_url()
    _check_url_shape(url, origin)
    if "://" not in url:
        if origin == ENV_DB and not Path(url).expanduser().is_absolute():
            shown = repr(url[:80]) if "@" not in url else "(not shown: it may hold a password)"
            raise ConfigError(
                f"{ENV_DB} {shown} is neither a database URL nor an absolute file path; "
                "expected e.g. sqlite:////home/me/orchestrator.db, /home/me/orchestrator.db "
                "or postgresql+psycopg://USER:PASSWORD@HOST:5432/DB (a relative path would "
                "name another file in every folder)"
            )
        url = f"sqlite:///{Path(url).expanduser().resolve()}"
    url = _with_driver(url)
    if plain_sqlite_file(url) is not None:
        return url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigError(
            f"{origin} {mask_url(url)!r} is not a database URL ({mask_url(str(exc))}); "
            "expected e.g. sqlite:///path/to/file.db or postgresql+psycopg://user:password@host:5432/db"
        ) from None
    _check_libpq_reads(url, origin)
    return url


def _check_libpq_reads(url: str, origin: str) -> None:
    """A PostgreSQL URL that libpq cannot parse (a space in the password, say) is a
    ConfigError saying how to write it; psycopg's own error quoted the password, in a
    90-line traceback. Parsing only: nothing is connected."""
    if not url.startswith("postgresql+psycopg://"):
        return  # another driver: opening it says what is wrong
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ModuleNotFoundError:
        return  # the install hint comes when the database is opened
    try:
        conninfo_to_dict(url.replace("postgresql+psycopg://", "postgresql://", 1))
    except psycopg.ProgrammingError:
        scheme, _, rest = url.partition("://")
        userinfo, at, host = rest.rpartition("@")
        shown = f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}" if at else mask_url(url)
        raise ConfigError(
            f"{origin} {shown!r}: libpq cannot read this URL; percent-encode the reserved "
            "characters of a user name or password (a space is %20, @ is %40, : is %3A, "
            "/ is %2F, # is %23)"
        ) from None


_DIALECTS = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9.]*)(\+[A-Za-z0-9_]+)?:(?!//)")


def _check_url_shape(url: str, origin: str) -> None:
    """`sqlite:/x.db` is a URL missing its slashes, not a file named so: say which was meant."""
    match = _SCHEME.match(url)
    if match and match.group(1).lower() in _DIALECTS:
        rest = mask_url(url[match.end() :].lstrip("/"))
        raise ConfigError(
            f"{origin} {mask_url(url)!r}: a database URL needs '//' after '{match.group(0)}'; "
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
        if not path.is_file():  # opening a FIFO would wait for a writer forever
            raise ConfigError(
                f"{label}: is not a regular file (a pipe, a socket or a device); "
                "expected a database file"
            )
        if not open_in_this_process(path):  # (checked when it was opened; and reading it
            _check_sqlite_content(path, label)  # now would drop this process's locks on it)
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
        create_private(path)  # our own data directory, and the file in it
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
    # The header's page count is only a hint: in WAL mode the newest pages may be in the
    # -wal file (a checkpoint cut short by a full disk leaves the file shorter than its
    # header says). Only SQLite's own answer, WAL included, calls a file damaged.
    short = len(header) < 100 or path.stat().st_size < page_size * pages
    truncated = ConfigError(
        f"{label}: the database file is truncated ({path.stat().st_size:,} bytes, "
        f"its header says {page_size * pages:,}) and SQLite cannot read it; restore it "
        "from a backup"
    )

    # Look without leaving a trace: with no -wal file beside it the file is the whole
    # database, and `immutable` keeps SQLite from creating -wal/-shm files just to read.
    live_wal = path.with_name(path.name + "-wal").exists()
    query = "mode=ro" if live_wal else "immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True)
    except sqlite3.Error:
        if short and not live_wal:
            raise truncated from None
        return  # cannot look without writing (e.g. no -shm yet): the open reports problems
    try:
        if short:
            verdict = conn.execute("PRAGMA quick_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                raise truncated
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        revision = None
        if "alembic_version" in tables:
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError as exc:
        if short:
            raise truncated from None
        message = storage_failure(exc)
        if message is None:
            raise
        return  # cannot read now (locked, unreadable): the command's own open reports it
    except sqlite3.DatabaseError as exc:
        if short:
            raise truncated from None
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


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for other databases and in-memory SQLite."""
    plain = plain_sqlite_file(url)
    if plain is not None or url.startswith("postgresql"):
        return plain
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def create_private(path: Path) -> None:
    """Make the database file (and the folders it needs) readable by its owner only, before
    SQLite creates it with the umask's permissions: it holds every answer and the answer
    links' tokens. SQLite gives its -wal and -shm files the database file's permissions."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=0o700, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # an existing one keeps its owner's choice
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:  # a folder nobody may write in, a read-only file system, ...
        said = f"cannot open the database {path}: {exc.strerror or exc}"
        if exc.errno in _STORAGE_ERRNOS:  # the storage, not the path given: as open_failed
            raise StorageFailed(f"{said}; check the disk, then try again") from None
        raise ConfigError(said) from None


# A file system that is full, read-only or failing: a storage fault, not a wrong path.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def damaged_database(exc: BaseException) -> str | None:
    """The message for a database file found damaged while reading it, else None."""
    orig = getattr(exc, "orig", exc)  # SQLAlchemy wraps the driver's error
    if isinstance(orig, sqlite3.DatabaseError) and sqlite_code(orig) in _DAMAGED:
        return f"the database file is damaged or not a SQLite database ({orig})"
    return None


def sqlite_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code for `exc` (SQLITE_FULL, SQLITE_BUSY, ...: an extended
    code such as SQLITE_IOERR_WRITE reduced to its family), None when SQLite gave none."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})

# SQLite's result codes for a storage that stops cooperating, and what to tell the user.
_SQLITE_FAULTS = {
    sqlite3.SQLITE_FULL: (
        "the disk holding the database is full (SQLite: database or disk is full); free "
        "some space there, then try again"
    ),
    sqlite3.SQLITE_READONLY: (
        "the database cannot be written: the file or its folder is read-only, or the "
        "filesystem is mounted read-only (SQLite: attempt to write a readonly database); "
        "make the file and its folder writable, then try again"
    ),
    sqlite3.SQLITE_BUSY: (
        "the database stayed locked by another process for longer than the wait allows "
        "(SQLite: database is locked); let that process finish or stop it, then try "
        "again"
    ),
    sqlite3.SQLITE_IOERR: (
        "the disk holding the database failed a read or write (SQLite: disk I/O error); "
        "check the disk and its free space, then try again"
    ),
    sqlite3.SQLITE_CANTOPEN: (
        "the database file cannot be opened (SQLite: unable to open database file); check "
        "that its folder exists and is readable and writable, then try again"
    ),
}


def storage_failure(exc: BaseException) -> str | None:
    """What to tell the user for a storage fault outside the tool (a full disk, a read-only
    file, a lock held too long, a PostgreSQL server gone), else None (a bug). Told apart
    by the driver's codes: SQLite's result code, psycopg's error class."""
    if isinstance(exc, DatabaseUnavailable | StorageFailed):
        return exc.message
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    if isinstance(orig, sqlite3.OperationalError):
        code = sqlite_code(orig)
        return None if code is None else _SQLITE_FAULTS.get(code)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        detail = " ".join(str(orig).strip().splitlines()[0].split()) if str(orig).strip() else ""
        return (
            f"the PostgreSQL server went away or is restarting ({detail}); start it or wait "
            "until it accepts connections, then try again"
        )
    return None


def open_failed(where: str, exc: BaseException) -> UserError:
    """The error for a database that could not be opened: StorageFailed for a storage
    fault (a full disk, a read-only file, a folder that cannot be written, a lock held),
    which the web answers 503 and MCP `internal`; else a ConfigError naming the cause."""
    fault = storage_failure(exc)
    if fault is not None:
        return StorageFailed(f"cannot open the database {where}: {fault}")
    return ConfigError(f"cannot open the database {where}: {getattr(exc, 'orig', None) or exc}")
