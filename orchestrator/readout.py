"""What `status`, `list` and `log` print, and the list page's SQL, in one place.

Shared by the full command line (orchestrator.cli) and the fast read path
(orchestrator.fastread), so that both print the same bytes. Standard library only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.cli.render import (
    answer_hint,
    event_line,
    list_table,
    relative,
    run_here_hint,
    session_text,
)

__all__ = [
    "DEFAULT_LIMIT",
    "LISTED",
    "CURSOR_SQL",
    "select_listed",
    "page_sql",
    "status_text",
    "handed_off_text",
    "list_text",
    "log_text",
    "next_page_hint",
]

# Sessions per page of `list` unless --limit or --all says otherwise.
DEFAULT_LIMIT = 50

# The columns a listed session shows (what store.views.session_view reads, the owner and
# the gate state included; never `agents` or `settings`, the large JSON a listing does not
# show), as (table, column). Values decode by column name (orchestrator.store.sql).
LISTED: tuple[tuple[str, str], ...] = (
    ("s", "id"),
    ("s", "status"),
    ("s", "task"),
    ("s", "tasks"),
    ("s", "summary"),
    ("s", "error"),
    ("s", "round"),
    ("s", "created_at"),
    ("s", "updated_at"),
    ("s", "owner"),
    ("s", "owner_pid"),
    ("s", "owner_host"),
    ("s", "owner_boot"),
    ("s", "owner_pidns"),
    ("s", "owner_started"),
    ("s", "lease_expires_at"),
    ("s", "cancel_requested_at"),
    ("s", "last_error"),
    ("t", "clarification_used"),
    ("t", "clarification_resolved"),
    ("t", "clarification_question"),
    ("t", "user_clarification_response"),
    ("t", "resolution"),
    ("t", "answer_note"),
    ("t", "question_object"),
    ("t", "asked_by"),
    ("t", "request_key"),
    ("t", "fallback_counts"),
    ("t", "deadline"),
    ("t", "timed_out"),
    ("t", "questions_surfaced"),
    ("t", "fallbacks_injected"),
)

# Where the page after session :after starts (it is also how an unknown cursor is found).
CURSOR_SQL = "SELECT created_at FROM sessions WHERE id = :after"


def select_listed(extra_columns: str = "") -> str:
    """SELECT the LISTED columns (then `extra_columns`) of sessions joined to their state."""
    return (
        "SELECT "
        + ", ".join(f"{table}.{column}" for table, column in LISTED)
        + extra_columns
        + " FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"
    )


def page_sql(*, status: bool, after: bool, limit: bool) -> str:
    """One page of sessions with their gate state, newest first (ties: larger id first).

    Parameters: :status, :after_created and :after_id (the cursor session's created_at
    and id), :limit. Revision 0004's indexes, (status, created_at, id) and (created_at,
    id), serve it without a sort: a page costs its own rows, whatever the table's size.
    """
    where = []
    if status:
        where.append("s.status = :status")
    if after:
        where.append(
            "(s.created_at < :after_created"
            " OR (s.created_at = :after_created AND s.id < :after_id))"
        )
    return (
        select_listed()
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY s.created_at DESC, s.id DESC"
        + (" LIMIT :limit" if limit else "")
    )


def status_text(view: Mapping[str, Any], db: str | None) -> str:
    """What `status` prints: the session, when it started and last changed, and for a
    waiting one how to answer."""
    first, _, rest = session_text(view).partition("\n")
    started, changed = relative(view.get("created_at")), relative(view.get("updated_at"))
    text = f"{first}\n  started {started}, last change {changed}\n{rest}"
    if view["pending_question"]:
        text += "\n" + answer_hint(view, db)
    elif view.get("waiting_for_driver"):
        text += "\n  " + run_here_hint(str(view["session_id"]), db)
    return text


def handed_off_text(view: Mapping[str, Any], db: str | None) -> str:
    """What `resume --no-run` prints: the answer is committed, nothing ran."""
    text = "answer committed; no agent ran here\n" + session_text(view)
    if view.get("waiting_for_driver"):
        text += "\n  " + run_here_hint(str(view["session_id"]), db)
    return text


def list_text(views: Sequence[Mapping[str, Any]]) -> str:
    return list_table(views)


def log_text(session_id: str, events: Sequence[Mapping[str, Any]]) -> str:
    """What `log` prints: each event at its UTC clock time (seconds matter within a run),
    under a header that gives the day, relatively."""
    first = events[0]["time"] if events else None
    header = f"session {session_id}, started {relative(first)} ({first}); times in UTC"
    lines = [f"{(e['time'] or '')[11:19]}  {event_line(e)}" for e in events]
    return "\n".join([header, *lines])


def next_page_hint(last_id: str, *, status: str | None, limit: int, db: str | None) -> str:
    """The command that lists the next page (printed on stderr when more sessions remain)."""
    argv = ["orchestrator", "list", "--after", last_id]
    if status is not None:
        argv += ["--status", status]
    if limit != DEFAULT_LIMIT:
        argv += ["--limit", str(limit)]
    if db:
        argv += ["--db", db]
    return "more sessions: " + " ".join(shlex.quote(part) for part in argv)
