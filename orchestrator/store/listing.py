"""The listing's SQL: the columns a listed session shows and one page of sessions.

Shared by the store's reads and the command line's fast read path (which runs it on a
plain sqlite3 connection), so that both read the same rows. Standard library only (as
`owner`, whose columns it names).
"""

from __future__ import annotations

from orchestrator.store.owner import OWNER_COLUMNS

__all__ = [
    "LISTED",
    "CURSOR_SQL",
    "OPEN_QUESTION_SQL",
    "LIVE_SESSION_SQL",
    "WAITING",
    "select_listed",
    "page_sql",
]

# "A question is open", in SQL over `orchestrator_state AS t`: GateState.waiting, term for
# term (surfaced, not resolved, not withdrawn by a cancel). Every query that asks for open
# questions uses it; tests/test_open_question.py holds it equal to the Python property.
OPEN_QUESTION_SQL = (
    "(t.clarification_used AND NOT t.clarification_resolved"
    " AND (t.resolution IS NULL OR t.resolution <> 'cancelled'))"
)
# ...of a session that has not ended (`sessions AS s`): what pending_question shows.
LIVE_SESSION_SQL = "s.status IN ('paused', 'running')"
# The list filter "waiting": a question is open, whatever the status says. A paused session,
# and also a running one whose question is asked right now (an MCP client's tool call, a
# terminal prompt): the one definition for every door (documents.filtered_status).
WAITING = "waiting"
WAITING_SQL = f"{OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL}"

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
    *(("s", name) for name in OWNER_COLUMNS),
    ("s", "cancel_requested_at"),
    ("s", "last_error"),
    ("s", "usage"),
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


def page_sql(*, status: bool, after: bool, limit: bool, waiting: bool = False) -> str:
    """One page of sessions with their gate state, newest first (ties: larger id first).

    Parameters: :status, :after_created and :after_id (the cursor session's created_at
    and id), :limit. Revision 0004's indexes, (status, created_at, id) and (created_at,
    id), serve it without a sort: a page costs its own rows, whatever the table's size.
    `waiting` (instead of `status`): the sessions with an open question (WAITING_SQL).
    """
    where = []
    if waiting:
        where.append(WAITING_SQL)
    elif status:
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
