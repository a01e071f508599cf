"""What every store module shares: keyed events, the session row, the gate state, and the
fence a driver's writes pass through. Plain SQL on a `Tx` (orchestrator.store.sql), the
same text for SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain import gate
from orchestrator.errors import ClaimLost, SessionNotFound
from orchestrator.store.owner import OWNER_COLUMNS, Claim
from orchestrator.store.sql import Row, Tx
from orchestrator.store.views import event_view, joined_row

__all__ = [
    "Listener",
    "utcnow",
    "heard",
    "add_event",
    "add_fenced_event",
    "add_assumption",
    "write_gate_update",
    "fence",
    "finish",
    "RELEASED",
]


Listener = Callable[[str, dict[str, Any]], None]  # (session_id, event)

# GateState field -> orchestrator_state column, for every field a GateUpdate can name.
GATE_COLUMNS = {
    "used": "clarification_used",
    "resolved": "clarification_resolved",
    "question": "clarification_question",
    "response": "user_clarification_response",
    "asked_by": "asked_by",
    "request_key": "request_key",
    "resolution": "resolution",
    "fallback_counts": "fallback_counts",
    "timed_out": "timed_out",
    "note": "answer_note",
    # The parts' answers are merged into the question_object JSON (write_gate_update), not
    # written as a column value.
    "parts": "question_object",
}

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


def gate_columns(update_: gate.GateUpdate) -> dict[str, Any]:
    """The columns an update names: the store's half of `GateState.apply`."""
    return {GATE_COLUMNS[name]: value for name, value in update_.items() if name != "parts"}


def write_gate_update(tx: Tx, session_id: str, update_: gate.GateUpdate, **extra: Any) -> None:
    """Write only the fields the gate named (plus `extra` columns): a merge, never an
    overwrite of the whole state."""
    values = gate_columns(update_) | extra
    parts = update_.get("parts")
    if parts:
        # A multi-part question's answers live with its parts, inside question_object.
        stored = tx.first(
            "SELECT question_object FROM orchestrator_state WHERE session_id = :sid",
            {"sid": session_id},
        )
        question = dict(json_value(stored.question_object) or {}) if stored else {}
        by_number = {part.number: part for part in parts}
        question["parts"] = [
            {**entry, "response": by_number[entry["part"]].response}
            | ({"declined": True} if by_number[entry["part"]].declined else {})
            for entry in question.get("parts", [])
        ]
        values["question_object"] = question
    if values:
        tx.run(
            update_sql("orchestrator_state", list(values), "session_id = :sid"),
            values | {"sid": session_id},
        )


def holds(row: Any, claim: Claim) -> bool:
    return bool(
        row.status == "running"
        and row.owner == claim.owner.id
        and row.claim_generation == claim.generation
    )


_FENCE_SQL = (
    "SELECT id, status, owner, owner_pid, owner_host, claim_generation, round, usage"
    " FROM sessions WHERE id = :id"
)


def fence(
    tx: Tx,
    claim: Claim,
    *,
    joined: bool = False,
    extra: str = "",
    params: dict[str, Any] | None = None,
) -> Row:
    """Raise ClaimLost unless `claim` still holds its session; return the session row
    (`joined`: with its gate state's columns, and `extra` select items; otherwise only
    the claim's columns, the round and the usage: never the script or the task board, which
    grow with the session and would make every write of a long session cost more).

    Called first in every transaction a driver writes in (and when an agent call starts):
    the row is locked (FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE already holds the
    write lock), so no takeover can slip between this check and the writes after it.
    """
    if joined or extra:
        row = joined_row(tx, claim.session_id, lock=True, extra=extra, params=params)
    else:
        found = tx.first(_FENCE_SQL + tx.lock_rows, {"id": claim.session_id})
        if found is None:
            raise SessionNotFound(claim.session_id)
        row = found
    check_holds(row, claim)
    return row


def check_holds(row: Any, claim: Claim) -> None:
    if not holds(row, claim):
        raise ClaimLost(claim.session_id, _holder(row))


def _holder(row: Any) -> str:
    if row.status != "running":
        return f"the session is now {row.status}"
    if row.owner_pid is None:
        return "another command took it over"
    return f"taken over by pid {row.owner_pid} on {row.owner_host}"


def json_value(value: Any) -> Any:
    """A JSON value read through a computed column (SQLite hands it back as text)."""
    return json.loads(value) if isinstance(value, str) else value


# A session nobody drives: its claim columns cleared (on finishing, or on a hand-off).
RELEASED = dict.fromkeys((*OWNER_COLUMNS, "cancel_requested_at", "last_error", "last_error_kind"))


def finish(
    tx: Tx,
    session_id: str,
    status: str,
    *,
    summary: str | None = None,
    error: str | None = None,
) -> None:
    """Set the session's status; a session that stops running drops its claim."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if status != "running":
        values.update(RELEASED)
    if summary is not None:
        values["summary"] = summary
    if error is not None:
        values["error"] = error
    tx.run(update_sql("sessions", list(values), "id = :sid"), values | {"sid": session_id})
    details = {k: v for k, v in (("summary", summary), ("error", error)) if v is not None}
    add_event(tx, session_id, "status", status=status, **details)
