"""Which database a command means, and what may be done to it before any session is read.

`--db` wins, then $ORCHESTRATOR_DB, then a SQLite file under the user data directory. A
read command never creates the file; `upgrade` applies the migrations (they also run
before a database's first use).
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator.store.connect import HEAD_REVISION

__all__ = ["Database", "locate", "is_default", "upgrade", "HEAD_REVISION"]


class Database(NamedTuple):
    """A database as a command named it: its URL, where the setting came from (as messages
    name it: `--db`, the environment variable, the default), and whether it exists."""

    url: str
    origin: str
    exists: bool


def locate(db: str | None, *, create: bool = False) -> Database:
    """The database `db` means, checked before anything opens it (a folder, another kind of
    file, a damaged or newer database is a ConfigError, nothing touched). `create` makes the
    default database's folder; read commands pass False and create nothing."""
    from orchestrator.store.connect import check_sqlite_file, db_origin, resolve_url

    url, origin = resolve_url(db), db_origin(db)
    return Database(url, origin, check_sqlite_file(url, create=create, origin=origin))


def is_default(url: str | None) -> bool:
    """Is `url` the database a command opens without `--db` ($ORCHESTRATOR_DB, else the
    default file)? Resolved only: the file is not looked at (a process that has it open must
    not read it by other means, see store.sql.open_in_this_process)."""
    from orchestrator.errors import ConfigError
    from orchestrator.store.connect import resolve_url

    try:
        return url == resolve_url(None)
    except ConfigError:  # an $ORCHESTRATOR_DB that names no usable database
        return False


def upgrade(db: str | None) -> Database:
    """Apply every migration the database lacks (`orchestrator db upgrade`)."""
    from orchestrator.store.db import open_engine
    from orchestrator.store.db import upgrade as apply

    found = locate(db, create=True)
    apply(open_engine(found.url, migrate=False))
    return found
