"""The fast read path: `status`, `list` and `log` on a SQLite file, standard library only.

Scripts and people poll these three commands; the full command line first imports Typer,
SQLAlchemy and pydantic, which is most of its start-up time. `serve(argv)` answers the
simple, well-formed forms of the three on SQLite with `sqlite3` and prints what the full
path prints, byte for byte (the documents come from store.views, the texts from
orchestrator.present.readout). Anything else returns None and goes to the full path, whose behaviour
and messages stay the only ones: --help, an option it does not know or a value it would
refuse, a repeated option, another database than a SQLite file, a database that is not
ours or needs migrating, a status whose question deadline has passed (the full path
applies the on-timeout policy), any SQLite error.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator.api import lean
from orchestrator.documents import STATUS_FILTERS, filtered_status
from orchestrator.errors import SessionNotFound
from orchestrator.present.printable import printable, printable_json
from orchestrator.present.readout import (
    DEFAULT_LIMIT,
    list_text,
    log_text,
    next_page_hint,
    status_text,
)

__all__ = ["serve", "READ_COMMANDS", "ReadOptions"]
EXIT_BAD_INPUT = 2


class ReadOptions(NamedTuple):
    """A read command's options, said once for both paths that answer it: this path parses
    argv with them, and the Typer commands (orchestrator.cli.read_cmds) declare the same
    names and `--status` values (documents.STATUS_FILTERS); a test holds Typer's registered
    options equal to this table."""

    valued: frozenset[str]  # options that take a value
    flags: frozenset[str]  # options that take none
    positional: int  # arguments (the session id)


_ONE_SESSION = ReadOptions(frozenset({"--db"}), frozenset({"--json"}), 1)
READ_COMMANDS = {
    "status": _ONE_SESSION,
    "log": _ONE_SESSION,
    "list": ReadOptions(
        frozenset({"--db", "--status", "--limit", "--after"}), frozenset({"--json", "--all"}), 0
    ),
}


class Request(NamedTuple):
    command: str  # status | list | log
    session_id: str | None = None
    db: str | None = None
    as_json: bool = False
    status: str | None = None
    limit: int | None = DEFAULT_LIMIT  # None: --all
    after: str | None = None


def serve(argv: Sequence[str]) -> int | None:
    """Answer `argv` (without the program name) and return the exit code, or return None
    having printed nothing, for the full path to handle it."""
    request = parse(argv)
    if request is None:
        return None
    path = lean.sqlite_file(request.db)
    if path is None:
        return None
    out = _Output(request.as_json)
    try:
        _answer(request, path, out)
    except (lean.NeedsFullPath, sqlite3.Error):
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
    if not argv or argv[0] not in READ_COMMANDS:
        return None
    if not all(arg.isascii() or _utf8(arg) for arg in argv):
        return None  # the full path names the argument that is not UTF-8
    command, rest = argv[0], list(argv[1:])
    options: dict[str, str | bool] = {}
    positional: list[str] = []
    valued, flags, wanted = READ_COMMANDS[command]
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
    if len(positional) != wanted:
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
    if status is not None and status not in STATUS_FILTERS:
        return None
    return Request(
        command=command,
        session_id=positional[0] if positional else None,
        db=options.get("--db"),  # type: ignore[arg-type]
        as_json=bool(options.get("--json")),
        status=status,
        limit=limit,
        after=options.get("--after"),  # type: ignore[arg-type]
    )


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- reading -----------------------------------------------------------------------------


def _answer(request: Request, path: Path, out: _Output) -> None:
    if not path.exists():
        if not next(p for p in path.parents if p.exists()).is_dir():
            raise lean.NeedsFullPath  # the full path says which part of the path is a file
        # Read commands create nothing: a missing file is an empty database.
        if request.command != "list" or request.after is not None:
            raise SessionNotFound(request.session_id or request.after or "")
        out.document([], list_text([]))
        return
    with lean.LeanFile(path) as conn:
        if request.command == "status":
            assert request.session_id is not None
            view = lean.status(conn, request.session_id)
            out.document(view, status_text(view, request.db))
        elif request.command == "log":
            assert request.session_id is not None
            events = lean.events(conn, request.session_id)
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
        if self.as_json:
            _echo(json.dumps(document, indent=2, ensure_ascii=False), json_text=True)
        else:
            _echo(text)

    def stream(self, views: Iterable[dict[str, Any]]) -> None:
        """Print a JSON list as `document` would, one item at a time. The bytes are the
        same: json.dumps(items, indent=2) is each item's own indent-2 dump shifted by two
        spaces (a JSON string never holds a raw line break), between "[" and "]"."""
        first = True
        for view in views:
            self.started = True
            item = json.dumps(view, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            _echo(("[\n  " if first else ",\n  ") + item, nl=False, json_text=True)
            first = False
        self.started = True
        _echo("[]" if first else "\n]", json_text=True)


def _echo(text: str, *, err: bool = False, nl: bool = True, json_text: bool = False) -> None:
    """As cli.output does: what others wrote cannot drive the terminal (JSON keeps valid)."""
    stream = sys.stderr if err else sys.stdout
    text = printable_json(text) if json_text else printable(text)
    stream.write(text + "\n" if nl else text)
    if nl:
        stream.flush()


def _fail(as_json: bool, message: str) -> int:
    from orchestrator.limits import clip_message
    from orchestrator.redact import mask_url

    message = clip_message(mask_url(message))  # as cli.output.fail: the same text
    _echo(f"error: {message}", err=True)
    if as_json:
        document = {"error": message, "exit_code": EXIT_BAD_INPUT}
        _echo(json.dumps(document, indent=2, ensure_ascii=False), json_text=True)
    return EXIT_BAD_INPUT


def _page(conn: Any, request: Request) -> Iterator[dict[str, Any]]:
    limit = None if request.limit is None else request.limit + 1  # one more: a next page?
    return lean.page(conn, status=filtered_status(request.status), after=request.after, limit=limit)
