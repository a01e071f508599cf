"""The store's side of the web inbox and notifications.

The log after a given event id (live progress), answer links
(table `answer_links`, revision 0008: tokens hashed), the sessions a server must pick up at
start, and notification events for the log (the inbox's pages: store.inbox_paging). The
web edge calls these; it runs no SQL.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

from orchestrator.store._tx import add_event, utcnow
from orchestrator.store.core import Store
from orchestrator.store.owner import DRIVER_COLUMNS
from orchestrator.store.views import (
    JOINED_SQL,
    LIVE_SESSION_SQL,
    OPEN_QUESTION_SQL,
    event_view,
    owner_alive,
    session_view,
    waiting_for_driver,
)

__all__ = [
    "events_after",
    "new_link",
    "session_of_link",
    "mark_link_used",
    "answered_not_run_on",
    "record_event",
    "has_event",
    "waiting_sessions",
]

# Sessions and their gate state, every session (store.views.JOINED_SQL without its WHERE).
_ALL = JOINED_SQL.removesuffix(" WHERE s.id = :id")
# Running sessions whose answer is committed, with the columns that say who drives them
# (owner_alive, waiting_for_driver) and no others: `serve` polls this every second, and a
# whole row carries the session's script and task board (with thousands of answers queued,
# reading those each second held the server's memory at the size of the queue's rows).
_ANSWERED_RUNNING = (
    f"SELECT {', '.join(f's.{c}' for c in DRIVER_COLUMNS)}"
    " FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"
    " WHERE s.status = 'running' AND t.clarification_used AND t.clarification_resolved"
    " AND (t.resolution IS NULL OR t.resolution <> 'cancelled') ORDER BY s.updated_at"
)
# Waiting for an answer: an open question of a session that has not ended.
_WAITING = f"({OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL})"


def events_after(store: Store, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
    """The session's events with an id above `after`, oldest first, with their ids."""
    with store.reading() as tx:
        rows = tx.rows(
            "SELECT * FROM events WHERE session_id = :sid AND id > :after ORDER BY id",
            {"sid": session_id, "after": after},
        )
    return [(row.id, event_view(row)) for row in rows]


def _hashed(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_link(store: Store, session_id: str) -> str:
    """A new answer-link token for the session's question. Only its hash is stored: the
    token is in the returned value and nowhere else."""
    token = secrets.token_urlsafe(32)  # 256 bits: unguessable
    with store.writing() as tx:
        tx.run(
            "INSERT INTO answer_links (token_hash, session_id, created_at, used_at)"
            " VALUES (:token_hash, :sid, :created_at, NULL)",
            {"token_hash": _hashed(token), "sid": session_id, "created_at": utcnow()},
        )
    return token


def session_of_link(store: Store, token: str) -> tuple[str, bool] | None:
    """(session id, already used) for an answer-link token, or None if unknown."""
    with store.reading() as tx:
        row = tx.first(
            "SELECT session_id, used_at FROM answer_links WHERE token_hash = :token_hash",
            {"token_hash": _hashed(token)},
        )
    return None if row is None else (row.session_id, row.used_at is not None)


def mark_link_used(store: Store, token: str) -> None:
    with store.writing() as tx:
        tx.run(
            "UPDATE answer_links SET used_at = :used_at WHERE token_hash = :token_hash",
            {"used_at": utcnow(), "token_hash": _hashed(token)},
        )


def answered_not_run_on(
    store: Store, *, handed_off_only: bool = False, owner: str | None = None
) -> list[str]:
    """Sessions whose answer is committed but whose driver is gone: a server picks them up.

    (status running, clarification resolved and not cancelled, the owning process dead or
    its lease expired; `handed_off_only`: only those nobody claims, waiting for a driver.)
    `owner`: also those whose claim names this owner and whose last call did not fail: a
    drive of its own that a database outage cut off (its claim could not be dropped),
    which only its caller knows none of its threads is driving any more."""
    with store.reading() as tx:
        rows = tx.rows(_ANSWERED_RUNNING)

    def cut_off(row: Any) -> bool:
        return owner is not None and row.owner == owner and row.last_error is None

    if handed_off_only:
        return [row.id for row in rows if waiting_for_driver(row) or cut_off(row)]
    return [row.id for row in rows if not owner_alive(row) or cut_off(row)]


def waiting_sessions(store: Store, *, asked_since: float | None = None) -> list[dict[str, Any]]:
    """Session objects of every session waiting for an answer (for reminders)."""
    sql, params = f"{_ALL} WHERE {_WAITING}", {}
    if asked_since is not None:
        sql += " AND t.asked_at >= :asked_at"
        params["asked_at"] = datetime.fromtimestamp(asked_since, UTC)
    with store.reading() as tx:
        return [session_view(row, row) for row in tx.rows(sql, params)]


def has_event(store: Store, session_id: str, key: str) -> bool:
    with store.reading() as tx:
        found = tx.first(
            'SELECT id FROM events WHERE session_id = :sid AND "key" = :key',
            {"sid": session_id, "key": key},
        )
    return found is not None


def record_event(
    store: Store, session_id: str, kind: str, *, key: str | None = None, **payload: Any
) -> bool:
    """Append an event to the session's log (once per `key`); False if the key was there."""
    with store.writing() as tx:
        return add_event(tx, session_id, kind, key=key, **payload)
