"""Reads: the session object, the open question, listings and the event log.

Each function reads inside the caller's transaction, so what a caller decides on is one
consistent snapshot (a plain `resume` racing an answer sees either the open question or
the answer, never half of each).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, bindparam, select, text

from orchestrator import clock, gate
from orchestrator.errors import SessionNotFound
from orchestrator.readout import CURSOR_SQL, LISTED, page_sql
from orchestrator.records import PendingQuestion
from orchestrator.store._tx import session_row, state_row
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import event_view, pending_question, session_view, state_from_row

__all__ = ["Snapshot", "snapshot", "view", "status", "list_views", "events"]


class Snapshot(NamedTuple):
    """A session as one transaction saw it: what a plain `resume` decides on."""

    row: Any
    state: gate.GateState
    question: PendingQuestion | None
    view: dict[str, Any]


def snapshot(conn: Connection, session_id: str) -> Snapshot:
    row = session_row(conn, session_id)
    state = state_row(conn, session_id)
    return Snapshot(
        row, state_from_row(state), pending_question(row, state), _view(conn, row, state)
    )


def view(conn: Connection, session_id: str) -> dict[str, Any]:
    """The contract's session object, with the assumptions ledger."""
    return status(conn, session_id)[0]


def status(conn: Connection, session_id: str) -> tuple[dict[str, Any], Any, bool]:
    """(the session object with its ledger, the session row, whether an open question's
    deadline has passed unapplied): what `status` needs, in one read."""
    row = session_row(conn, session_id)
    state = state_row(conn, session_id)
    doc = _view(conn, row, state)
    due = state.deadline is not None and not state.timed_out and state.deadline <= clock.now()
    return doc, row, due


def _view(conn: Connection, row: Any, state: Any) -> dict[str, Any]:
    ledger = conn.execute(_LEDGER, {"id": row.id})
    return session_view(row, state, [event_view(dict(r._mapping)) for r in ledger])


_LEDGER = (
    select(_E)
    .where(_E.c.session_id == bindparam("id"), _E.c.kind == "assumption")
    .order_by(_E.c.id)
)


def list_views(
    conn: Connection,
    status: str | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
) -> list[dict[str, Any]]:
    """Sessions, newest first: at most `limit`, those listed after session `after`.

    The SQL is the fast read path's too (orchestrator.readout.page_sql), typed here per
    column; it reads only the columns a listed session shows."""
    columns = [{"s": _S, "t": _T}[table].c[column] for table, column, _ in LISTED]
    params: dict[str, Any] = {"status": status, "limit": limit}
    if after is not None:
        cursor = conn.execute(text(CURSOR_SQL), {"after": after}).first()
        if cursor is None:
            raise SessionNotFound(after)
        params.update(after_created=cursor[0], after_id=after)
    sql = page_sql(status=status is not None, after=after is not None, limit=limit is not None)
    return [session_view(row, row) for row in conn.execute(text(sql).columns(*columns), params)]


def events(conn: Connection, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
    session_row(conn, session_id)
    rows = conn.execute(
        select(_E).where(and_(_E.c.session_id == session_id, _E.c.id > after)).order_by(_E.c.id)
    )
    return [event_view(dict(row._mapping)) for row in rows]
