"""What `status`, `list` and `log` print, in one place.

Shared by the full command line (orchestrator.cli) and the fast read path
(orchestrator.cli.fastread), so that both print the same bytes. Standard library only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.present.render import (
    answer_hint,
    event_line,
    list_table,
    relative,
    run_here_hint,
    session_text,
)
from orchestrator.present.words import moment
from orchestrator.redact import mask_url

__all__ = [
    "DEFAULT_LIMIT",
    "status_text",
    "handed_off_text",
    "list_text",
    "log_text",
    "next_page_hint",
]

# Sessions per page of `list` unless --limit or --all says otherwise.
DEFAULT_LIMIT = 50


def status_text(view: Mapping[str, Any], db: str | None) -> str:
    """What `status` prints: the session, when it started and last changed, and for a
    waiting one how to answer."""
    first, _, rest = session_text(view, db).partition("\n")
    started, changed = relative(view.get("created_at")), relative(view.get("updated_at"))
    text = f"{first}\n  started {started}, last change {changed}\n{rest}"
    if view["pending_question"]:
        text += "\n" + answer_hint(view, db)
    elif view.get("waiting_for_driver"):
        text += "\n  " + run_here_hint(str(view["session_id"]), db)
    return text


def handed_off_text(view: Mapping[str, Any], db: str | None, *, reconcile: bool = False) -> str:
    """What `resume --no-run` prints: the answer is committed (or, with `reconcile`, the
    session reopened for its reconciliation round), nothing ran."""
    done = "reopened to reconcile its late answer" if reconcile else "answer committed"
    text = f"{done}; no agent ran here\n" + session_text(view, db)
    if view.get("waiting_for_driver"):
        text += "\n  " + run_here_hint(str(view["session_id"]), db)
    return text


def list_text(views: Sequence[Mapping[str, Any]]) -> str:
    return list_table(views)


def log_text(session_id: str, events: Sequence[Mapping[str, Any]]) -> str:
    """What `log` prints: each event at its UTC clock time (seconds matter within a run),
    under a header that gives the day, relatively."""
    first = events[0]["time"] if events else None
    header = f"session {session_id}, started {relative(first)} ({moment(first)}); times in UTC"
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
        argv += ["--db", mask_url(db)]
    return "more sessions: " + " ".join(shlex.quote(part) for part in argv)
