"""Reads: the session object, the open question, listings and the event log.

Each function reads inside the caller's transaction, so what a caller decides on is one
consistent snapshot (a plain `resume` racing an answer sees either the open question or
the answer, never half of each).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from orchestrator.domain import clock, gate
from orchestrator.errors import SessionNotFound
from orchestrator.records import PendingQuestion
from orchestrator.store._tx import joined_row
from orchestrator.store.listing import CURSOR_SQL, page_sql
from orchestrator.store.sql import Row, Tx
from orchestrator.store.views import (
    deadline_due,
    event_view,
    pending_question,
    session_view,
    state_from_row,
)

__all__ = ["Snapshot", "snapshot", "view", "status", "list_views", "events", "pending"]


class Snapshot(NamedTuple):
    """A session as one statement saw it: what a plain `resume` decides on."""

    row: Any
    state: gate.GateState
    question: PendingQuestion | None
    view: dict[str, Any]


def snapshot(tx: Tx, session_id: str) -> Snapshot:
    row = joined_row(tx, session_id)
    return Snapshot(row, state_from_row(row), pending_question(row, row), _view(tx, row))


def pending(tx: Tx, session_id: str) -> tuple[Row, PendingQuestion | None]:
    """The session's row (with its gate state) and its open question, in one read."""
    row = joined_row(tx, session_id)
    return row, pending_question(row, row)


def view(tx: Tx, session_id: str) -> dict[str, Any]:
    """The contract's session object, with the assumptions ledger."""
    return status(tx, session_id)[0]


def status(tx: Tx, session_id: str) -> tuple[dict[str, Any], Any, bool]:
    """(the session object with its ledger, the session row, whether an open question's
    deadline has passed unapplied): what `status` needs, in one read of the session."""
    row = joined_row(tx, session_id)
    doc = _view(tx, row)
    due = deadline_due(row, clock.now())  # an open question's, not yet applied
    return doc, row, due


_LEDGER = (
    "SELECT created_at, kind, agent, payload FROM events"
    " WHERE session_id = :id AND kind = 'assumption' ORDER BY id"
)


def _view(tx: Tx, row: Row) -> dict[str, Any]:
    # The ledger is append-only: read after the row, it can only hold as much or more.
    ledger = tx.rows(_LEDGER, {"id": row.id})
    return session_view(row, row, [event_view(entry) for entry in ledger])


def list_views(
    tx: Tx,
    status: str | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
) -> list[dict[str, Any]]:
    """Sessions, newest first: at most `limit`, those listed after session `after`.

    The SQL is the fast read path's too (orchestrator.store.listing.page_sql); it reads only the
    columns a listed session shows."""
    params: dict[str, Any] = {"status": status, "limit": limit}
    if after is not None:
        # As stored (aliased, so SQLite's text is not made a datetime and back): the page
        # compares it with the column itself.
        cursor = tx.first(CURSOR_SQL.replace("created_at", "created_at AS at", 1), {"after": after})
        if cursor is None:
            raise SessionNotFound(after)
        params.update(after_created=cursor.at, after_id=after)
    sql = page_sql(status=status is not None, after=after is not None, limit=limit is not None)
    return [session_view(row, row) for row in tx.rows(sql, params)]


_EVENTS = (
    "SELECT e.id, e.created_at, e.kind, e.agent, e.payload, s.id AS session FROM sessions AS s"
    " LEFT JOIN events AS e ON e.session_id = s.id AND e.id > :after"
    " WHERE s.id = :sid ORDER BY e.id"
)


def events(tx: Tx, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
    rows = tx.rows(_EVENTS, {"sid": session_id, "after": after})
    if not rows:
        raise SessionNotFound(session_id)
    return [event_view(row) for row in rows if row.id is not None]
