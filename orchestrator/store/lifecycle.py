"""Session lifecycle: create, claim, heartbeat, release, abandon, cancel, and the fence.

A session is driven only by the process whose claim is on its row: owner id, identity
(pid, host, boot id, PID namespace, start time), lease, and a generation that grows on
every claim. Claims are compare-and-swap UPDATEs inside one write transaction, so of
several racing commands exactly one wins; a driver's every write starts with `fence`, so a
process that lost its claim cannot write after the loss.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, insert, update

from orchestrator.errors import CancelRequested, SessionBusy, SessionNotWaiting
from orchestrator.store._tx import FINAL_STATUSES, add_event, fence, finish, utcnow
from orchestrator.store.owner import Claim, Owner, lease_left
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import iso_epoch, owner_alive

__all__ = [
    "create",
    "take",
    "heartbeat",
    "release",
    "abandon",
    "record_failure",
    "check_call",
    "cancel",
    "busy_message",
]


def _owner_columns(owner: Owner) -> dict[str, Any]:
    return {
        "owner": owner.id,
        "owner_pid": owner.pid,
        "owner_host": owner.host,
        "owner_boot": owner.boot,
        "owner_pidns": owner.pidns,
        "owner_started": owner.started,
        "lease_expires_at": owner.lease_until(),
    }


def create(
    conn: Connection, task: str, *, agents: dict[str, Any], settings: dict[str, Any], owner: Owner
) -> Claim:
    session_id = uuid.uuid4().hex[:12]
    now = utcnow()
    conn.execute(
        insert(_S).values(
            id=session_id,
            task=task,
            status="running",
            created_at=now,
            updated_at=now,
            claim_generation=1,
            **_owner_columns(owner),
            agents=agents,
            settings=settings,
            tasks=[],
            round=0,
            answers_used=0,
        )
    )
    conn.execute(
        insert(_T).values(
            session_id=session_id,
            clarification_used=False,
            clarification_resolved=False,
            questions_surfaced=0,
            fallbacks_injected=0,
            fallback_counts={},
        )
    )
    add_event(conn, session_id, "session_started", task=task, settings=settings)
    return Claim(session_id, owner, 1)


def busy_message(row: Any) -> str:
    """The "being resumed elsewhere" message: who holds it and when a takeover becomes possible."""
    left = lease_left(row.lease_expires_at)
    return (
        f"session {row.id} is being resumed elsewhere (pid {row.owner_pid} on "
        f"{row.owner_host}, lease until {iso_epoch(row.lease_expires_at)}; a takeover is "
        f"possible in {left:.0f} s if it stops renewing); wait for that command to finish, "
        f"then check `orchestrator status {row.id}`"
    )


def take(conn: Connection, row: Any, owner: Owner) -> Claim:
    """Claim `row` (read under lock in this transaction) for `owner`, or raise.

    Every claim moves the generation on, a re-claim by the same owner too: whatever drive
    held the session before (another process, or another thread of this one) is fenced out.
    """
    if row.status == "running" and row.owner == owner.id:
        generation = row.claim_generation + 1
        conn.execute(
            update(_S)
            .where(_S.c.id == row.id)
            .values(
                claim_generation=generation,
                lease_expires_at=owner.lease_until(),
                updated_at=utcnow(),
            )
        )
        return Claim(row.id, owner, generation)
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to resume")
    if row.status == "running" and owner_alive(row):
        raise SessionBusy(busy_message(row))
    # Compare-and-swap on what we read: exactly one of several racing commands wins, and
    # the generation moves on, which fences out whoever held the claim before.
    generation = row.claim_generation + 1
    claimed = conn.execute(
        update(_S)
        .where(
            _S.c.id == row.id,
            _S.c.status == row.status,
            _S.c.claim_generation == row.claim_generation,
        )
        .values(
            status="running",
            claim_generation=generation,
            **_owner_columns(owner),
            cancel_requested_at=None,
            last_error=None,
            updated_at=utcnow(),
        )
    )
    if claimed.rowcount != 1:
        raise SessionBusy(f"session {row.id} was just taken by another command")
    took_over = row.status == "running"
    add_event(
        conn,
        row.id,
        "status",
        status="running",
        previous=row.status,
        note="took over from a process that is gone" if took_over else "resumed",
    )
    return Claim(row.id, owner, generation)


def heartbeat(conn: Connection, claim: Claim) -> bool:
    """Renew the lease; False once the claim is lost (the driver must stop)."""
    renewed = conn.execute(
        update(_S)
        .where(
            _S.c.id == claim.session_id,
            _S.c.owner == claim.owner.id,
            _S.c.claim_generation == claim.generation,
            _S.c.status == "running",
        )
        .values(lease_expires_at=claim.owner.lease_until())
    )
    return renewed.rowcount == 1


def release(
    conn: Connection,
    claim: Claim,
    status: str,
    *,
    summary: str | None = None,
    error: str | None = None,
) -> None:
    """Leave the session in `status` and drop the claim (raises ClaimLost if not ours)."""
    fence(conn, claim)
    finish(conn, claim.session_id, status, summary=summary, error=error)


def abandon(conn: Connection, claim: Claim) -> None:
    """Give up the claim without an outcome (Ctrl+C, a bug): the next resume takes over.
    Does nothing if the claim was lost already."""
    conn.execute(
        update(_S)
        .where(
            _S.c.id == claim.session_id,
            _S.c.owner == claim.owner.id,
            _S.c.claim_generation == claim.generation,
        )
        .values(lease_expires_at=0.0, updated_at=utcnow())
    )


def record_failure(conn: Connection, claim: Claim, agent: str | None, message: str) -> None:
    """An agent call failed: log it, show it (`stalled`, `last_error`), and let go of the
    session so that `resume` retries the call and `cancel` ends it at once."""
    fence(conn, claim)
    add_event(conn, claim.session_id, "agent_failed", agent=agent, error=message)
    conn.execute(
        update(_S)
        .where(_S.c.id == claim.session_id)
        .values(last_error=message, lease_expires_at=0.0, updated_at=utcnow())
    )


def check_call(conn: Connection, claim: Claim) -> None:
    """Before an agent call: the claim still holds (else ClaimLost) and no cancel was asked
    (else CancelRequested). One transaction, at the same place for both."""
    row = fence(conn, claim)
    if row.cancel_requested_at is not None:
        raise CancelRequested(f"session {claim.session_id}: cancel was requested")


def cancel(conn: Connection, row: Any, *, resolve: Any) -> str:
    """Stop a session that has not ended; returns "cancelled" or "cancel_requested".

    A waiting session (its open question is cancelled through the gate: `resolve`) and a
    running one whose process is gone end at once; one whose process lives gets a request
    that its driver honours before its next agent call.
    """
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to cancel")
    if row.status == "running" and owner_alive(row):
        if row.cancel_requested_at is None:
            conn.execute(
                update(_S)
                .where(_S.c.id == row.id)
                .values(cancel_requested_at=utcnow(), updated_at=utcnow())
            )
            add_event(conn, row.id, "cancel_requested", key="cancel_requested", source="user")
        return "cancel_requested"
    if resolve():  # the open question, cancelled through the gate (ends the session)
        return "cancelled"
    add_event(conn, row.id, "cancel", key="cancel", source="user")
    finish(conn, row.id, "cancelled")
    return "cancelled"
