"""The fast read path: `status`, `list` and `log` on a SQLite file, standard library only.

Scripts and people poll these three commands; the full command line first imports Typer,
SQLAlchemy and pydantic, which is most of its start-up time. `serve(argv)` answers the
simple, well-formed forms of the three on SQLite with `sqlite3` and prints what the full
path prints, byte for byte (the documents come from store.views, the texts from
orchestrator.readout). Anything else returns None and goes to the full path, whose behaviour
and messages stay the only ones: --help, an option it does not know or a value it would
refuse, a repeated option, another database than a SQLite file, a database that is not
ours or needs migrating, a status whose question deadline has passed (the full path
applies the on-timeout policy), any SQLite error.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator import clock
from orchestrator.errors import ConfigError, SessionNotFound
from orchestrator.expect import ENDED, check_expect
from orchestrator.readout import (
    CURSOR_SQL,
    DEFAULT_LIMIT,
    list_text,
    log_text,
    next_page_hint,
    page_sql,
    select_listed,
    status_text,
)
from orchestrator.store.connect import (
    ENV_DB,
    HEAD_REVISION,
    default_url,
    plain_sqlite_file,
    resolve_url,
)
from orchestrator.store.sql import BUSY_TIMEOUT, Row, decode_row
from orchestrator.store.views import event_view, session_view

__all__ = ["serve"]
# --status values (cli.runs.Status); "waiting" is a synonym for paused.
STATUSES = frozenset({"running", "paused", "completed", "failed", "cancelled", "waiting"})
EXIT_BAD_INPUT = 2
# What click.echo strips when the stream is not a terminal (typer's vendored click).
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


class Request(NamedTuple):
    command: str  # status | list | log
    session_id: str | None = None
    db: str | None = None
    as_json: bool = False
    status: str | None = None
    limit: int | None = DEFAULT_LIMIT  # None: --all
    after: str | None = None


class _FallThrough(Exception):
    """This call is for the full path."""


def serve(argv: Sequence[str]) -> int | None:
    """Answer `argv` (without the program name) and return the exit code, or return None
    having printed nothing, for the full path to handle it."""
    request = parse(argv)
    if request is None:
        return None
    path = sqlite_file(request.db)
    if path is None:
        return None
    out = _Output(request.as_json)
    try:
        _answer(request, path, out)
    except (_FallThrough, sqlite3.Error):
        if out.started:  # pragma: no cover - an error in the middle of `list --all`
            raise
        return None
    except SessionNotFound as exc:
        return _fail(request.as_json, exc.message)
    except BrokenPipeError:  # `orchestrator list | head`: as cli.output.pipe_safe does,
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the rest goes
    return 0  # nowhere, and the exit code is the one earned


# -- the command line --------------------------------------------------------------------


def parse(argv: Sequence[str]) -> Request | None:
    """The request, if `argv` is a simple well-formed status/list/log; else None."""
    if not argv or argv[0] not in ("status", "list", "log"):
        return None
    if not all(arg.isascii() or _utf8(arg) for arg in argv):
        return None  # the full path names the argument that is not UTF-8
    command, rest = argv[0], list(argv[1:])
    options: dict[str, str | bool] = {}
    positional: list[str] = []
    valued = {"--db"} | ({"--status", "--limit", "--after"} if command == "list" else set())
    flags = {"--json"} | ({"--all"} if command == "list" else set())
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if name in valued:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            if not value or value.startswith("-") or name in options:
                return None
            options[name] = value
        elif arg in flags:
            if arg in options:
                return None
            options[arg] = True
        elif arg.startswith("-"):  # --help, "--", unknown or abbreviated options
            return None
        else:
            positional.append(arg)
    if len(positional) != (0 if command == "list" else 1):
        return None
    limit: int | None = DEFAULT_LIMIT
    if "--limit" in options:
        digits = str(options["--limit"])
        if not digits.isascii() or not digits.isdigit() or int(digits) < 1 or "--all" in options:
            return None
        limit = int(digits)
    elif "--all" in options:
        limit = None
    status = options.get("--status")
    if status is not None and status not in STATUSES:
        return None
    return Request(
        command=command,
        session_id=positional[0] if positional else None,
        db=options.get("--db"),  # type: ignore[arg-type]
        as_json=bool(options.get("--json")),
        status=status,  # type: ignore[arg-type]
        limit=limit,
        after=options.get("--after"),  # type: ignore[arg-type]
    )


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sqlite_file(db: str | None) -> Path | None:
    """The SQLite file store.connect.resolve_url opens for `db`, or None when the URL is
    anything but a plain sqlite:/// file (those go to the full path), or one it refuses
    (the full path says why: `sqlite:/x.db`, a relative path in ORCHESTRATOR_DB, ...)."""
    url = db if db is not None else os.environ.get(ENV_DB) or default_url()
    if "://" in url and plain_sqlite_file(url) is None:
        return None  # PostgreSQL, a URL with options: never the fast path's
    try:
        resolved = resolve_url(db)  # the same checks as the full path, on the same value
    except ConfigError:
        return None
    return plain_sqlite_file(resolved)


# -- reading -----------------------------------------------------------------------------


def _answer(request: Request, path: Path, out: _Output) -> None:
    if not path.exists():
        if not next(p for p in path.parents if p.exists()).is_dir():
            raise _FallThrough  # the full path says which part of the path is a file
        # Read commands create nothing: a missing file is an empty database.
        if request.command != "list" or request.after is not None:
            raise SessionNotFound(request.session_id or request.after or "")
        out.document([], list_text([]))
        return
    with _Connection(path) as conn:
        if request.command == "status":
            assert request.session_id is not None
            view = _status(conn, request.session_id)
            out.document(view, status_text(view, request.db))
        elif request.command == "log":
            assert request.session_id is not None
            events = _events(conn, request.session_id)
            out.document(events, log_text(request.session_id or "", events))
        elif request.limit is None and request.as_json:
            out.stream(_page(conn, request))  # --all: one session at a time, any size
        else:
            views = list(_page(conn, request))
            hint = None
            if request.limit is not None and len(views) > request.limit:
                del views[request.limit :]
                hint = next_page_hint(
                    views[-1]["session_id"],
                    status=request.status,
                    limit=request.limit,
                    db=request.db,
                )
            out.document(views, list_text(views), hint)


class _Connection:
    """One read transaction on an existing file (never created), at our schema revision."""

    def __init__(self, path: Path) -> None:
        # mode=rw: an existing file only, never created. In a URI, % ? # must be escaped.
        name = str(path.absolute()).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        uri = f"file:{name}?mode=rw"
        self.conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.conn.execute("BEGIN")
            version = self.conn.execute("SELECT version_num FROM alembic_version").fetchall()
        except BaseException:
            self.conn.close()
            raise
        if version != [(HEAD_REVISION,)]:
            self.conn.close()
            raise _FallThrough
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()  # a read transaction: closing ends it


def _rows(cursor: sqlite3.Cursor) -> list[Row]:
    names = tuple(d[0] for d in cursor.description)
    return [decode_row(names, values) for values in cursor]


_EVENTS_SQL = "SELECT created_at, kind, agent, payload FROM events WHERE session_id = :id"


def _status(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    sql = select_listed(", s.settings") + " WHERE s.id = :id"
    rows = _rows(conn.execute(sql, {"id": session_id}))
    if not rows:
        raise SessionNotFound(session_id)
    (row,) = rows
    if row.deadline is not None and not row.timed_out and row.deadline <= clock.now():
        raise _FallThrough  # the full path applies the on-timeout policy first
    ledger = _rows(
        conn.execute(_EVENTS_SQL + " AND kind = 'assumption' ORDER BY id", {"id": session_id})
    )
    view = session_view(row, row, [event_view(r) for r in ledger])
    expect = (row.settings or {}).get("expect")
    if expect and view["status"] in ENDED:
        view["expect"] = check_expect(expect, view)
    return view


def _events(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise SessionNotFound(session_id)
    rows = conn.execute(_EVENTS_SQL + " ORDER BY id", {"id": session_id})
    return [event_view(r) for r in _rows(rows)]


def _page(conn: sqlite3.Connection, request: Request) -> Iterator[dict[str, Any]]:
    params: dict[str, Any] = {"status": "paused" if request.status == "waiting" else request.status}
    if request.after is not None:
        cursor = conn.execute(CURSOR_SQL, {"after": request.after}).fetchone()
        if cursor is None:
            raise SessionNotFound(request.after)
        params.update(after_created=cursor[0], after_id=request.after)
    if request.limit is not None:
        params["limit"] = request.limit + 1  # one more tells whether a next page exists
    sql = page_sql(
        status=request.status is not None,
        after=request.after is not None,
        limit=request.limit is not None,
    )
    cursor = conn.execute(sql, params)
    names = tuple(d[0] for d in cursor.description)
    for values in cursor:  # one at a time: `--all --json` streams any number of sessions
        row = decode_row(names, values)
        yield session_view(row, row)


# -- printing (as orchestrator.cli.output does, through click.echo) ----------------------


class _Output:
    """stdout as the full path writes it: one JSON document (json.dumps, indent 2) under
    --json, else the text."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.started = False

    def document(self, document: Any, text: str, hint: str | None = None) -> None:
        self.started = True
        if hint:
            _echo(hint, err=True)
        _echo(json.dumps(document, indent=2, ensure_ascii=False) if self.as_json else text)

    def stream(self, views: Iterable[dict[str, Any]]) -> None:
        """Print a JSON list as `document` would, one item at a time. The bytes are the
        same: json.dumps(items, indent=2) is each item's own indent-2 dump shifted by two
        spaces (a JSON string never holds a raw line break), between "[" and "]"."""
        first = True
        for view in views:
            self.started = True
            item = json.dumps(view, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            _echo(("[\n  " if first else ",\n  ") + item, nl=False)
            first = False
        self.started = True
        _echo("[]" if first else "\n]")


def _echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    stream = sys.stderr if err else sys.stdout
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text + "\n" if nl else text)
    if nl:
        stream.flush()


def _fail(as_json: bool, message: str) -> int:
    _echo(f"error: {message}", err=True)
    if as_json:
        _echo(
            json.dumps(
                {"error": message, "exit_code": EXIT_BAD_INPUT}, indent=2, ensure_ascii=False
            )
        )
    return EXIT_BAD_INPUT
