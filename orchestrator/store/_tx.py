"""What every store module shares: transactions, keyed events, the session row, the gate
state, and the fence a driver's writes pass through."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, select, update

from orchestrator import gate
from orchestrator.errors import ClaimLost, SessionNotFound
from orchestrator.store.owner import Claim
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import event_view, state_from_row

__all__ = [
    "STATUSES",
    "FINAL_STATUSES",
    "Listener",
    "utcnow",
    "write",
    "read",
    "add_event",
    "add_assumption",
    "session_row",
    "gate_state",
    "state_row",
    "write_gate_update",
    "fence",
    "finish",
]

STATUSES = ("running", "paused", "completed", "failed", "cancelled")
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

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
}


def utcnow() -> datetime:
    return datetime.now(UTC)


@contextmanager
def write(
    engine: Engine, listener: Listener | None = None, *, durable: bool = False
) -> Iterator[Connection]:
    """A write transaction (BEGIN IMMEDIATE on SQLite); `listener` hears its new events
    once it has committed.

    `durable`: fsync this commit even on SQLite's synchronous=NORMAL, so that it survives
    a power loss and not only a killed process (used for the user's answer).
    """
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect().execution_options(write=True) as conn:
        # On the DBAPI connection: SQLAlchemy would wrap the PRAGMA in a transaction, and
        # SQLite only changes the safety level outside one.
        raw = conn.connection.driver_connection if durable and sqlite else None
        if raw is not None:
            raw.execute("PRAGMA synchronous = FULL")
        conn.info["new_events"] = []
        try:
            with conn.begin():
                yield conn
        finally:
            if raw is not None:
                raw.execute("PRAGMA synchronous = NORMAL")
        new_events = conn.info.pop("new_events")
    if listener is not None:
        for session_id, event in new_events:
            listener(session_id, event)


@contextmanager
def read(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


def add_event(
    conn: Connection,
    session_id: str,
    kind: str,
    *,
    agent: str | None = None,
    key: str | None = None,
    **payload: Any,
) -> bool:
    """Append an event; with a `key` already present, do nothing and return False."""
    values = {
        "session_id": session_id,
        "key": key or f"{kind}:{uuid.uuid4().hex}",
        "kind": kind,
        "agent": agent,
        "payload": payload,
        "created_at": utcnow(),
    }
    added = conn.execute(_insert_event(conn.dialect.name), values).first()
    if added is None:
        return False
    conn.info["new_events"].append((session_id, event_view(values)))
    return True


_EVENT_INSERTS: dict[str, Any] = {}  # dialect name -> the statement, built once


def _insert_event(dialect: str) -> Any:
    """INSERT ... ON CONFLICT (session_id, key) DO NOTHING RETURNING id, for `dialect`.

    One statement, and any other uniqueness violation (the one-question index) still
    raises; RETURNING tells whether a row went in (psycopg reports rowcount -1 for it).
    Built once (rebuilding it per event cost more than running it); values are bound."""
    statement = _EVENT_INSERTS.get(dialect)
    if statement is None:
        if dialect == "postgresql":
            from sqlalchemy.dialects import postgresql as dialect_module
        else:
            from sqlalchemy.dialects import sqlite as dialect_module  # type: ignore[no-redef]
        statement = (
            dialect_module.insert(_E)
            .on_conflict_do_nothing(index_elements=["session_id", "key"])
            .returning(_E.c.id)
        )
        _EVENT_INSERTS[dialect] = statement
    return statement


def add_assumption(
    conn: Connection,
    session_id: str,
    key: str,
    *,
    agent: str,
    assumption: str,
    why: str,
    source: str,
) -> None:
    """One entry of the assumptions ledger (keyed, so a re-run adds nothing)."""
    add_event(
        conn,
        session_id,
        "assumption",
        agent=agent,
        key=f"assumption:{key}",
        assumption=assumption,
        why=why,
        source=source,
    )


# Statements run several times per agent call, built once (bound by `id`).
_SESSION = select(_S).where(_S.c.id == bindparam("id"))
_SESSION_LOCKED = _SESSION.with_for_update()
_STATE = select(_T).where(_T.c.session_id == bindparam("id"))


def session_row(conn: Connection, session_id: str, *, lock: bool = False) -> Any:
    row = conn.execute(_SESSION_LOCKED if lock else _SESSION, {"id": session_id}).first()
    if row is None:
        raise SessionNotFound(session_id)
    return row


def gate_state(conn: Connection, session_id: str) -> gate.GateState:
    return state_from_row(state_row(conn, session_id))


def state_row(conn: Connection, session_id: str) -> Any:
    """The session's orchestrator_state row."""
    return conn.execute(_STATE, {"id": session_id}).one()


def gate_columns(update_: gate.GateUpdate) -> dict[str, Any]:
    """The columns an update names: the store's half of `GateUpdate.apply`."""
    return {GATE_COLUMNS[name]: value for name, value in update_.named().items()}


def write_gate_update(
    conn: Connection, session_id: str, update_: gate.GateUpdate, **extra: Any
) -> None:
    """Write only the fields the gate named (plus `extra` columns): a merge, never an
    overwrite of the whole state."""
    values = gate_columns(update_) | extra
    if values:
        conn.execute(update(_T).where(_T.c.session_id == session_id).values(**values))


def fence(conn: Connection, claim: Claim) -> Any:
    """Raise ClaimLost unless `claim` still holds its session; return the session row.

    Called first in every transaction a driver writes in (and when an agent call starts):
    the row is locked (FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE already holds the
    write lock), so no takeover can slip between this check and the writes after it.
    """
    row = session_row(conn, claim.session_id, lock=True)
    if (
        row.status != "running"
        or row.owner != claim.owner.id
        or row.claim_generation != claim.generation
    ):
        raise ClaimLost(claim.session_id, _holder(row))
    return row


def _holder(row: Any) -> str:
    if row.status != "running":
        return f"the session is now {row.status}"
    if row.owner_pid is None:
        return "another command took it over"
    return f"taken over by pid {row.owner_pid} on {row.owner_host}"


def finish(
    conn: Connection,
    session_id: str,
    status: str,
    *,
    summary: str | None = None,
    error: str | None = None,
) -> None:
    """Set the session's status; a session that stops running drops its claim."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if status != "running":
        values.update(
            owner=None,
            owner_pid=None,
            owner_host=None,
            owner_boot=None,
            owner_pidns=None,
            owner_started=None,
            lease_expires_at=None,
            cancel_requested_at=None,
            last_error=None,
        )
    if summary is not None:
        values["summary"] = summary
    if error is not None:
        values["error"] = error
    conn.execute(update(_S).where(_S.c.id == session_id).values(**values))
    details = {k: v for k, v in (("summary", summary), ("error", error)) if v is not None}
    add_event(conn, session_id, "status", status=status, **details)
