"""The store's side of the web inbox and notifications.

An inbox page with paging, the log after a given event id (live progress), answer-link
tokens (table `question_links`, revision 0005), the sessions a server must pick up at
start, and notification events for the log. The web edge calls these; it runs no SQL.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import Engine, and_, case, func, insert, or_, select, update

from orchestrator.store._sa import SaTx, read, write
from orchestrator.store._tx import add_event, utcnow
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import question_links as _L
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import event_view, owner_alive, session_view

__all__ = [
    "inbox_page",
    "events_after",
    "link_for",
    "session_of_link",
    "mark_link_used",
    "answered_not_run_on",
    "record_event",
    "has_event",
    "waiting_sessions",
]

_WAITING = and_(
    _T.c.clarification_used.is_(True),
    _T.c.clarification_resolved.is_(False),
    _S.c.status.in_(["paused", "running"]),
    or_(_T.c.resolution.is_(None), _T.c.resolution != "cancelled"),
)


def inbox_page(engine: Engine, *, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """One page of sessions: those waiting for an answer first (soonest deadline first),
    then the others, newest first; and the total number of sessions."""
    waiting = case((_WAITING, 0), else_=1)
    query = (
        select(_S, _T)
        .join(_T, _T.c.session_id == _S.c.id)
        .order_by(
            waiting,
            case((_WAITING, _T.c.deadline.is_(None)), else_=False),
            case((_WAITING, _T.c.deadline), else_=None),
            _S.c.created_at.desc(),
            _S.c.id.desc(),
        )
        .offset(offset)
        .limit(limit)
    )
    with read(engine) as conn:
        total = conn.execute(select(func.count()).select_from(_S)).scalar_one()
        rows = [session_view(row, row) for row in conn.execute(query)]
    return rows, total


def events_after(engine: Engine, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
    """The session's events with an id above `after`, oldest first, with their ids."""
    with read(engine) as conn:
        rows = conn.execute(
            select(_E).where(_E.c.session_id == session_id, _E.c.id > after).order_by(_E.c.id)
        )
        return [(row.id, event_view(dict(row._mapping))) for row in rows]


def link_for(engine: Engine, session_id: str) -> str:
    """The answer-link token of the session's question (made on first use)."""
    with write(engine) as conn:
        token = conn.execute(
            select(_L.c.token).where(_L.c.session_id == session_id)
        ).scalar_one_or_none()
        if token is None:
            token = secrets.token_urlsafe(32)  # 256 bits: unguessable
            conn.execute(
                insert(_L).values(
                    token=token, session_id=session_id, created_at=utcnow(), used_at=None
                )
            )
        return str(token)


def session_of_link(engine: Engine, token: str) -> tuple[str, bool] | None:
    """(session id, already used) for an answer-link token, or None if unknown."""
    with read(engine) as conn:
        row = conn.execute(select(_L.c.session_id, _L.c.used_at).where(_L.c.token == token)).first()
    return None if row is None else (row.session_id, row.used_at is not None)


def mark_link_used(engine: Engine, token: str) -> None:
    with write(engine) as conn:
        conn.execute(update(_L).where(_L.c.token == token).values(used_at=utcnow()))


def answered_not_run_on(engine: Engine) -> list[str]:
    """Sessions whose answer is committed but whose driver is gone: a server picks them up.

    (status running, clarification resolved and not cancelled, the owning process dead or
    its lease expired.)"""
    query = (
        select(_S)
        .join(_T, _T.c.session_id == _S.c.id)
        .where(
            _S.c.status == "running",
            _T.c.clarification_used.is_(True),
            _T.c.clarification_resolved.is_(True),
            or_(_T.c.resolution.is_(None), _T.c.resolution != "cancelled"),
        )
        .order_by(_S.c.updated_at)
    )
    with read(engine) as conn:
        rows = conn.execute(query).all()
    return [row.id for row in rows if not owner_alive(row)]


def waiting_sessions(engine: Engine, *, asked_since: float | None = None) -> list[dict[str, Any]]:
    """Session objects of every session waiting for an answer (for reminders)."""
    query = select(_S, _T).join(_T, _T.c.session_id == _S.c.id).where(_WAITING)
    if asked_since is not None:
        from datetime import UTC, datetime

        query = query.where(_T.c.asked_at >= datetime.fromtimestamp(asked_since, UTC))
    with read(engine) as conn:
        return [session_view(row, row) for row in conn.execute(query)]


def has_event(engine: Engine, session_id: str, key: str) -> bool:
    with read(engine) as conn:
        found = conn.execute(
            select(_E.c.id).where(_E.c.session_id == session_id, _E.c.key == key)
        ).first()
    return found is not None


def record_event(
    engine: Engine, session_id: str, kind: str, *, key: str | None = None, **payload: Any
) -> bool:
    """Append an event to the session's log (once per `key`); False if the key was there."""
    with write(engine) as conn:
        return add_event(SaTx(conn), session_id, kind, key=key, **payload)
