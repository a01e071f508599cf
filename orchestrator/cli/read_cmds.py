"""`orchestrator status`, `list`, `log` and `db upgrade`: reading sessions, keeping the
database (the full path; orchestrator.cli.fastread answers the simple forms first)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.options import DbOption, JsonOption
from orchestrator.cli.output import emit, err, user_errors
from orchestrator.cli.runs import Status, read_sessions
from orchestrator.present.readout import (
    DEFAULT_LIMIT,
    list_text,
    log_text,
    next_page_hint,
    status_text,
)

__all__ = ["status", "list_", "log", "db_upgrade"]


def status(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one session."""
    with user_errors(as_json, session_id):
        view = read_sessions(db, session_id).status(session_id)
    emit(as_json, view, status_text(view, db))


def list_(
    status_: Annotated[
        Status | None,
        typer.Option(
            "--status", help="Only sessions with this status ('waiting': a question is open)."
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, metavar="N", help=f"At most N sessions [{DEFAULT_LIMIT}]."),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every session, no paging.")] = False,
    after: Annotated[
        str | None,
        typer.Option(
            "--after",
            metavar="ID",
            help="The page after this session (the command for the next page is printed "
            "on stderr when there is one).",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, newest first, a page at a time."""
    wanted = None if status_ is None else status_.value  # ("waiting": a question is open)
    with user_errors(as_json):
        from orchestrator.errors import ConfigError, SessionNotFound

        if all_ and limit is not None:
            raise ConfigError("give either --limit or --all, not both")
        page = None if all_ else (limit or DEFAULT_LIMIT)
        sessions = read_sessions(db)
        if sessions is None and after is not None:
            raise SessionNotFound(after)
        # One more than the page: it tells whether a next page exists.
        more = None if page is None else page + 1
        views = [] if sessions is None else sessions.list(wanted, limit=more, after=after)
        if page is not None and len(views) > page:
            del views[page:]
            shown = status_.value if status_ else None
            err(next_page_hint(views[-1]["session_id"], status=shown, limit=page, db=db))
    emit(as_json, views, list_text(views))


def log(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's events: agent replies, questions, answers, fallbacks, status."""
    with user_errors(as_json, session_id):
        events = read_sessions(db, session_id).log(session_id)
    emit(as_json, events, log_text(session_id, events))


def db_upgrade(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Apply database migrations (they also run automatically before first use)."""
    with user_errors(as_json):
        from orchestrator.api.database import HEAD_REVISION, upgrade

        url = upgrade(db).url
    emit(
        as_json, {"database": url, "revision": HEAD_REVISION}, f"{url}: at revision {HEAD_REVISION}"
    )
