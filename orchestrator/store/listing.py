"""The listing's SQL: the columns a listed session shows and one page of sessions.

Shared by the store's reads and the command line's fast read path (which runs it on a
plain sqlite3 connection), so that both read the same rows. Standard library only (as
`owner`, whose columns it names).
"""

from __future__ import annotations

from orchestrator.store.owner import OWNER_COLUMNS

__all__ = ["LISTED", "CURSOR_SQL", "select_listed", "page_sql"]

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
