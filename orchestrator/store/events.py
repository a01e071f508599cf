"""The event log: keyed events (a key present already adds nothing, so a node that
LangGraph re-runs writes nothing twice), the listener told once they commit, the
assumptions ledger; and the small SQL helpers every store module shares. Plain SQL on a
`Tx` (orchestrator.store.sql), the same text for SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from orchestrator.store.owner import Claim
from orchestrator.store.sql import Tx
from orchestrator.store.views import event_view

__all__ = [
    "Listener",
    "utcnow",
    "heard",
    "add_event",
    "add_fenced_event",
    "add_assumption",
    "update_sql",
    "json_value",
]


Listener = Callable[[str, dict[str, Any]], None]  # (session_id, event)

_EVENT_COLUMNS = '(session_id, "key", kind, agent, payload, created_at)'
# One statement: a key present already adds nothing (RETURNING tells whether a row went
# in; psycopg reports rowcount -1 for it), and any other uniqueness violation (the
# one-question index) still raises.
_INSERT_EVENT = (
    f"INSERT INTO events {_EVENT_COLUMNS}"
    " VALUES (:session_id, :key, :kind, :agent, :payload, :created_at)"
    ' ON CONFLICT (session_id, "key") DO NOTHING RETURNING id'
)
# The same, only while `claim` holds the session: the fence and the write in one
# statement. SQLite runs it under its write lock, so nothing slips between the two; on
# PostgreSQL the session's row is locked first (FOR UPDATE, in a CTE: a takeover that
# committed meanwhile is seen when the lock is granted, and one that comes later waits for
# this statement), as a BEGIN, a fence read FOR UPDATE, the insert and a COMMIT would.
_HELD = (
    "SELECT 1 FROM sessions WHERE id = :session_id AND status = 'running'"
    " AND owner = :owner AND claim_generation = :generation"
)
_INSERT_FENCED_EVENT = {
    "sqlite": (
        f"INSERT INTO events {_EVENT_COLUMNS}"
        " SELECT :session_id, :key, :kind, :agent, :payload, :created_at"
        f" WHERE EXISTS ({_HELD})"
        ' ON CONFLICT (session_id, "key") DO NOTHING RETURNING id'
    ),
    "postgresql": (
        f"WITH held AS ({_HELD} FOR UPDATE)"
        f" INSERT INTO events {_EVENT_COLUMNS}"
        " SELECT :session_id, :key, :kind, :agent, :payload, :created_at"
        " WHERE EXISTS (SELECT 1 FROM held)"
        ' ON CONFLICT (session_id, "key") DO NOTHING RETURNING id'
    ),
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def _event_values(
    session_id: str, kind: str, agent: str | None, key: str | None, payload: dict[str, Any]
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "key": key or f"{kind}:{uuid.uuid4().hex}",
        "kind": kind,
        "agent": agent,
        "payload": payload,
        "created_at": utcnow(),
    }


@contextmanager
def heard(opened: Any, listener: Listener | None) -> Iterator[Tx]:
    """The transaction `opened`; once it has committed, tell `listener` its new events."""
    new_events: list[tuple[str, dict[str, Any]]] = []
    with opened as tx:
        tx.info["new_events"] = new_events
        try:
            yield tx
        except BaseException:
            # On a broken connection tidying must not replace the error that says why.
            with contextlib.suppress(Exception):
                tx.info.pop("new_events", None)
            raise
        tx.info.pop("new_events", None)
    if listener is not None:
        for session_id, event in new_events:
            listener(session_id, event)


def _heard(tx: Tx, values: dict[str, Any]) -> None:
    """Keep a committed-to-be event for the transaction's listener (`heard`)."""
    new_events = tx.info.get("new_events")
    if new_events is not None:
        new_events.append((values["session_id"], event_view(values)))


def add_event(
    tx: Tx,
    session_id: str,
    kind: str,
    *,
    agent: str | None = None,
    key: str | None = None,
    **payload: Any,
) -> bool:
    """Append an event; with a `key` already present, do nothing and return False."""
    values = _event_values(session_id, kind, agent, key, payload)
    if tx.first(_INSERT_EVENT, values) is None:
        return False
    _heard(tx, values)
    return True


def add_fenced_event(
    tx: Tx, claim: Claim, kind: str, *, agent: str | None, key: str, **payload: Any
) -> bool | None:
    """Append a keyed event in one statement if `claim` holds the session (no transaction
    around it). True if added; None if nothing went in, for the caller to
    tell a lost claim from a key present already."""
    values = _event_values(claim.session_id, kind, agent, key, payload)
    fenced = values | {"owner": claim.owner.id, "generation": claim.generation}
    if tx.first(_INSERT_FENCED_EVENT[tx.dialect], fenced) is None:
        return None
    _heard(tx, values)
    return True


def add_assumption(
    tx: Tx,
    session_id: str,
    key: str,
    *,
    agent: str,
    assumption: str,
    why: str,
    source: str,
    **facts: Any,
) -> None:
    """One entry of the assumptions ledger (keyed, so a re-run adds nothing). `facts`:
    what a late answer is held against (`value`, `about`, `part`; None ones left out)."""
    add_event(
        tx,
        session_id,
        "assumption",
        agent=agent,
        key=f"assumption:{key}",
        assumption=assumption,
        why=why,
        source=source,
        **{name: value for name, value in facts.items() if value is not None},
    )


def update_sql(table: str, columns: list[str], where: str, *, also: str = "") -> str:
    """UPDATE `table` SET each column to its like-named parameter (and the `also`
    assignments) WHERE `where`."""
    assignments = [f"{c} = :{c}" for c in columns] + ([also] if also else [])
    return f"UPDATE {table} SET {', '.join(assignments)} WHERE {where}"


def json_value(value: Any) -> Any:
    """A JSON value read through a computed column (SQLite hands it back as text)."""
    return json.loads(value) if isinstance(value, str) else value
